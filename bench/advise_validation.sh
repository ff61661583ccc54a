#!/usr/bin/env bash
# Validation of fsdpc advise's predictions against measured steps (issue 15):
# gpt2-tiny and the 4x512 GPT-2 (n_layer 4, n_head 8, n_embd 512, vocab 8192,
# 256 positions; batch 4 x 256 tokens per rank), each strategy's candidates
# predicted and then run (`fsdpc advise --measure`), on
#   - two nodes emulated on this host (tools/netns_cluster.sh --pin: two
#     network namespaces joined by a veth pair, one rank per node, each on its
#     own half of the CPUs), priced on a netns-veth profile made on the spot:
#     compute from `--hardware local` for 2 ranks, the link measured by
#     `fsdpc link-probe` run across it (the runtime's collectives);
#   - this host alone with `--hardware local` at N = 1 and 2.
# Prints one JSON object per (setting, model): every candidate's predicted and
# measured step and peak, the relative error of the step, and whether the
# predicted order of the candidates matches the measured one (pairs the
# prediction ties are not counted). Needs root for the namespaces (the
# cluster rows are skipped without it). A benchmark:
# it asserts nothing, and its figures are only as quiet as the machine.
# Usage: bench/advise_validation.sh [BUILD_DIR] [STEPS] [SETTINGS]
#   STEPS: --measure-steps, or "auto" (the default: advise runs about a
#     second of steps a candidate by its predicted step time)
#   SETTINGS: any of "cluster local1 local2 local4" (default: cluster local1
#     local2; local4 runs 4 ranks on this host, oversubscribed past its cores)
#   env: LOCK=FILE runs each advise under `flock FILE` (a shared machine);
#        MODELS (default "gpt2-tiny 4x512"); RATE (tc rate for the link,
#        e.g. 1gbit; default unshaped); CALIBRATE=1 (see calibrate below);
#        PROFILE_OUT=FILE keeps a copy of the netns-veth profile it made
#        (hardware/netns-veth.json is one); ADVISE_FLAGS: more flags for
#        every advise, e.g. "--mesh 2,1 --strategies hybrid --outer-steps 50
#        --outer-dtype bf16" (DiLoCo beside synchronous hybrid, each DiLoCo
#        row measured over whole rounds: usage.md's advise section)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
steps=${2:-auto}
steps_flag=()
[[ $steps != auto ]] && steps_flag=(--measure-steps "$steps")
settings=${3:-cluster local1 local2}
models=${MODELS:-gpt2-tiny 4x512}
fsdpc=$build/tools/fsdpc
[[ -x $fsdpc ]] || { echo "advise_validation.sh: build the fsdpc target first ($fsdpc)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "advise_validation.sh: needs python3 (standard library only)" >&2; exit 2; }
lock=()
[[ -n ${LOCK:-} ]] && lock=(flock "$LOCK")
work=$(mktemp -d /tmp/advise-validation.XXXXXX)
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$HOME/.cache}

cat >"$work/config.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 4, "n_head": 8, "n_embd": 512, "vocab_size": 8192, "n_positions": 256}
JSON
model_flags() {
  case $1 in
    gpt2-tiny) echo "--model gpt2-tiny" ;;
    4x512) echo "--config $work/config.json --batch 4 --seq 256" ;;
    *) echo "advise_validation.sh: unknown model $1" >&2; exit 2 ;;
  esac
}

# The netns-veth profile: this host's compute for 2 ranks (with the matmul
# shapes of every model validated, which advise measures under local), the
# link measured now.
netns_profile() {
  local m
  for m in $models; do
    # shellcheck disable=SC2046
    "${lock[@]}" "$fsdpc" advise $(model_flags "$m") --world-size 2 --hardware local >/dev/null 2>&1 || return 1
  done
  local localp
  localp=$(ls "$XDG_CACHE_HOME"/fsdpc/hardware-local-*-2ranks-*threads.json 2>/dev/null | head -1)
  [[ -n $localp ]] || { echo "advise_validation.sh: no local profile for 2 ranks" >&2; return 1; }
  local rate=()
  [[ -n ${RATE:-} ]] && rate=(--rate "$RATE")
  "${lock[@]}" bash "$root/tools/netns_cluster.sh" --pin "${rate[@]}" -- \
    mpirun --allow-run-as-root -np 2 "$fsdpc" link-probe >"$work/probe.json" 2>"$work/probe.err" || {
    echo "advise_validation.sh: link probe failed: $(tail -1 "$work/probe.err")" >&2; return 1; }
  python3 - "$localp" "$work/probe.json" "$work/netns-veth.json" "$(date -u +%FT%RZ)" "${RATE:-unshaped}" <<'PY'
import json, sys
local, probe, out, when, rate = sys.argv[1:6]
p = json.load(open(local))
m = json.loads(open(probe).read().strip().splitlines()[-1])
p["name"] = "netns-veth"
p["description"] = ("two nodes emulated on one host by tools/netns_cluster.sh --pin (a veth pair, link " + rate +
                    ", one rank per node on its own half of the CPUs, Open MPI's tcp transport); compute as "
                    "--hardware local measured it for 2 ranks, the link measured " + when)
p["gpus_per_node"] = {"value": 1.0, "source": "one rank per emulated node (netns_cluster.sh --slots 1)"}
src = ("measured " + when + " by `fsdpc link-probe` across the veth pair (Open MPI tcp, link " + rate +
       ", the runtime's collectives, slowest rank's median): ")
big = "%d bytes" % m["large_bytes"]
chains = m["chains"]
def chain(c):
    return "%d %dx%d matmuls with and without %d all_gathers of %d bytes, each in flight across %d of them" % (
        c["matmuls"], c["matmul_side"], c["matmul_side"], c["collectives"], c["gather_bytes"], c["statements_in_flight"])
p["inter_node"] = {
    "bandwidth": {"value": m["bandwidth"], "source": src + "an all_gather of " + big + " beyond a small one's time"},
    "latency": {"value": m["latency"], "source": src + "an all_gather of one f32 a rank, issue to wait"},
    "sustained_fraction": {"value": 1.0, "source": "already a rate measured through MPI"},
    "reduce_scatter_bandwidth": {"value": m["reduce_scatter_bandwidth"],
                                 "source": src + "a reduce_scatter of " + big + " beyond a small one's time"},
    "all_reduce_bandwidth": {"value": m["all_reduce_bandwidth"],
                             "source": src + "an all_reduce of " + big + " beyond a small one's time, its ring twice"},
    "host_overhead": {"value": m["host_overhead"],
                      "source": src + "the difference per collective of a chain of " + chain(chains[0])},
}
if m["host_bandwidth"] > 0:
    p["inter_node"]["host_bandwidth"] = {"value": m["host_bandwidth"],
                                         "source": src + "bytes sent over the extra host time per collective of a chain of " + chain(chains[1])}
json.dump(p, open(out, "w"), indent=2)
PY
}

# CALIBRATE=1: the rate of memory-bound kernels measured on the spot, from a
# profiled step of a third GPT-2 here (2 layers, n_embd 256, vocab 4096,
# batch 8 x 256 on 2 ranks: tensors of up to 32 MiB, out of cache, and a shape
# neither validated model has; `fsdpc train --profile`: bytes over time of
# every compute kernel without matmul FLOPs), written into a copy of PROFILE
# as memory_sustained_fraction. The local profile prices those kernels at a
# memcpy's rate; this host's fused elementwise kernels (exp, tanh, one
# thread) run far below it on large tensors.
calibrate() {  # PROFILE OUT
  cat >"$work/cal-config.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 256, "vocab_size": 4096, "n_positions": 256}
JSON
  "${lock[@]}" mpirun --allow-run-as-root --oversubscribe -np 2 "$fsdpc" train --config "$work/cal-config.json" \
    --batch 16 --seq 256 --steps 6 \
    --profile "$work/cal.json" --profile-steps 2:6 >/dev/null 2>"$work/cal.err" || {
    echo "advise_validation.sh: calibration run failed: $(tail -1 "$work/cal.err")" >&2; return 1; }
  python3 - "$1" "$work/cal.json" "$2" "$(date -u +%FT%RZ)" <<'PY'
import json, sys
prof, trace, out, when = sys.argv[1:5]
p = json.load(open(prof))
t = json.load(open(trace))
events = t["traceEvents"] if isinstance(t, dict) else t
skip = {"all_gather", "reduce_scatter", "all_reduce", "broadcast", "wait", "reshape", "del"}
nbytes = seconds = 0.0
for e in events:
    a = e.get("args", {})
    if e.get("ph") == "X" and "op" in a and a["op"] not in skip and not float(a.get("flops", 0) or 0):
        nbytes += float(a.get("bytes", 0) or 0)
        seconds += e["dur"] / 1e6 - p["compute"]["kernel_overhead"]["value"]
rate = nbytes / max(seconds, 1e-9)
bw = p["compute"]["memory_bandwidth"]["value"]
p["compute"]["memory_sustained_fraction"] = {
    "value": min(1.0, rate / bw),
    "source": "measured %s: memory-bound kernels of a profiled step of a 2-layer, 256-wide GPT-2 (batch 8 x 256 per rank, 2 ranks) here ran at %.3g B/s "
              "(bytes over time less the kernel overhead), this fraction of the memcpy rate" % (when, rate)}
p["name"] += "-calibrated"
json.dump(p, open(out, "w"), indent=2)
PY
}

summarize() {  # SETTING MODEL JSON
  python3 - "$@" <<'PY'
import json, sys
setting, model, path = sys.argv[1:4]
j = json.load(open(path))
rows, pairs, agree = [], 0, 0
for c in j["candidates"]:
    m = c.get("measured", {})
    r = {"candidate": c["candidate"], "predicted_ms": round(c["step_seconds"] * 1e3, 3),
         "predicted_peak": c["peak_bytes"]}
    if m.get("ran") and "error" not in m:
        r["measured_ms"] = round(m["step_seconds"] * 1e3, 3)
        r["step_error"] = round(c["step_seconds"] / m["step_seconds"] - 1, 3)
        r["measured_peak"] = m["peak_bytes"]
        r["peak_error"] = round(c["peak_bytes"] / m["peak_bytes"] - 1, 5)
        if "diloco" in m:  # how its exchanges were counted, and what a round's cost
            r["measured_outer_ms"] = round(m["diloco"]["outer_seconds"] * 1e3, 1)
            r["predicted_outer_ms"] = round(c["diloco"]["outer_seconds"] * 1e3, 1)
            r["measured_rounds"] = m["diloco"]["rounds"]
    else:
        r["error"] = m.get("error", "not run")
    rows.append(r)
ok = [r for r in rows if "measured_ms" in r]
for a in range(len(ok)):
    for b in range(a + 1, len(ok)):
        dp = ok[a]["predicted_ms"] - ok[b]["predicted_ms"]
        if abs(dp) < 1e-9:
            continue  # the prediction ties them: no order to check
        pairs += 1
        agree += (dp > 0) == (ok[a]["measured_ms"] - ok[b]["measured_ms"] > 0)
errs = [abs(r["step_error"]) for r in ok]
print(json.dumps({
    "setting": setting, "model": model, "world": j.get("world"), "hardware": j.get("hardware", {}).get("name"),
    "candidates": len(rows), "measured": len(ok),
    "best_predicted": min(ok, key=lambda r: r["predicted_ms"])["candidate"] if ok else None,
    "best_measured": min(ok, key=lambda r: r["measured_ms"])["candidate"] if ok else None,
    "ranking_pairs_agree": agree, "ranking_pairs": pairs, "ranking_matches": pairs == agree,
    "step_error_max": max(errs) if errs else None,
    "step_error_median": sorted(errs)[len(errs) // 2] if errs else None,
    "steps_within_25pct": sum(e <= 0.25 for e in errs), "steps_within_20pct": sum(e <= 0.20 for e in errs),
    "peaks_within_1pct": sum(abs(r["peak_error"]) <= 0.01 for r in ok),
    "rows": rows}))
PY
}

for setting in $settings; do
  case $setting in
    cluster)
      if ! netns_profile; then echo "advise_validation.sh: cluster skipped" >&2; continue; fi
      [[ -n ${PROFILE_OUT:-} ]] && cp "$work/netns-veth.json" "$PROFILE_OUT" ;;
    local1|local2|local4) ;;
    *) echo "advise_validation.sh: unknown setting $setting" >&2; exit 2 ;;
  esac
  case $setting in
    cluster) hw=$work/netns-veth.json ;;
    *) hw=local ;;
  esac
  if [[ ${CALIBRATE:-0} == 1 ]]; then
    base=$hw
    if [[ $base == local ]]; then
      "${lock[@]}" "$fsdpc" advise --model gpt2-tiny --world-size "${setting#local}" --hardware local >/dev/null 2>&1
      base=$(ls "$XDG_CACHE_HOME"/fsdpc/hardware-local-*-"${setting#local}"ranks-*threads.json 2>/dev/null | head -1)
    fi
    hw=$work/$setting-calibrated.json
    calibrate "$base" "$hw" || continue
  fi
  for model in $models; do
    out=$work/$setting-$model.json
    # shellcheck disable=SC2046
    case $setting in
      cluster) "${lock[@]}" bash "$root/tools/netns_cluster.sh" --pin ${RATE:+--rate "$RATE"} -- "$fsdpc" advise \
                 $(model_flags "$model") --world-size 2 --hardware "$hw" ${ADVISE_FLAGS:-} --measure \
                 "${steps_flag[@]}" --format json -o "$out" 2>"$work/err" ;;
      local*) "${lock[@]}" "$fsdpc" advise $(model_flags "$model") --world-size "${setting#local}" --hardware "$hw" \
                ${ADVISE_FLAGS:-} --measure "${steps_flag[@]}" --format json -o "$out" 2>"$work/err" ;;
    esac
    if [[ ! -s $out ]]; then
      echo "advise_validation.sh: $setting $model failed: $(tail -1 "$work/err")" >&2
      continue
    fi
    summarize "$setting" "$model" "$out"
  done
done
