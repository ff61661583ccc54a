#!/usr/bin/env bash
# The GPU benchmark, meant for one H100 or H200: step time, tokens/s and MFU
# of gpt2 and gpt2-medium trained by `fsdpc train --executor cuda`, one JSON
# line per model. MFU counts 6*N + 12*L*C*T FLOPs per token (PaLM's formula:
# matmuls forward and backward, attention included) against PEAK_TFLOPS.
#
#   bench/gpu/run.sh [build-dir]                 # bf16 mixed precision
#   PRECISION=f32 bench/gpu/run.sh               # f32, TF32 off (the parity setting)
#   PRECISION=f32 FSDPC_CUDA_TF32=1 PEAK_TFLOPS=494 bench/gpu/run.sh
#   FSDPC_BIN=bundle/bin/fsdpc MODELS=gpt2 bench/gpu/run.sh   # another fsdpc; one model
#
# PEAK_TFLOPS defaults to the H100 SXM's dense figure for the precision,
# which is the H200's too (the same chip with more memory):
# 989 for bf16 tensor cores, 67 for f32 without them (494 with TF32). The
# collectives of a sharded run need two or more GPUs (NCCL gives each rank
# its own device): with NRANKS=N the script launches mpirun -np N with zero3.
# Each collective kind's device time per step (events around every NCCL
# call, FSDPC_NCCL_TIMING=1) is reported as "collectives_ms"; its count and
# bytes are in the per-step JSON of `fsdpc train --log-json`. A model whose
# run fails prints the end of fsdpc's output to stderr; the others still
# run, and the script then exits 1. tools/gpu_check.sh runs this as its
# benchmark stage (docs/gpu.md).
#
# Not yet measured by this project: no GPU was available when it was written
# (see README.md, "What has run on a GPU").
set -euo pipefail
(($# <= 1)) || { echo "usage: bench/gpu/run.sh [build-dir]" >&2; exit 2; }
build=${1:-build}
fsdpc=${FSDPC_BIN:-$build/tools/fsdpc}
[[ -x "$fsdpc" ]] || { echo "bench/gpu/run.sh: $fsdpc not found (build first: tools/build.sh)" >&2; exit 2; }
models=${MODELS:-gpt2 gpt2-medium}
for m in $models; do
  case "$m" in gpt2|gpt2-medium) ;; *) echo "bench/gpu/run.sh: MODELS may name gpt2 and gpt2-medium, got '$m'" >&2; exit 2 ;; esac
done
precision=${PRECISION:-bf16}
case "$precision" in
  bf16) default_peak=989 ;;
  f32) default_peak=67 ;;
  *) echo "bench/gpu/run.sh: PRECISION must be bf16 or f32, got '$precision'" >&2; exit 2 ;;
esac
peak=${PEAK_TFLOPS:-$default_peak}
nranks=${NRANKS:-1}
steps=${STEPS:-20}
launch=()
strategy=()
if (( nranks > 1 )); then
  launch=(mpirun -np "$nranks" --allow-run-as-root)
  strategy=(--strategy zero3)
fi
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT
failed=0

# name params layers width batch seq
while read -r model params layers width batch seq; do
  [[ " $models " == *" $model "* ]] || continue
  if ! FSDPC_NCCL_TIMING=1 "${launch[@]}" "$fsdpc" train --model "$model" --executor cuda --precision "$precision" "${strategy[@]}" --batch "$batch" --seq "$seq" \
    --steps "$steps" --optimizer adamw --lr 3e-4 --log-json "$log" >"$out" 2>&1; then
    echo "bench/gpu/run.sh: $model failed; the end of its output:" >&2
    tail -n 30 "$out" >&2
    failed=1
    continue
  fi
  # The median step after the first three (warm-up: cuBLASLt heuristics,
  # allocator growth), from the per-step JSON lines.
  ms=$(grep -o '"step_ms": [0-9.e+-]*' "$log" | tail -n +4 | awk '{print $2}' | sort -g |
       awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}')
  # Mean device ms per step of each collective kind, after the same warm-up.
  coll=$(tail -n +4 "$log" | { grep -o '"[a-z_]*": {"count": [0-9]*, "bytes": [0-9]*, "ms": [0-9.e+-]*}' || true; } |
         awk -F'[":,{} ]+' -v steps=$((steps - 3)) '{ms[$2] += $8} END {
           s = ""; for (k in ms) s = s (s == "" ? "" : ", ") sprintf("\"%s\": %.3f", k, ms[k] / steps); print "{" s "}" }')
  awk -v m="$model" -v n="$params" -v l="$layers" -v c="$width" -v b="$batch" -v t="$seq" -v ms="$ms" \
        -v peak="$peak" -v r="$nranks" -v p="$precision" -v coll="$coll" 'BEGIN {
    tokens = b * t; tps = tokens / (ms / 1000); flops = 6 * n + 12 * l * c * t;
    printf("{\"model\": \"%s\", \"precision\": \"%s\", \"ranks\": %d, \"batch\": %d, \"seq\": %d, \"step_ms\": %.2f, \"tokens_per_s\": %.0f, \"tflops\": %.1f, \"mfu\": %.3f, \"collectives_ms\": %s}\n",
           m, p, r, b, t, ms, tps, tps * flops / 1e12 / r, tps * flops / 1e12 / (peak * r), coll);
  }'
done <<'MODELS'
gpt2 124439808 12 768 16 1024
gpt2-medium 354823168 24 1024 8 1024
MODELS
exit "$failed"
