#!/usr/bin/env bash
# The main job: build fsdpc, show the collectives of the ZeRO-3 forward each
# of 2 ranks runs, then train a small byte-level GPT-2 on real text (the GNU
# GPL v3 that every Debian machine ships; validation on the GPL v2) with 2
# MPI processes under zero3, and save a Hugging Face checkpoint.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/build.sh"
cd "$root"
if [[ $(id -u) -eq 0 ]]; then  # Open MPI refuses root unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
train=/usr/share/common-licenses/GPL-3
val=/usr/share/common-licenses/GPL-2
model=(--model gpt2-tiny --seq 64 --strategy zero3 --bucketing unit)

echo "== the collectives of rank 0's forward (fsdpc dump --world-size 2 ... --stage del)"
./build/tools/fsdpc dump "${model[@]}" --batch 8 --world-size 2 --stage del |
  awk '/^def backward/ {exit} /all_gather|reduce_scatter|all_reduce|wait\(/ {sub(/  #.*/, ""); print}'

echo "== mpirun -np 2 fsdpc train on $train (zero3, 2 ranks)"
mpirun -np 2 --oversubscribe ./build/tools/fsdpc train "${model[@]}" --batch 16 --steps 400 \
  --optimizer adamw --lr 1e-3 --weight-decay 0.01 --clip 1.0 \
  --data "$train" --val-data "$val" --eval-every 100 --eval-batches 8 --log-every 50 \
  --save build/checkpoint
echo "== saved: $(ls build/checkpoint | tr '\n' ' ')"

echo "== fsdpc generate --init build/checkpoint --prompt 'This License' --max-new-tokens 120 --temperature 0.8"
./build/tools/fsdpc generate --init build/checkpoint --prompt "This License" --max-new-tokens 120 --temperature 0.8 --top-k 20 --seed 1
