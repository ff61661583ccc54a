#!/usr/bin/env bash
# Activation checkpointing: for each --remat mode, with the fused head
# (--loss-chunk auto, the default) and, for none, selective and block, without
# it (--loss-chunk off), `mpirun -np N fsdpc train` measures the step time and
# the per-rank peak (activations and total) and prints them beside the memory
# plan's prediction, as one JSON object. With LLAMA=1 it also prints, for
# llama3.2-1b at sequences 2048 and 4096 (one per rank, 2 ranks, zero3), the
# memory plan's peak and the statement it sits at, remat none and block,
# fused and unfused (`fsdpc dump --memory`: planned, not run).
#
#   bench/remat_bench.sh [build-dir]
#
# Defaults follow the memory issue: 12-layer 768-wide GPT-2 (the gpt2 preset),
# sequence 1024, 2 sequences per rank, N = 2, zero3, AdamW. Override with
# MODEL, SEQ, PER_RANK, NP, STEPS, STRATEGY, RUNS. auto:BYTES gets a budget halfway
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

# Each run as MODE/LOSS_CHUNK; RUNS picks some (none/off, the baseline, is
# always run), e.g. RUNS="none/auto block/auto block/off".
runs=(none/auto selective/auto auto/auto "auto:$budget/auto" block/auto none/off selective/off block/off)
if [[ -n ${RUNS:-} ]]; then
  read -r -a runs <<<"$RUNS"
  [[ " ${runs[*]} " == *" none/off "* ]] || runs+=(none/off)
fi
for run in "${runs[@]}"; do
  m=${run%/*} chunk=${run##*/} name=${run//[:\/]/_}
  log="$work/$name.jsonl"
  mpirun -np "$np" --oversubscribe --allow-run-as-root "$fsdpc" train "${shape[@]}" --batch $((per_rank * np)) \
    --steps "$steps" --optimizer adamw --remat "$m" --loss-chunk "$chunk" --log-json "$log" >"$work/$name.out" 2>&1 ||
    { echo "fsdpc train --remat $m --loss-chunk $chunk failed:" >&2; tail -5 "$work/$name.out" >&2; exit 1; }
done

# llama3.2-1b's plan: the peak and its statement (the line `dump --memory` ends its steady step with).
if [[ ${LLAMA:-0} == 1 ]]; then
  for s in 2048 4096; do
    for chunk in auto off; do
      for r in none block; do
        "$fsdpc" dump --model llama3.2-1b --seq "$s" --batch 1 --world-size 2 --strategy zero3 --memory \
          --remat "$r" --loss-chunk "$chunk" | grep -m1 '^  peak ' >"$work/llama_${s}_${r}_$chunk.peak"
      done
    done
  done
fi

python3 - "$work" "$model" "$seq" "$per_rank" "$np" "$strategy" "$budget" "${runs[@]}" <<'EOF'
import json, os, statistics, sys
work, model, seq, per_rank, np_, strategy, budget, *runs = sys.argv[1:]
rows = {}
for run in runs:
    name = run.replace(':', '_').replace('/', '_')
    recs = [json.loads(l) for l in open(os.path.join(work, name + '.jsonl'))]
    steady = recs[1:] or recs  # the first step also makes the optimizer state and warms caches
    rows[run] = {
        "step_ms": statistics.median(r["step_ms"] for r in steady),
        "activations_peak_bytes": max(r["peak_bytes"]["activations"] for r in recs),
        "predicted_activations_peak_bytes": max(r["predicted_peak_bytes"]["activations"] for r in recs),
        "total_peak_bytes": max(r["peak_bytes"]["total"] for r in recs),
        "predicted_total_peak_bytes": max(r["predicted_peak_bytes"]["total"] for r in recs),
        "final_loss": recs[-1]["loss"],
    }
# Against the unfused head without remat: what both the fused head and remat save.
base = rows["none/off"]
for run, r in rows.items():
    r["activation_peak_cut"] = round(base["activations_peak_bytes"] / r["activations_peak_bytes"], 3)
    r["step_time_ratio"] = round(r["step_ms"] / base["step_ms"], 3)
    m, chunk = run.rsplit('/', 1)
    if chunk == "auto" and m + "/off" in rows:  # what fusing the head costs in time
        r["step_time_vs_unfused_head"] = round(r["step_ms"] / rows[m + "/off"]["step_ms"], 3)
llama = {}
for f in sorted(os.listdir(work)):
    if f.startswith('llama_') and f.endswith('.peak'):
        _, s, r, chunk = f[:-len('.peak')].split('_')
        llama[f"seq {s}, remat {r}, loss-chunk {chunk}"] = open(os.path.join(work, f)).read().strip()
out = {"benchmark": "remat", "model": model, "seq": int(seq), "sequences_per_rank": int(per_rank),
       "ranks": int(np_), "strategy": strategy, "auto_budget_bytes": int(budget),
       "cpu": open('/proc/cpuinfo').read().split('model name')[1].split('\n')[0].strip(': \t'),
       "runs": rows}
if llama:
    out["llama3.2-1b_planned_peaks"] = llama
print(json.dumps(out, indent=2))
EOF
