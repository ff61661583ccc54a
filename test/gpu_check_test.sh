#!/usr/bin/env bash
# tools/gpu_check.sh's path without a GPU, against a build folder:
#   bash test/gpu_check_test.sh BUILD_DIR
# It must exit 0 with its 7 files under --out, summary.json listing the
# stages versions, tests, nccl, bench, torch in that order, versions passed
# and every other stage skipped with a reason. Where a GPU is visible the
# whole check would run (minutes): exit 77, which CTest reports as skipped.
set -euo pipefail
(($# == 1)) && [[ -d "$1" ]] || { echo "usage: bash test/gpu_check_test.sh BUILD_DIR" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd)
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "gpu_check_test.sh: a GPU is visible; run tools/gpu_check.sh itself"
  exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/fsdpc-gpu-check-test.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail() { echo "gpu_check_test.sh: $*" >&2; cat "$out/summary.json" >&2 2>/dev/null || true; exit 1; }

rc=0
bash "$root/tools/gpu_check.sh" "$build" --out "$out" >"$out/stdout" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$out/stdout" >&2; fail "tools/gpu_check.sh exited $rc"; }
for f in summary.json check.log versions.txt tests.log nccl.log bench.log torch.log; do
  [[ -f "$out/$f" ]] || fail "$f was not written"
done
# One line per stage: "NAME STATUS REASON".
stages=$(grep -o '"stage": "[a-z]*", "status": "[a-z]*", "reason": "[^"]*"' "$out/summary.json" |
         sed 's/"stage": "\([a-z]*\)", "status": "\([a-z]*\)", "reason": "\(.*\)"/\1 \2 \3/')
[[ $(cut -d' ' -f1 <<<"$stages" | paste -sd' ') == "versions tests nccl bench torch" ]] ||
  fail "stages not versions, tests, nccl, bench, torch in order: $(cut -d' ' -f1 <<<"$stages" | paste -sd' ')"
[[ $(head -1 <<<"$stages") == "versions passed " ]] || fail "versions did not pass: $(head -1 <<<"$stages")"
while read -r name status reason; do
  [[ $status == skipped && -n "$reason" ]] || fail "$name: '$status' without a GPU, reason '$reason' (expected skipped, with a reason)"
done < <(tail -n +2 <<<"$stages")
grep -q '"ok": true' "$out/summary.json" || fail "summary.json does not say ok"
echo "gpu_check_test.sh: every GPU stage skipped with its reason"
