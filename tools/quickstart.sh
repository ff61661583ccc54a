#!/usr/bin/env bash
# The main job: build fsdpc, show what it compiles (the FSDP tutorial model
# sharded over 2 ranks), then train GPT-2 tiny with ZeRO-3 over 2 MPI
# processes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/build.sh"
cd "$root"
if [[ $(id -u) -eq 0 ]]; then  # Open MPI refuses root unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
echo "== fsdpc trace --model mlp"
./build/tools/fsdpc trace --model mlp
echo "== fsdpc dump --model mlp --world-size 2 --strategy zero3 --stage grad"
./build/tools/fsdpc dump --model mlp --world-size 2 --strategy zero3 --stage grad
echo "== mpirun -np 2 fsdpc train --model gpt2-tiny --strategy zero3 --steps 20"
mpirun -np 2 --oversubscribe ./build/tools/fsdpc train --model gpt2-tiny --strategy zero3 --steps 20 --lr 3e-3
