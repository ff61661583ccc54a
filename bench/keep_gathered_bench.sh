#!/usr/bin/env bash
# What --keep-gathered buys and costs: the 4x512 GPT-2 (vocab 8192, AdamW)
# trained with M = 4 micro-batches a step by zero3 and zero2 on 2 ranks,
# each three ways: every micro-batch synchronising, --no-sync (gradients
# reduced after the last micro-batch only) and --keep-gathered (parameters
# also gathered once a step). Prints one JSON object per run: the median step
# after the first, rank 0's peak bytes by category, and the bytes each rank
# sends per step in collectives (ring convention, from `fsdpc dump --stats`
# of the traces the step runs: M micro-batches, plus the gather and reduce).
# Each rank runs one thread, as fsdpc gives 2 ranks on 2 cores.
# A benchmark: it asserts nothing, and its figures are only as quiet as the
# machine.
# Usage: bench/keep_gathered_bench.sh [BUILD_DIR] [STEPS]
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
steps=${2:-5}
fsdpc=$build/tools/fsdpc
[[ -x $fsdpc ]] || { echo "keep_gathered_bench.sh: build fsdpc first ($fsdpc)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/config.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 4, "n_head": 8, "n_embd": 512, "vocab_size": 8192, "n_positions": 256,
 "layer_norm_epsilon": 1e-5}
JSON
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
micro=4
batch=8  # global: 4 rows a rank, one a micro-batch
seq=256

# FLAGS... -> "median_step_ms peak_json" of rank 0's log, or nothing on failure
run() {
  local log=$work/log.jsonl
  rm -f "$log"
  local cmd=(mpirun -n 2 --oversubscribe "$fsdpc" train --config "$work/config.json" --batch "$batch" --seq "$seq"
    --grad-accum "$micro" --steps "$steps" --log-json "$log" "$@")
  FSDPC_CPU_THREADS=1 "${cmd[@]}" >"$work/out.txt" 2>&1 || { echo "run failed: ${cmd[*]}" >&2; tail -5 "$work/out.txt" >&2; return 1; }
  python3 - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
times = [r["step_ms"] for r in rows[1:]] or [rows[0]["step_ms"]]
print(statistics.median(times), json.dumps(rows[-1]["peak_bytes"]))
PY
}

# STAGES WEIGHT FLAGS... -> collective bytes per rank of the named traces, times WEIGHT
bytes_of() {
  local stages=$1 weight=$2
  shift 2
  "$fsdpc" dump --config "$work/config.json" --batch $((batch / 2 / micro)) --seq "$seq" --world-size 2 \
    --stage "$stages" --stats --format json "$@" >"$work/stats.json" || return 1
  python3 - "$work/stats.json" "$weight" <<'PY'
import json, sys
print(sum(t["stats"]["collective_bytes"] for t in json.load(open(sys.argv[1]))) * float(sys.argv[2]))
PY
}

for strategy in zero3 zero2; do
  for mode in sync no-sync keep-gathered; do
    flags=(--strategy "$strategy")
    case $mode in
      sync) moved=$(bytes_of forward,backward "$micro" "${flags[@]}") ;;
      no-sync)
        # M-1 micro-batches without reductions, the last accumulating.
        local_bytes=$(bytes_of forward,backward $((micro - 1)) "${flags[@]}" --no-sync)
        last_bytes=$(bytes_of forward,backward 1 "${flags[@]}" --accumulate)
        moved=$(python3 -c "print($local_bytes + $last_bytes)") ;;
      keep-gathered) moved=$(bytes_of gather_once 1 "${flags[@]}" --keep-gathered) ;;
    esac
    [[ $mode == sync ]] || flags+=("--$mode")
    read -r t peak < <(run "${flags[@]}") || continue
    echo "{\"strategy\": \"$strategy\", \"mode\": \"$mode\", \"micro_batches\": $micro, \"step_ms\": $t, \"collective_bytes_per_rank\": $moved, \"peak_bytes\": $peak}"
  done
done
