#!/usr/bin/env bash
# fsdpc beside PyTorch on the CPU, in one run on one machine: the same model
# and tokens per step, one process, THREADS threads each, in f32 and in bf16
# mixed precision. Prints build/bench/train_bench's JSON lines (f32 fusion
# none and auto, then bf16 fused), then bench/torch_cpu_step.py's (eager and
# torch.compile, f32 and under CPU autocast bf16), then one summary line with
# each step time as a ratio of fsdpc's fused step of the same precision and
# the f32 and bf16 gemm peaks. A benchmark: it asserts nothing; PyTorch comes
# from bench/torch_venv.sh's venv.
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
for precision in f32 bf16; do
  FSDPC_CPU_THREADS=$threads mpirun --allow-run-as-root --bind-to none -n 1 "$build/bench/train_bench" "$model" \
    "$precision" | grep '^{' | tee -a "$out"
done
for precision in f32 bf16; do
  OMP_NUM_THREADS=$threads "$py" "$root/bench/torch_cpu_step.py" --model "$model" --threads "$threads" \
    --precision "$precision" | tee -a "$out"
done
"$py" - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def name(r):
    return r.get("impl") or "fsdpc-" + ("fusion-" + r["fusion"] if r["precision"] == "f32" else "bf16")
ref = {"f32": next(r for r in rows if name(r) == "fsdpc-fusion-auto"), "bf16": next(r for r in rows if name(r) == "fsdpc-bf16")}
print(json.dumps({"summary": ref["f32"]["model"], "threads": rows[-1]["threads"],
                  "gemm_peak_gflops": {p: ref[p]["sgemm_peak_gflops"] for p in ref},
                  "fsdpc_bf16_gemm_fraction": round(ref["bf16"]["gflops_per_rank"] / ref["bf16"]["sgemm_peak_gflops"], 2),
                  "step_ms": {name(r): r["step_ms"] for r in rows},
                  "vs_fsdpc_fused_same_precision": {name(r): round(r["step_ms"] / ref[r.get("precision", "f32")]["step_ms"], 2)
                                                    for r in rows}}))
PY
