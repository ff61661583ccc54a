#!/usr/bin/env bash
# The Quick start's first command: install what is missing, build the fsdpc
# CLI alone (the tests are built by the second command), then run the main
# job (tools/main_job.sh: the zero3 collectives of 2 ranks, training on real
# text under mpirun, a checkpoint and a sample).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! bash "$root/tools/build.sh" fsdpc; then
  echo "quickstart: FAILED while installing dependencies or building (tools/build.sh); see above" >&2
  exit 1
fi
exec bash "$root/tools/main_job.sh" "$root/build" "$root/build/checkpoint"
