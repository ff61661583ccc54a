#!/usr/bin/env bash
# `fsdpc tokenize` beside Hugging Face's tokenizers: the same text file, the
# same tokenizer.json, the same threads; checks the ids are identical and
# prints one JSON line per run and a summary (tokens/s of each, the ratio).
# No GPT-2 tokenizer.json is on the machine and there is no network but pip,
# so the tokenizer is trained here by `tokenizers` (bench/tokenize_hf.py)
# on the corpus itself: GPT-2's pre-tokenizer (KIND gpt2) or Llama 3's
# split (llama3), vocabulary 50257 at most. The corpus is this machine's
# licence texts (/usr/share/common-licenses: GPL-3 and the others),
# /usr/share/doc/*/copyright and Python's standard library sources (text and
# code), repeated to MB megabytes. tokenizers comes from its own venv
# (FSDPC_TOKENIZERS_VENV, default ~/.cache/fsdpc/tokenizers-venv,
# TOKENIZERS_SPEC default tokenizers==0.23.3). A benchmark: it asserts only
# that the ids match (exit 1 if not).
# Usage: bench/tokenize_bench.sh [THREADS (default: every core)] [MB (default 64)] [KIND] [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=${1:-$(nproc)}
mb=${2:-64}
kind=${3:-gpt2}
build=${4:-$root/build}
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "tokenize_bench.sh: THREADS must be a positive whole number, got $threads" >&2; exit 2; }
[[ $mb =~ ^[1-9][0-9]*$ ]] || { echo "tokenize_bench.sh: MB must be a positive whole number, got $mb" >&2; exit 2; }
case $kind in gpt2 | llama3) ;; *) echo "tokenize_bench.sh: KIND $kind is not gpt2 or llama3" >&2; exit 2 ;; esac
fsdpc=$build/tools/fsdpc
[[ -x $fsdpc ]] || { echo "tokenize_bench.sh: build the fsdpc target first ($fsdpc)" >&2; exit 2; }

venv=${FSDPC_TOKENIZERS_VENV:-$HOME/.cache/fsdpc/tokenizers-venv}
spec=${TOKENIZERS_SPEC:-tokenizers==0.23.3}
if ! "$venv/bin/python" -c 'import tokenizers, numpy' 2>/dev/null; then
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2 || { echo "tokenize_bench.sh: could not create a venv at $venv (apt-get install python3-venv)" >&2; exit 2; }
  "$venv/bin/pip" install --quiet "$spec" numpy >&2 || { echo "tokenize_bench.sh: pip could not install $spec (is PyPI reachable?)" >&2; exit 2; }
fi
py=$venv/bin/python

work=${FSDPC_TOKENIZE_BENCH_DIR:-$HOME/.cache/fsdpc/tokenize-bench}
mkdir -p "$work"
corpus=$work/corpus-${mb}mb.txt
if [[ ! -s $corpus ]]; then
  # Only files that are UTF-8, so both sides read the same text.
  { cat /usr/share/common-licenses/*; find /usr/share/doc -name copyright -type f | sort | xargs cat;
    find /usr/lib/python3* -name '*.py' -type f | sort | xargs cat; } 2>/dev/null |
    iconv -f UTF-8 -t UTF-8 -c > "$work/unique.txt"
  : > "$corpus"
  while (( $(stat -c %s "$corpus") < mb * 1000000 )); do cat "$work/unique.txt" >> "$corpus"; done
  head -c $((mb * 1000000)) "$corpus" > "$corpus.cut" && mv "$corpus.cut" "$corpus"
  # The cut may split a character: drop what is not UTF-8 at the end.
  iconv -f UTF-8 -t UTF-8 -c "$corpus" > "$corpus.ok" && mv "$corpus.ok" "$corpus"
fi
tokenizer=$work/$kind-tokenizer.json
[[ -s $tokenizer ]] || "$py" "$root/bench/tokenize_hf.py" train "$tokenizer" "$work/unique.txt" "$kind"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s.%N)
"$fsdpc" tokenize --tokenizer "$tokenizer" "$corpus" --out "$out/fsdpc.u32" --threads "$threads" > "$out/fsdpc.log"
end=$(date +%s.%N)
"$py" "$root/bench/tokenize_hf.py" encode "$tokenizer" "$corpus" "$threads" "$out/hf.u32" > "$out/hf.json"
"$py" - "$out" "$start" "$end" "$threads" "$kind" "$(stat -c %s "$corpus")" <<'PY'
import json, re, sys
import numpy as np
out, start, end, threads, kind, size = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
log = open(out + "/fsdpc.log").read()
m = re.search(r"-> (\d+) tokens .* in ([0-9.]+) s", log)
tokens, seconds = int(m.group(1)), float(m.group(2))
wall = end - start
fsdpc = {"impl": "fsdpc tokenize", "threads": threads, "tokens": tokens, "encode_s": seconds, "total_s": round(wall, 3),
         "encode_tokens_per_s": round(tokens / seconds), "total_tokens_per_s": round(tokens / wall)}
hf = json.loads(open(out + "/hf.json").read())
a, b = np.fromfile(out + "/fsdpc.u32", dtype=np.uint32), np.fromfile(out + "/hf.u32", dtype=np.uint32)
same = a.shape == b.shape and bool((a == b).all())
first = None if same else int(np.argmax(a[:min(a.size, b.size)] != b[:min(a.size, b.size)]))
print(json.dumps(fsdpc))
print(json.dumps(hf))
print(json.dumps({"summary": "tokenize", "kind": kind, "bytes": size, "threads": threads, "ids_identical": same,
                  "first_difference": first,
                  "fsdpc_vs_hf_encode": round(fsdpc["encode_tokens_per_s"] / hf["encode_tokens_per_s"], 2),
                  "fsdpc_vs_hf_total": round(fsdpc["total_tokens_per_s"] / hf["total_tokens_per_s"], 2)}))
sys.exit(0 if same else 1)
PY
