#!/usr/bin/env bash
# Two "nodes" on one host, for measuring fsdpc off shared memory: two network
# namespaces joined by a veth pair (198.18.0.1/24 and 198.18.0.2/24, the
# benchmarking range; no other address is ever used), optionally shaped with
# tc tbf, and COMMAND run inside the first one with Open MPI set up to start
# the second node's daemon through `ip netns exec` (an rsh agent written for
# this run). The namespaces and the link are always removed on exit.
#
# Usage: tools/netns_cluster.sh [--rate RATE] [--slots N] [--pin] [--each] [--] COMMAND [ARG...]
#   --rate RATE  shape each direction of the link to RATE (tc's units:
#                10gbit, 1gbit, 500mbit); default: unshaped
#   --slots N    ranks per node (default 1)
#   --pin        give each node its own half of this process's CPUs
#                (taskset), as separate machines would have; otherwise both
#                nodes' ranks share every core, and each rank, alone on its
#                node, sizes its CPU threads for all of them
#   --each       start COMMAND itself as every rank, N per node, instead of
#                once in node 0 (for launchers other than mpirun, such as
#                torch.distributed's env:// rendezvous); each copy runs in its
#                node's namespace, CPUs and host name with RANK, WORLD_SIZE,
#                LOCAL_RANK, NODE_RANK, MASTER_ADDR (node 0's address),
#                MASTER_PORT (29500 unless set) and GLOO_SOCKET_IFNAME (its
#                node's end of the link) set. The exit status is the first
#                failing copy's (the others are then stopped), else 0.
# Without --each, COMMAND runs in node 0's namespace with these set (so a plain
# `mpirun -np 2 ...` spans both nodes, N ranks per node filled in order):
#   OMPI_MCA_plm_rsh_agent, OMPI_MCA_orte_default_hostfile (also in
#   FSDPC_CLUSTER_HOSTFILE), OMPI_MCA_btl=tcp,self,vader and the btl/oob
#   tcp_if_include of 198.18.0.0/24, OMPI_MCA_plm_rsh_no_tree_spawn=1,
#   OMPI_MCA_hwloc_base_binding_policy=none (Open MPI would bind each node's
#   first rank to the same core of this host), OMPI_MCA_mpi_yield_when_idle=1
#   when the two nodes have more ranks than this host has cores without
#   --pin (both unless already set);
#   FSDPC_CLUSTER_NODES, FSDPC_CLUSTER_SLOTS, FSDPC_CLUSTER_RATE. Each node
#   has its own host name (its namespace's name) in a UTS namespace.
# Exit status: COMMAND's; 77 when namespaces cannot be made here (not root,
# no `ip`, or `ip netns add` refused), with the reason on stderr.
set -uo pipefail

rate="" slots=1 pin=0 each=0
while (($#)); do
  case $1 in
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --slots) slots=${2:?--slots needs a value}; shift 2 ;;
    --pin) pin=1; shift ;;
    --each) each=1; shift ;;
    --) shift; break ;;
    -h|--help) awk 'NR>1 && /^#/{sub(/^# ?/,""); print; next} NR>1{exit}' "$0"; exit 0 ;;
    -*) echo "netns_cluster: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($#)) || { echo "netns_cluster: no command given (see --help)" >&2; exit 2; }
[[ $slots =~ ^[1-9][0-9]*$ ]] || { echo "netns_cluster: --slots must be a positive integer" >&2; exit 2; }
rate_bits=0
if [[ -n $rate ]]; then
  [[ $rate =~ ^([1-9][0-9]*)(bit|kbit|mbit|gbit)$ ]] ||
    { echo "netns_cluster: --rate '$rate': expected a number with bit, kbit, mbit or gbit" >&2; exit 2; }
  declare -A scale=([bit]=1 [kbit]=1000 [mbit]=1000000 [gbit]=1000000000)
  rate_bits=$((BASH_REMATCH[1] * scale[${BASH_REMATCH[2]}]))
fi

skip() { echo "netns_cluster: SKIP: $*" >&2; exit 77; }
((EUID == 0)) || skip "network namespaces need root (running as uid $EUID)"
command -v ip >/dev/null || skip "no 'ip' command (iproute2)"

# Unique per run, so concurrent clusters never collide: the namespaces by
# pid and a random tag; veth names must fit 15 characters.
tag="$$-$RANDOM"
ns=("fsdpc-$tag-0" "fsdpc-$tag-1")
veth=("fv${tag//-/}a" "fv${tag//-/}b")
veth=("${veth[0]:0:15}" "${veth[1]:0:15}")
addr=(198.18.0.1 198.18.0.2)
work=$(mktemp -d /tmp/fsdpc-cluster.XXXXXX)

teardown() {
  local n p
  trap - EXIT INT TERM HUP
  for n in "${ns[@]}"; do
    # Processes left inside (a daemon of a killed mpirun) are ours: stop them
    # one by one before the namespace goes.
    for p in $(ip netns pids "$n" 2>/dev/null); do kill -TERM "$p" 2>/dev/null; done
  done
  sleep 0.2
  for n in "${ns[@]}"; do
    for p in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$n" 2>/dev/null  # takes its end of the veth pair, and so the pair, with it
  done
  rm -rf "$work"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

ip netns add "${ns[0]}" 2>"$work/err" || skip "ip netns add refused: $(cat "$work/err")"
ip netns add "${ns[1]}" 2>"$work/err" || skip "ip netns add refused: $(cat "$work/err")"
ip link add "${veth[0]}" netns "${ns[0]}" type veth peer name "${veth[1]}" netns "${ns[1]}" ||
  { echo "netns_cluster: cannot create the veth pair" >&2; exit 1; }
for i in 0 1; do
  ip -n "${ns[$i]}" link set lo up &&
    ip -n "${ns[$i]}" addr add "${addr[$i]}/24" dev "${veth[$i]}" &&
    ip -n "${ns[$i]}" link set "${veth[$i]}" up ||
    { echo "netns_cluster: cannot configure ${ns[$i]}" >&2; exit 1; }
  if [[ -n $rate ]]; then
    # tbf's bucket must hold what the rate earns in a timer tick and a whole
    # GSO segment (veth passes 64 KiB ones): 10 ms of the rate, at least 256 KiB.
    burst=$((rate_bits / 8 / 100)); ((burst < 262144)) && burst=262144
    tc -n "${ns[$i]}" qdisc add dev "${veth[$i]}" root tbf rate "$rate" burst "$burst" latency 50ms ||
      { echo "netns_cluster: tc tbf rate $rate failed" >&2; exit 1; }
  fi
done
# The link carries traffic once both ends report carrier (no ping here).
for _ in $(seq 50); do
  ip -n "${ns[0]}" link show "${veth[0]}" | grep -q 'state UP' &&
    ip -n "${ns[1]}" link show "${veth[1]}" | grep -q 'state UP' && break
  sleep 0.1
done

# Each node's CPUs: all of ours, or with --pin the first and second half.
cpus=("" "")
if ((pin)); then
  mapfile -t mine < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
    awk -F- '{ if (NF == 2) for (c = $1; c <= $2; ++c) print c; else print $1 }')
  ((${#mine[@]} >= 2)) || { echo "netns_cluster: --pin needs at least 2 CPUs, this process has ${#mine[@]}" >&2; exit 2; }
  half=$((${#mine[@]} / 2))
  cpus[0]=$(IFS=,; echo "${mine[*]:0:half}")
  cpus[1]=$(IFS=,; echo "${mine[*]:half:half}")
fi
run_on() {  # NODE: the prefix that runs a command on that node's CPUs
  if [[ -n ${cpus[$1]} ]]; then echo "taskset -c ${cpus[$1]}"; fi
}

# The rsh agent: Open MPI runs `agent [options] HOST COMMAND...` and expects
# COMMAND to run on HOST through a shell, as ssh would.
cat >"$work/agent" <<AGENT
#!/usr/bin/env bash
while [[ \${1:-} == -* ]]; do shift; done
host=\$1; shift
case \$host in
  ${addr[0]}) ns=${ns[0]} on="$(run_on 0)" ;;
  ${addr[1]}) ns=${ns[1]} on="$(run_on 1)" ;;
  *) echo "netns_cluster agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" \$on unshare --uts /bin/sh -c "hostname \$ns && \$*"
AGENT
chmod +x "$work/agent"
printf '%s slots=%s\n' "${addr[0]}" "$slots" "${addr[1]}" "$slots" >"$work/hostfile"

export OMPI_MCA_plm_rsh_agent="$work/agent"
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_orte_default_hostfile="$work/hostfile"
export OMPI_MCA_btl=tcp,self,vader
export OMPI_MCA_btl_tcp_if_include=198.18.0.0/24
export OMPI_MCA_oob_tcp_if_include=198.18.0.0/24
# Open MPI binds ranks to cores per node (np <= 2: to core), and both
# emulated nodes see the same cores: each node's first rank would land on
# core 0 of this one host. Ranks stay unbound (with --pin: within their
# node's CPUs, inherited from taskset).
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
# Both nodes share this host's cores: with more ranks than cores, ranks that
# spin in MPI waits starve the ones computing (Open MPI sees 2 slots of 2
# cores per node and would spin), so waits yield unless told otherwise.
((2 * slots > $(nproc) && !pin)) && export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
export FSDPC_CLUSTER_HOSTFILE="$work/hostfile" FSDPC_CLUSTER_NODES="${addr[*]}"
export FSDPC_CLUSTER_SLOTS="$slots" FSDPC_CLUSTER_RATE="${rate:-unshaped}"
# Each node has its own host name (a UTS namespace), as real nodes do: Open
# MPI names its session directories and shared-memory segments after it, and
# two nodes called alike would collide in this host's /tmp and /dev/shm.
if ((each)); then
  # Every rank is a child of this script, in its node's namespace, so the
  # teardown's kill of each namespace's processes also ends the ones still
  # running when another has failed.
  export WORLD_SIZE=$((2 * slots)) MASTER_ADDR=${addr[0]} MASTER_PORT=${MASTER_PORT:-29500}
  pids=()
  for i in 0 1; do
    for ((l = 0; l < slots; ++l)); do
      RANK=$((i * slots + l)) LOCAL_RANK=$l NODE_RANK=$i GLOO_SOCKET_IFNAME=${veth[$i]} \
        ip netns exec "${ns[$i]}" $(run_on "$i") unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' \
        "${ns[$i]}" "$@" &
      pids+=($!)
    done
  done
  while ((${#pids[@]})); do
    running=()
    for p in "${pids[@]}"; do
      if kill -0 "$p" 2>/dev/null; then running+=("$p"); continue; fi
      wait "$p"
      rc=$?
      ((rc)) && { echo "netns_cluster: a rank exited with status $rc; stopping the others" >&2; exit "$rc"; }
    done
    pids=("${running[@]}")
    ((${#pids[@]})) && sleep 0.1
  done
  exit 0
fi
ip netns exec "${ns[0]}" $(run_on 0) unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "${ns[0]}" "$@"
exit $?
