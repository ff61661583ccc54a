#!/usr/bin/env bash
# Creates (once) the Python venv with PyTorch that the comparison benchmarks
# (bench/torch_cpu_step.py, bench/torch_fsdp2_step.py) run in, and prints its
# python. Benchmarks only: no build or test of fsdpc needs Python packages.
# The venv lives outside the checkout so fresh clones share it:
#   FSDPC_TORCH_VENV (default ~/.cache/fsdpc/torch-venv), TORCH_SPEC (default torch==2.8.0).
# Usage: py=$(bench/torch_venv.sh) && "$py" bench/torch_cpu_step.py ...
set -euo pipefail
venv=${FSDPC_TORCH_VENV:-$HOME/.cache/fsdpc/torch-venv}
spec=${TORCH_SPEC:-torch==2.8.0}
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  command -v python3 >/dev/null || { echo "torch_venv.sh: python3 is not installed (apt-get install python3-venv)" >&2; exit 2; }
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv" >&2 || { echo "torch_venv.sh: could not create a venv at $venv (apt-get install python3-venv)" >&2; exit 2; }
  "$venv/bin/pip" install --quiet "$spec" numpy >&2 || { echo "torch_venv.sh: pip could not install $spec into $venv (is PyPI reachable?)" >&2; exit 2; }
fi
echo "$venv/bin/python"
