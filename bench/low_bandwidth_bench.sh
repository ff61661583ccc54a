#!/usr/bin/env bash
# Training across a slow link on two nodes emulated on this host
# (tools/netns_cluster.sh --pin: one rank per node, each node its own half
# of the CPUs), the link unshaped and shaped to 1 Gbit/s and 100 Mbit/s:
# synchronous hybrid against DiLoCo (--outer-steps, with f32, bf16 or int8
# between the replicas) and Streaming DiLoCo (--outer-fragments, each
# fragment's exchange in flight for --outer-delay steps), and zero3 against
# zero3 with int8 gathers (--gather-dtype int8). The model is the 4x512 GPT-2 (8192-token
# vocabulary, read as bytes here) on the GPL-3 text, validated on the
# GPL-2; 8 x 256 tokens a step over the 2 ranks, unit buckets, AdamW.
# Prints one JSON object per run, then one per configuration and link
# comparing it with its baseline on the unshaped link (synchronous hybrid,
# or zero3 gathering the parameters' own dtype):
# tokens/s, cross-node bytes per step (the veth's counters, both ways, over
# the whole run, launch included) and the validation loss after the same
# tokens.
#
# Synchronous training on a shaped link is the same arithmetic as on the
# unshaped one, only slower (12 s a step at 100 Mbit/s): it runs SYNC_STEPS
# steps there, for its speed alone, and its loss is the unshaped run's.
# Needs root (network namespaces). A benchmark: it asserts nothing, and its
# figures are only as quiet as the machine.
#
# Usage: bench/low_bandwidth_bench.sh [BUILD_DIR] [STEPS]
#   STEPS       steps of every full run (default 1000)
#   env: LINKS (default "unshaped 1gbit 100mbit"),
#        CONFIGS (default "sync diloco diloco-bf16"; diloco* use H below;
#          also diloco-int8, streaming, streaming-bf16, streaming-int8,
#          zero3, zero3-int8, zero3-bf16, zero3-bf16-int8),
#        H (DiLoCo's --outer-steps, default 50), FRAGMENTS and DELAY
#        (Streaming DiLoCo's --outer-fragments, default 4, and
#        --outer-delay, default 2), SYNC_STEPS (default 10),
#        RUNS (LINK:CONFIG pairs instead of every LINKS x CONFIGS, e.g.
#        "unshaped:sync 100mbit:sync 100mbit:diloco-bf16")
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
steps=${2:-1000}
links=${LINKS:-unshaped 1gbit 100mbit}
configs=${CONFIGS:-sync diloco diloco-bf16}
outer=${H:-50}
fragments=${FRAGMENTS:-4} delay=${DELAY:-2}
sync_steps=${SYNC_STEPS:-10}
fsdpc=$build/tools/fsdpc
[[ -x $fsdpc ]] || { echo "low_bandwidth_bench.sh: build fsdpc first ($fsdpc)" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "low_bandwidth_bench.sh: STEPS must be a positive number, got '$steps'" >&2; exit 2; }
train=/usr/share/common-licenses/GPL-3 val=/usr/share/common-licenses/GPL-2
for f in "$train" "$val"; do [[ -r $f ]] || { echo "low_bandwidth_bench.sh: $f is missing (base-files)" >&2; exit 2; }; done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/gpt2-4x512.json" <<'EOF'
{"model_type": "gpt2", "n_layer": 4, "n_head": 8, "n_embd": 512, "vocab_size": 8192, "n_positions": 256}
EOF
# Runs inside node 0's namespace: the bytes its end of the veth sent and
# received around the training run.
cat >"$work/counted.sh" <<'EOF'
#!/usr/bin/env bash
bytes() {
  local total=0 d
  for d in /sys/class/net/fv*; do total=$((total + $(<"$d/statistics/tx_bytes") + $(<"$d/statistics/rx_bytes"))); done
  echo "$total"
}
before=$(bytes)
"$@"
status=$?
echo "cross_node_bytes $(($(bytes) - before))"
exit $status
EOF

results=$work/results.jsonl
run() {  # CONFIG LINK STEPS
  local config=$1 link=$2 n=$3 flags=() rate=() log=$work/$1-$2.jsonl
  local layout=(--strategy hybrid --mesh 2,1)
  case $config in
    sync) ;;
    diloco) flags=(--outer-steps "$outer") ;;
    diloco-bf16) flags=(--outer-steps "$outer" --outer-dtype bf16) ;;
    diloco-int8) flags=(--outer-steps "$outer" --outer-dtype int8) ;;
    streaming|streaming-bf16|streaming-int8)
      flags=(--outer-steps "$outer" --outer-fragments "$fragments" --outer-delay "$delay")
      [[ $config == streaming ]] || flags+=(--outer-dtype "${config#streaming-}") ;;
    zero3) layout=(--strategy zero3) ;;
    zero3-int8) layout=(--strategy zero3) flags=(--gather-dtype int8) ;;
    zero3-bf16) layout=(--strategy zero3) flags=(--precision bf16) ;;
    zero3-bf16-int8) layout=(--strategy zero3) flags=(--precision bf16 --gather-dtype int8) ;;
    *) echo "low_bandwidth_bench.sh: unknown configuration '$config'" >&2; return ;;
  esac
  [[ $link == unshaped ]] || rate=(--rate "$link")
  local out
  out=$(bash "$root/tools/netns_cluster.sh" --pin "${rate[@]}" -- bash "$work/counted.sh" \
    mpirun --allow-run-as-root -np 2 "$fsdpc" train --config "$work/gpt2-4x512.json" --seq 256 --batch 8 \
    "${layout[@]}" --bucketing unit --optimizer adamw --lr 1e-3 --seed 1 \
    --data "$train" --val-data "$val" --eval-every "$n" --eval-batches 8 --steps "$n" --log-every 100 \
    --log-json "$log" "${flags[@]}" 2>&1)
  local bytes
  bytes=$(sed -n 's/^cross_node_bytes //p' <<<"$out")
  if [[ -z $bytes || ! -s $log ]]; then
    echo "low_bandwidth_bench.sh: $config at $link failed:" >&2
    tail -5 <<<"$out" >&2
    return
  fi
  # Step 0 compiles and warms the caches: the rate is of the steps after it,
  # outer steps included, as a user's run would see them.
  python3 - "$log" "$config" "$link" "$n" "$bytes" "$outer" >>"$results" <<'EOF'
import json, sys
log, config, link, n, total, h = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
recs = [json.loads(l) for l in open(log)]
later = recs[1:] or recs
tokens = 8 * 256
seconds = sum(r["step_ms"] for r in later) / 1e3
val = [r["val_loss"] for r in recs if "val_loss" in r]
print(json.dumps({"config": config, "link": link, "steps": n, "outer_steps": h if config.startswith(("diloco", "streaming")) else 0,
                  "tokens_per_s": round(tokens * len(later) / seconds, 1),
                  "step_ms_mean": round(1e3 * seconds / len(later), 1),
                  "outer_steps_run": sum(1 for r in recs if r.get("outer_step")),
                  "cross_node_bytes_per_step": round(total / n),
                  "final_loss": recs[-1]["loss"], "val_loss": val[-1] if val else None}))
EOF
  tail -1 "$results"
}

pairs=${RUNS:-}
if [[ -z $pairs ]]; then
  for link in $links; do
    for config in $configs; do pairs+=" $link:$config"; done
  done
fi
for pair in $pairs; do
  link=${pair%%:*} config=${pair#*:}
  n=$steps
  [[ $config == sync && $link != unshaped ]] && n=$sync_steps
  run "$config" "$link" "$n"
done

# Each run against its baseline on the unshaped link: synchronous hybrid
# for the hybrid and DiLoCo runs, and for an int8-gather run the same run
# gathering the parameters' own dtype.
python3 - "$results" <<'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def baseline(config):
    if config.startswith("zero3"):
        return config[:-len("-int8")] if config.endswith("-int8") else None
    return "sync"
for r in runs:
    name = baseline(r["config"])
    base = next((b for b in runs if b["config"] == name and b["link"] == "unshaped"), None)
    if base is None or base is r:
        continue
    out = {"compare": r["config"], "with": name, "link": r["link"],
           "tokens_per_s_vs_baseline_unshaped": round(r["tokens_per_s"] / base["tokens_per_s"], 3),
           "bytes_per_step_fewer": round(base["cross_node_bytes_per_step"] / max(1, r["cross_node_bytes_per_step"]), 2)}
    if r["val_loss"] is not None and r["steps"] == base["steps"]:
        out["val_loss_vs_baseline"] = round(r["val_loss"] / base["val_loss"], 4)
    print(json.dumps(out))
EOF
