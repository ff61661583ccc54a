#!/usr/bin/env bash
# Builds fsdpc and runs every test (CTest; ends with CTest's summary line).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/build.sh"
cd "$root/build"
ctest --output-on-failure -j "${FSDPC_JOBS:-$(nproc)}"
