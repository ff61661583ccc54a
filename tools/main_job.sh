#!/usr/bin/env bash
# The Quick start's main job on an already built tree: show the collectives of
# the ZeRO-3 forward each of 2 ranks runs, train a small byte-level GPT-2 on
# real text (the GNU GPL v3 that every Debian machine ships; validation on the
# GPL v2) with 2 MPI processes under zero3, save a Hugging Face checkpoint and
# sample from it. tools/quickstart.sh builds and then runs this; CTest runs it
# too ("quickstart: main job"), so the first thing a user runs is tested.
#
# Usage: tools/main_job.sh [BUILD_DIR [OUT_DIR]]   (default: build, build/checkpoint)
#
# Every step writes whole files and reads them afterwards: no reader closes a
# pipe early, so no step can die of SIGPIPE under pipefail; any failure names
# the step and its exit status.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$build/checkpoint}
fsdpc=$build/tools/fsdpc
step="start"
trap 'rc=$?; echo "quickstart: FAILED (exit $rc) while: $step" >&2; exit $rc' ERR

if [[ ! -x $fsdpc ]]; then
  echo "quickstart: FAILED: $fsdpc is missing (build first: bash tools/build.sh)" >&2
  exit 2
fi
if [[ $(id -u) -eq 0 ]]; then  # Open MPI refuses root unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
train=/usr/share/common-licenses/GPL-3
val=/usr/share/common-licenses/GPL-2
model=(--model gpt2-tiny --seq 64 --strategy zero3 --bucketing unit)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== the collectives of rank 0's forward (fsdpc dump --world-size 2 ... --stage del)"
step="fsdpc dump (the zero3 traces of 2 ranks)"
"$fsdpc" dump "${model[@]}" --batch 8 --world-size 2 --stage del -o "$work/del.trace"
step="reading the forward's collectives from the dump"
awk '/^def backward/ {done = 1} !done && /all_gather|reduce_scatter|all_reduce|wait\(/ {sub(/  #.*/, ""); print}' \
  "$work/del.trace" > "$work/collectives.txt"
if [[ ! -s $work/collectives.txt ]]; then
  echo "quickstart: FAILED: the zero3 forward in $work/del.trace has no collectives" >&2
  exit 1
fi
cat "$work/collectives.txt"

echo "== mpirun -np 2 fsdpc train on $train (zero3, 2 ranks)"
step="mpirun -np 2 fsdpc train"
mpirun -np 2 --oversubscribe "$fsdpc" train "${model[@]}" --batch 16 --steps 400 \
  --optimizer adamw --lr 1e-3 --weight-decay 0.01 --clip 1.0 \
  --data "$train" --val-data "$val" --eval-every 100 --eval-batches 8 --log-every 50 \
  --save "$out"
step="listing the checkpoint"
echo "== saved: $(ls "$out" | tr '\n' ' ')"

echo "== fsdpc generate --init $out --prompt 'This License' --max-new-tokens 120 --temperature 0.8"
step="fsdpc generate"
"$fsdpc" generate --init "$out" --prompt "This License" --max-new-tokens 120 --temperature 0.8 --top-k 20 --seed 1
echo
echo "== quickstart: done"
