#!/usr/bin/env bash
# Pipeline parallelism's bubble and memory: the 4x512 GPT-2 (vocab 8192,
# 8x256 tokens a step, AdamW, no_shard inside each stage) trained by
# `fsdpc train --pp 2` on 2 ranks with M = 1, 2, 4, 8 micro-batches in GPipe's
# and 1F1B's order, beside one process on one thread and DDP on 2 ranks at
# the same global batch. Prints one JSON object per run: the median step
# after the first, rank 0's (stage 0's) peak bytes by category, and for the
# pipeline runs the efficiency t_1 / (P * t_pp) against the one-process step
# with the ideal bubble (P-1)/(M+P-1) beside it. Each rank runs one thread,
# as fsdpc gives 2 ranks on 2 cores.
# A benchmark: it asserts nothing, and its figures are only as quiet as the
# machine.
# Usage: bench/pipeline_parallel_bench.sh [BUILD_DIR] [STEPS]
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
steps=${2:-4}
fsdpc=$build/tools/fsdpc
[[ -x $fsdpc ]] || { echo "pipeline_parallel_bench.sh: build fsdpc first ($fsdpc)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/config.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 4, "n_head": 8, "n_embd": 512, "vocab_size": 8192, "n_positions": 256,
 "layer_norm_epsilon": 1e-5}
JSON
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# NP FLAGS... -> "median_step_ms peak_json" of rank 0's log, or nothing on failure
run() {
  local np=$1 log=$work/log.jsonl
  shift
  rm -f "$log"
  local cmd=("$fsdpc" train --config "$work/config.json" --batch 8 --seq 256 --steps "$steps" --log-json "$log" "$@")
  if ((np > 1)); then cmd=(mpirun -n "$np" --oversubscribe "${cmd[@]}"); fi
  FSDPC_CPU_THREADS=1 "${cmd[@]}" >"$work/out.txt" 2>&1 || { echo "run failed: ${cmd[*]}" >&2; tail -5 "$work/out.txt" >&2; return 1; }
  python3 - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
times = [r["step_ms"] for r in rows[1:]] or [rows[0]["step_ms"]]
print(statistics.median(times), json.dumps(rows[-1]["peak_bytes"]))
PY
}

read -r t1 peak1 < <(run 1 --strategy no_shard) || exit 1
echo "{\"run\": \"one process\", \"step_ms\": $t1, \"peak_bytes\": $peak1}"
read -r tddp peakddp < <(run 2 --strategy no_shard) || exit 1
echo "{\"run\": \"ddp 2 ranks\", \"step_ms\": $tddp, \"speedup\": $(python3 -c "print(round($t1 / $tddp, 3))"), \"peak_bytes\": $peakddp}"
for schedule in gpipe 1f1b; do
  for m in 1 2 4 8; do
    read -r t peak < <(run 2 --strategy no_shard --pp 2 --grad-accum "$m" --pp-schedule "$schedule") || continue
    python3 - "$schedule" "$m" "$t" "$t1" "$peak" <<'PY'
import json, sys
schedule, m, t, t1, peak = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
p = 2
print(json.dumps({"run": "pp 2", "schedule": schedule, "micro_batches": m, "step_ms": t,
                  "efficiency": round(t1 / (p * t), 3), "ideal_efficiency": round(m / (m + p - 1), 3),
                  "stage0_peak_bytes": peak}))
PY
  done
done
