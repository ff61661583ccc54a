#!/usr/bin/env bash
# Training across two emulated nodes (tools/netns_cluster.sh: two network
# namespaces over a veth pair, Open MPI on TCP between them) gives the same
# per-step losses as the same job on one host's shared memory, to 1e-5
# relative, in the MPI progress mode given. Exit 77 (skipped) where network
# namespaces cannot be made (not root, or `ip netns add` refused).
# Usage: test/multinode_test.sh MPIEXEC FSDPC PROGRESS SLOTS NP [TRAIN FLAGS...]
#   PROGRESS: poll | thread | auto (FSDPC_MPI_PROGRESS); SLOTS: ranks per node
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mpiexec=$1 fsdpc=$2 progress=$3 slots=$4 np=$5
shift 5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "multinode_test: FAIL: $*" >&2; exit 1; }

# Can this machine make namespaces at all? The script says why not.
bash "$root/tools/netns_cluster.sh" true
rc=$?
((rc == 77)) && exit 77
((rc == 0)) || fail "tools/netns_cluster.sh could not start a cluster (exit $rc)"

train=("$fsdpc" train --model gpt2-tiny --seq 16 --batch 12 --steps 6 --seed 5 --clip 1.0 --weight-decay 0.01 "$@")
export FSDPC_MPI_PROGRESS=$progress
# One host, shared memory: the reference.
"$mpiexec" -n "$np" --oversubscribe --allow-run-as-root -x FSDPC_MPI_PROGRESS \
  "${train[@]}" --log-json "$work/host.jsonl" >"$work/host.out" 2>&1 ||
  { cat "$work/host.out"; fail "the single-host run failed"; }
# Two nodes, SLOTS ranks each, over TCP only between them.
bash "$root/tools/netns_cluster.sh" --slots "$slots" -- "$mpiexec" -n "$np" --allow-run-as-root \
  -x FSDPC_MPI_PROGRESS "${train[@]}" --log-json "$work/nodes.jsonl" >"$work/nodes.out" 2>&1
rc=$?
cat "$work/nodes.out"
((rc == 0)) || fail "the two-node run exited with $rc"

losses() { grep -o '"loss": *[-0-9.eE+]*' "$1" | sed 's/.*: *//'; }
paste <(losses "$work/host.jsonl") <(losses "$work/nodes.jsonl") >"$work/pairs"
n=$(wc -l <"$work/pairs")
((n == 6)) || fail "expected 6 steps from both runs, got $n lines: $(cat "$work/pairs")"
awk '{ d = $1 - $2; if (d < 0) d = -d; s = $1 < 0 ? -$1 : $1;
       printf "step %d: one host %s, two nodes %s\n", NR - 1, $1, $2;
       if (NF != 2 || d > 1e-5 * s) bad = 1 }
     END { exit bad }' "$work/pairs" || fail "losses differ by more than 1e-5 relative"
echo "multinode_test: $np ranks on 2 nodes ($slots per node, progress $progress, $*): losses match one host"
