#!/usr/bin/env bash
# The main job: build fsdpc, then capture the FSDP tutorial MLP and GPT-2
# tiny and print their traces.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/build.sh"
cd "$root"
echo "== fsdpc trace --model mlp"
./build/tools/fsdpc trace --model mlp
echo "== fsdpc trace --model gpt2-tiny"
./build/tools/fsdpc trace --model gpt2-tiny
