#!/usr/bin/env bash
# Activation checkpointing: for each --remat mode, `mpirun -np N fsdpc train`
# measures the step time and the per-rank peak (activations and total) and
# prints them beside the memory plan's prediction, as one JSON object.
#
#   bench/remat_bench.sh [build-dir]
#
# Defaults follow the memory issue: 12-layer 768-wide GPT-2 (the gpt2 preset),
# sequence 1024, 2 sequences per rank, N = 2, zero3, AdamW. Override with
# MODEL, SEQ, PER_RANK, NP, STEPS, STRATEGY. auto:BYTES gets a budget halfway
# between block's and auto's activation peak (live bytes beyond the
# parameters, as `fsdpc dump --stats` counts them and the budget is read).
# Needs python3 (standard library only) to read the JSON records.
set -euo pipefail
build=${1:-build}
fsdpc="$build/tools/fsdpc"
model=${MODEL:-gpt2} seq=${SEQ:-1024} per_rank=${PER_RANK:-2} np=${NP:-2} steps=${STEPS:-3}
strategy=${STRATEGY:-zero3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

shape=(--model "$model" --seq "$seq" --strategy "$strategy")
# The activation peak the auto budget is compared with, for one mode.
live_beyond_params() {
  "$fsdpc" dump "${shape[@]}" --batch "$per_rank" --world-size "$np" --remat "$1" --stats --format json |
    python3 -c 'import json,sys; print(max(t["stats"]["memory"]["peak_live_bytes"] - t["stats"]["memory"]["param_bytes"] for t in json.load(sys.stdin)))'
}
block_live=$(live_beyond_params block)
auto_live=$(live_beyond_params auto)
budget=$(( (block_live + auto_live) / 2 ))

modes=(none selective auto "auto:$budget" block)
for m in "${modes[@]}"; do
  log="$work/${m//:/_}.jsonl"
  mpirun -np "$np" --oversubscribe --allow-run-as-root "$fsdpc" train "${shape[@]}" --batch $((per_rank * np)) \
    --steps "$steps" --optimizer adamw --remat "$m" --log-json "$log" >"$work/${m//:/_}.out" 2>&1 ||
    { echo "fsdpc train --remat $m failed:" >&2; tail -5 "$work/${m//:/_}.out" >&2; exit 1; }
done

python3 - "$work" "$model" "$seq" "$per_rank" "$np" "$strategy" "$budget" "${modes[@]}" <<'EOF'
import json, os, statistics, sys
work, model, seq, per_rank, np_, strategy, budget, *modes = sys.argv[1:]
rows = {}
for m in modes:
    recs = [json.loads(l) for l in open(os.path.join(work, m.replace(':', '_') + '.jsonl'))]
    steady = recs[1:] or recs  # the first step also makes the optimizer state and warms caches
    rows[m] = {
        "step_ms": statistics.median(r["step_ms"] for r in steady),
        "activations_peak_bytes": max(r["peak_bytes"]["activations"] for r in recs),
        "predicted_activations_peak_bytes": max(r["predicted_peak_bytes"]["activations"] for r in recs),
        "total_peak_bytes": max(r["peak_bytes"]["total"] for r in recs),
        "predicted_total_peak_bytes": max(r["predicted_peak_bytes"]["total"] for r in recs),
        "final_loss": recs[-1]["loss"],
    }
base = rows["none"]
for m, r in rows.items():
    r["activation_peak_cut"] = round(base["activations_peak_bytes"] / r["activations_peak_bytes"], 3)
    r["step_time_ratio"] = round(r["step_ms"] / base["step_ms"], 3)
out = {"benchmark": "remat", "model": model, "seq": int(seq), "sequences_per_rank": int(per_rank),
       "ranks": int(np_), "strategy": strategy, "auto_budget_bytes": int(budget),
       "cpu": open('/proc/cpuinfo').read().split('model name')[1].split('\n')[0].strip(': \t'),
       "modes": rows}
print(json.dumps(out, indent=2))
EOF
