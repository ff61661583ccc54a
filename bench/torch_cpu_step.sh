#!/usr/bin/env bash
# fsdpc beside PyTorch on the CPU, in one run on one machine: the same model
# and tokens per step, one process, THREADS threads each. Prints
# build/bench/train_bench's JSON lines (fusion none and auto), then
# bench/torch_cpu_step.py's (eager and torch.compile), then one summary line
# with each step time as a ratio of fsdpc's fused step. A benchmark: it
# asserts nothing; PyTorch comes from bench/torch_venv.sh's venv.
# Usage: bench/torch_cpu_step.sh [MODEL (gpt2-4x512 | gpt2-tiny)] [THREADS] [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model=${1:-gpt2-4x512}
threads=${2:-1}
build=${3:-$root/build}
case $model in gpt2-4x512 | gpt2-tiny) ;; *) echo "torch_cpu_step.sh: model $model is not gpt2-4x512 or gpt2-tiny" >&2; exit 2 ;; esac
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "torch_cpu_step.sh: THREADS must be a positive whole number, got $threads" >&2; exit 2; }
[[ -x $build/bench/train_bench ]] || { echo "torch_cpu_step.sh: build the train_bench target first ($build/bench/train_bench)" >&2; exit 2; }
py=$("$root/bench/torch_venv.sh")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Unbound: Open MPI would pin the one rank to one core, whatever THREADS says.
FSDPC_CPU_THREADS=$threads mpirun --allow-run-as-root --bind-to none -n 1 "$build/bench/train_bench" "$model" \
  | grep '^{' | tee -a "$out"
OMP_NUM_THREADS=$threads "$py" "$root/bench/torch_cpu_step.py" --model "$model" --threads "$threads" | tee -a "$out"
"$py" - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
name = lambda r: r.get("impl") or "fsdpc-fusion-" + r["fusion"]
ref = next(r for r in rows if name(r) == "fsdpc-fusion-auto")
print(json.dumps({"summary": ref["model"], "threads": rows[-1]["threads"], "sgemm_peak_gflops": ref["sgemm_peak_gflops"],
                  "step_ms": {name(r): r["step_ms"] for r in rows},
                  "vs_fsdpc_fused": {name(r): round(r["step_ms"] / ref["step_ms"], 2) for r in rows}}))
PY
