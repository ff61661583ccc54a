#!/usr/bin/env bash
# The 4x512 GPT-2 step (4x256 tokens per rank, unit buckets, AdamW;
# build/bench/multinode_bench) on one host's shared memory and across two
# nodes emulated on it (tools/netns_cluster.sh --pin: each node gets its own
# half of the CPUs, as machines would), with the link unshaped, at 10 Gbit/s
# and at 1 Gbit/s, in both MPI progress modes. Prints one JSON object per
# run, then one per configuration comparing each link with shared memory.
# With TORCH=1 it also runs PyTorch FSDP2 on gloo (bench/torch_fsdp2_step.py,
# in the venv bench/torch_venv.sh makes) on the same layouts, strategies and
# links, launched the same way (across the nodes: tools/netns_cluster.sh
# --pin --each, env:// rendezvous on node 0's address; on one host: plain
# localhost, gloo over loopback TCP, the ranks unpinned as mpirun leaves
# them), and prints, per configuration, PyTorch's step over fsdpc's poll-mode
# step from the same run.
# Needs root (network namespaces). A benchmark: it asserts nothing, and its
# figures are only as quiet as the machine.
# Usage: bench/multinode_bench.sh [BUILD_DIR] [STEPS] [LAYOUTS]
#   LAYOUTS: 2x1 (one rank per node), 2x2 (two per node), or "2x1 2x2"
#   env: STRATEGIES (default "zero3 zero2 no_shard hybrid"),
#        LINKS (default "shm unshaped 10gbit 1gbit"), MODES ("poll thread"),
#        TORCH=1 (the PyTorch rows too; "only": those alone),
#        BUCKET_MB (no_shard's gradient bucket size, default 25; fsdpc only)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
steps=${2:-3}
layouts=${3:-2x1}
bench=$build/bench/multinode_bench
torch=${TORCH:-0}
[[ $torch == only || -x $bench ]] || { echo "multinode_bench.sh: build the multinode_bench target first ($bench)" >&2; exit 2; }
if [[ $torch != 0 ]]; then
  py=$(bash "$root/bench/torch_venv.sh") || exit 2
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT

run() {  # LAYOUT LINK MODE STRATEGY
  local layout=$1 link=$2 mode=$3 strategy=$4 slots=${1#2x} np mesh="" out
  np=$((2 * slots))
  case $strategy in hybrid*) mesh="2,$slots" ;; esac
  local mpi=(mpirun --allow-run-as-root -np "$np" -x FSDPC_MPI_PROGRESS)
  [[ -n ${BUCKET_MB:-} ]] && mpi+=(-x BUCKET_MB)
  # More ranks than cores: Open MPI's waits must yield, on either layout.
  ((np > $(nproc))) && mpi+=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
  export FSDPC_MPI_PROGRESS=$mode
  if [[ $link == shm ]]; then
    out=$("${mpi[@]}" "$bench" "$strategy" "$mesh" "$steps" 2>&1)
  else
    local rate=()
    [[ $link == unshaped ]] || rate=(--rate "$link")
    out=$(bash "$root/tools/netns_cluster.sh" --pin --slots "$slots" "${rate[@]}" -- \
      "${mpi[@]}" "$bench" "$strategy" "$mesh" "$steps" 2>&1)
  fi
  local line
  line=$(grep '^{' <<<"$out" | tail -1)
  if [[ -z $line ]]; then
    echo "multinode_bench.sh: $layout $link $mode $strategy failed:" >&2
    echo "$out" | tail -5 >&2
    return
  fi
  line="{\"layout\": \"$layout\", \"link\": \"$link\", ${line#\{}"
  echo "$line" | tee -a "$results"
}

run_torch() {  # LAYOUT LINK STRATEGY: PyTorch FSDP2, one thread per rank
  local layout=$1 link=$2 strategy=$3 slots=${1#2x} np out line
  np=$((2 * slots))
  local args=("$root/bench/torch_fsdp2_step.py" "$strategy" --steps "$steps")
  [[ $strategy == hybrid ]] && args+=(--mesh "2,$slots")
  if [[ $link == shm ]]; then
    # One host: every rank a child of this shell, rendezvous on loopback.
    local port=$((29500 + RANDOM % 1000)) pids=() r rc=0
    out=$(for ((r = 0; r < np; ++r)); do
            RANK=$r WORLD_SIZE=$np LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GLOO_SOCKET_IFNAME=lo \
              "$py" "${args[@]}" 2>&1 &
            pids+=($!)
          done
          for p in "${pids[@]}"; do wait "$p" || rc=$?; done
          exit $rc)
  else
    local rate=()
    [[ $link == unshaped ]] || rate=(--rate "$link")
    out=$(bash "$root/tools/netns_cluster.sh" --pin --each --slots "$slots" "${rate[@]}" -- "$py" "${args[@]}" 2>&1)
  fi
  line=$(grep '^{' <<<"$out" | tail -1)
  if [[ -z $line ]]; then
    echo "multinode_bench.sh: pytorch $layout $link $strategy failed:" >&2
    echo "$out" | grep -v '^\[Gloo\]' | tail -5 >&2
    return
  fi
  line="{\"layout\": \"$layout\", \"link\": \"$link\", ${line#\{}"
  echo "$line" | tee -a "$results"
}

for layout in $layouts; do
  for strategy in ${STRATEGIES:-zero3 zero2 no_shard hybrid}; do
    for link in ${LINKS:-shm unshaped 10gbit 1gbit}; do
      if [[ $torch != only ]]; then
        for mode in ${MODES:-poll thread}; do run "$layout" "$link" "$mode" "$strategy"; done
      fi
      [[ $torch != 0 ]] && run_torch "$layout" "$link" "$strategy"
    done
  done
done

# Each link's step against shared memory's, same layout, strategy and mode.
awk '
  { gsub(/[{}"]/, ""); n = split($0, kv, ", "); delete f
    for (i = 1; i <= n; ++i) { split(kv[i], a, ": "); f[a[1]] = a[2] }
    key = f["layout"] " " f["strategy"] " " f["progress"]; step[key, f["link"]] = f["step_ms"]
    keys[key] = 1; links[f["link"]] = 1 }
  END {
    for (k in keys) {
      split(k, p, " ");
      base = step[k, "shm"];
      line = sprintf("{\"summary\": true, \"layout\": \"%s\", \"strategy\": \"%s\", \"progress\": \"%s\", \"shm_ms\": %s",
                     p[1], p[2], p[3], base == "" ? "null" : base);
      for (l in links) if (l != "shm" && step[k, l] != "")
        line = line sprintf(", \"%s_ms\": %s, \"%s_vs_shm\": %.2f", l, step[k, l], l, base > 0 ? step[k, l] / base : 0);
      print line "}";
    }
  }' "$results" | sort
# PyTorch's step over fsdpc's (poll mode), same layout, strategy and link.
[[ $torch == 1 ]] && awk '
  { gsub(/[{}"]/, ""); n = split($0, kv, ", "); delete f
    for (i = 1; i <= n; ++i) { split(kv[i], a, ": "); f[a[1]] = a[2] }
    key = f["layout"] " " f["strategy"] " " f["link"]; step[key, f["progress"]] = f["step_ms"]; keys[key] = 1 }
  END {
    for (k in keys) if (step[k, "poll"] != "" && step[k, "pytorch"] != "") {
      split(k, p, " ");
      printf("{\"compare\": true, \"layout\": \"%s\", \"strategy\": \"%s\", \"link\": \"%s\", \"fsdpc_poll_ms\": %s, \"pytorch_ms\": %s, \"pytorch_over_fsdpc\": %.2f}\n",
             p[1], p[2], p[3], step[k, "poll"], step[k, "pytorch"], step[k, "pytorch"] / step[k, "poll"]);
    }
  }' "$results" | sort
exit 0
