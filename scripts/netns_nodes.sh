#!/usr/bin/env bash
# A multi-node run on one machine, each node in its own network namespace (its own interfaces and
# loopback, as separate hosts have), the namespaces joined by a bridge: tests what a cluster would
# without one. Needs root and iproute2.
#   scripts/netns_nodes.sh N -- <trainer args>
#   e.g. scripts/netns_nodes.sh 2 -- run configs/fmnist_mlp.toml --nproc 1 --set train.steps=50
# Node i (at 10.213.0.<i+1>) runs `trainer <args> --nnodes N --node-rank i --master-addr 10.213.0.1
# --master-port $PORT`; node 0's output is shown, every node's is in $LOGDIR/node<i>.log.
# Environment: TRAINER (default build/trainer), TIMEOUT (seconds per node, default 600),
# PORT (default 29555), LOGDIR (default netns_nodes_logs).
# A bad network: set any of DELAY_MS, JITTER_MS, LOSS (a fraction), SEED and the nodes are joined,
# instead of by the bridge, through tun_netem (NETEM, default build/tests/tun_netem; needs
# /dev/net/tun), which delays every packet by DELAY_MS +- JITTER_MS (uniform; defaults 2 and 1)
# and drops LOSS of them (default 0.005), as `tc ... netem` would where the kernel has no netem.
# Its per-link counts are in $LOGDIR/relay.log. E.g.
#   DELAY_MS=2 JITTER_MS=1 LOSS=0.005 scripts/netns_nodes.sh 2 -- run configs/fmnist_mlp.toml --nproc 1
set -euo pipefail
n=${1:?usage: $0 N -- <trainer args>}
shift
[[ ${1:-} == -- ]] && shift
[[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 250)) || { echo "$0: N must be 1..250, got '$n'" >&2; exit 2; }
trainer=$(realpath "${TRAINER:-build/trainer}")
logs=${LOGDIR:-netns_nodes_logs}
tag=trn$$  # unique per run: the switch is $tag-sw, node i is $tag-i
pids=()
relay=""
impaired=${DELAY_MS:-}${JITTER_MS:-}${LOSS:-}${SEED:-}

cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done  # timeout forwards it to the node
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n $relay ]]; then  # before the namespaces: it prints its counts and closes its devices
    kill -TERM "$relay" 2>/dev/null || true
    wait "$relay" 2>/dev/null || true
    grep -h 'tun_netem: ' "$logs/relay.log" || true
  fi
  for ((i = 0; i < n; i++)); do ip netns del "$tag-$i" 2>/dev/null || true; done  # takes the veths along
  ip netns del "$tag-sw" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$logs"
ip netns add "$tag-sw"
if [[ -n $impaired ]]; then
  # the relay makes node i's TUN device v$tag-i in the switch namespace; it moves to node i below
  netem=$(realpath "${NETEM:-build/tests/tun_netem}")
  devs=()
  for ((i = 0; i < n; i++)); do devs+=("v$tag-$i=10.213.0.$((i + 1))"); done
  : > "$logs/relay.log"  # here, not only in the relay's redirection: an earlier run's "ready" must not count
  ip netns exec "$tag-sw" "$netem" --delay-ms "${DELAY_MS:-2}" --jitter-ms "${JITTER_MS:-1}" --loss "${LOSS:-0.005}" \
    --seed "${SEED:-1}" "${devs[@]}" > "$logs/relay.log" 2>&1 &
  relay=$!
  for ((k = 0; k < 1200; k++)); do  # `ip netns exec` can be slow while other namespaces change
    grep -q 'tun_netem: ready' "$logs/relay.log" && break
    kill -0 "$relay" 2>/dev/null || { cat "$logs/relay.log" >&2; exit 1; }
    sleep 0.025
  done
  grep 'tun_netem: ready' "$logs/relay.log" || { echo "$0: the relay did not get ready" >&2; exit 1; }
else
  ip -n "$tag-sw" link add br0 type bridge
  ip -n "$tag-sw" link set br0 up
fi
for ((i = 0; i < n; i++)); do
  ns=$tag-$i
  ip netns add "$ns"
  if [[ -n $impaired ]]; then
    ip -n "$tag-sw" link set "v$tag-$i" netns "$ns"
  else
    ip link add "v$tag-$i" type veth peer name "b$tag-$i"
    ip link set "v$tag-$i" netns "$ns"
    ip link set "b$tag-$i" netns "$tag-sw"
    ip -n "$tag-sw" link set "b$tag-$i" master br0 up
  fi
  ip -n "$ns" addr add "10.213.0.$((i + 1))/24" dev "v$tag-$i"
  ip -n "$ns" link set "v$tag-$i" up
  ip -n "$ns" link set lo up
done

export TRAINER_STORE_TOKEN=${TRAINER_STORE_TOKEN:-netns$$}
for ((i = 0; i < n; i++)); do
  : > "$logs/node$i.log"
  timeout -k 10 "${TIMEOUT:-600}" ip netns exec "$tag-$i" "$trainer" "$@" --nnodes "$n" --node-rank "$i" \
    --master-addr 10.213.0.1 --master-port "${PORT:-29555}" > "$logs/node$i.log" 2>&1 &
  pids+=($!)
done
tail -n +1 -f --pid="${pids[0]}" "$logs/node0.log" &

status=0
for ((i = 0; i < n; i++)); do
  rc=0
  wait "${pids[$i]}" || rc=$?
  note=""
  ((rc == 124)) && note=" (timed out after ${TIMEOUT:-600} s)"
  echo "node $i: exit status $rc$note ($logs/node$i.log)"
  ((rc == 0)) || status=1
done
pids=()
exit $status
