#!/usr/bin/env bash
# Installs what is missing, configures and builds fsdpc in ./build.
# Shared by the Quick start's two commands; safe to run again (incremental).
#   bash tools/build.sh            everything: the CLI, the library, the tests
#   bash tools/build.sh TARGET...  only those (the first command: fsdpc)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash tools/install-deps.sh

jobs=${FSDPC_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFSDPC_WERROR=ON >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "$jobs" "${targets[@]}"
