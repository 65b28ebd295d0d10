#!/usr/bin/env bash
# A local ringlog cluster on loopback: one etcd member and N nodes, each with its own data dir
# and ports, sharing their metadata through etcd (metadata.store=etcd).
#
#   scripts/cluster.sh up N [SHARDS]   start etcd and nodes 1..N (SHARDS per node, default 1)
#   scripts/cluster.sh status          which processes run, the registered brokers, the topics
#   scripts/cluster.sh down [--keep]   stop everything (SIGTERM) and remove the data (--keep: not)
#
# Ports: etcd client 23790, peer 23800; node i listens on 19000 + 100 * i (+ shard index).
# RINGLOG_CLUSTER_SET="key=value ..." adds settings to every node (e.g. log.flush.interval.messages=1).
# State, logs and data: ${RINGLOG_CLUSTER_DIR:-target/cluster}. Bootstrap with any node, e.g.
# 127.0.0.1:19100. Topics created with a replication factor above 1 (up to N) keep a replica on
# each of that many nodes; followers pull from the leader, and the elected controller moves
# leadership when a node's lease expires.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DIR="${RINGLOG_CLUSTER_DIR:-$REPO_ROOT/target/cluster}"
BIN="${RINGLOG_BIN:-$REPO_ROOT/target/release/ringlog}"
ETCD_CLIENT=23790
ETCD_PEER=23800
CLUSTER_ID=local

# Waits up to 20 s for 127.0.0.1:PORT, else fails naming WHAT and the logs.
listening_or_die() { # PORT WHAT
  wait_port "$1" 20 || die "$2 did not listen on $1 within 20 s (see $DIR/*.log)"
}

running() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
  local n=${1:-} shards=${2:-1}
  [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up takes a node count 1..99, got '${n}'"
  [[ "$shards" =~ ^[1-9][0-9]?$ ]] || die "shards per node must be 1..99, got '${shards}'"
  command -v etcd >/dev/null || die "etcd not found: run scripts/install-deps.sh (Debian's etcd-server)"
  if [[ ! -x "$BIN" ]]; then
    (cd "$REPO_ROOT" && cargo build --release -p node --bin ringlog)
  fi
  mkdir -p "$DIR"
  if ! running "$DIR/etcd.pid"; then
    etcd --name ringlog-local --data-dir "$DIR/etcd-data" \
      --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT" \
      --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
      --initial-cluster "ringlog-local=http://127.0.0.1:$ETCD_PEER" >"$DIR/etcd.log" 2>&1 &
    echo $! >"$DIR/etcd.pid"
    listening_or_die "$ETCD_CLIENT" etcd
  fi
  local bootstrap=() extra=()
  for kv in ${RINGLOG_CLUSTER_SET:-}; do extra+=(--set "$kv"); done
  for i in $(seq 1 "$n"); do
    local port=$((19000 + 100 * i))
    bootstrap+=("127.0.0.1:$port")
    if running "$DIR/node-$i.pid"; then continue; fi
    "$BIN" serve --data-dir "$DIR/node-$i" --listen "127.0.0.1:$port" --shards "$shards" \
      --set "node.id=$i" --set metadata.store=etcd \
      --set "metadata.etcd.endpoints=http://127.0.0.1:$ETCD_CLIENT" --set "cluster.id=$CLUSTER_ID" \
      "${extra[@]}" >"$DIR/node-$i.log" 2>&1 &
    echo $! >"$DIR/node-$i.pid"
  done
  for i in $(seq 1 "$n"); do listening_or_die $((19000 + 100 * i)) "node $i"; done
  # Each node learns of the others through etcd's watch: wait until every one lists all n
  # nodes, so a topic created right after `up` may place a replica on each of them.
  local i seen
  for i in $(seq 1 "$n"); do
    seen=0
    for _ in $(seq 1 300); do
      seen="$("$BIN" cluster --bootstrap-server "127.0.0.1:$((19000 + 100 * i))" status 2>/dev/null |
        sed -n 's/.*Nodes: \([0-9]*\).*/\1/p' | head -n1)"
      [[ "${seen:-0}" -ge "$n" ]] && break
      sleep 0.1
    done
    [[ "${seen:-0}" -ge "$n" ]] || die "node $i lists ${seen:-0} of $n nodes after 30 s (see $DIR/node-$i.log)"
  done
  local IFS=,
  echo "cluster up: $n node(s) x $shards shard(s); bootstrap.servers=${bootstrap[*]}"
}

status() {
  [[ -d "$DIR" ]] || { echo "no cluster in $DIR"; return 0; }
  for f in "$DIR"/*.pid; do
    [[ -e "$f" ]] || continue
    local name; name="$(basename "$f" .pid)"
    if running "$f"; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: stopped"; fi
  done
  if command -v etcdctl >/dev/null && running "$DIR/etcd.pid"; then
    echo "registered brokers:"
    ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$ETCD_CLIENT" get --prefix "/ringlog/$CLUSTER_ID/brokers/" | paste - - | sed 's/^/  /'
    echo "topics:"
    ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$ETCD_CLIENT" get --prefix --keys-only "/ringlog/$CLUSTER_ID/topics/" | sed '/^$/d; s/^/  /'
    for f in "$DIR"/node-*.pid; do
      running "$f" || continue
      local n; n="$(basename "$f" .pid)"; n="${n#node-}"
      "$BIN" cluster --bootstrap-server "127.0.0.1:$((19000 + 100 * n))" status --etcd "http://127.0.0.1:$ETCD_CLIENT" && break
    done
  fi
}

down() {
  local keep=${1:-}
  [[ -d "$DIR" ]] || return 0
  for f in "$DIR"/node-*.pid; do
    [[ -e "$f" ]] || continue
    if running "$f"; then kill -TERM "$(cat "$f")"; fi
  done
  for f in "$DIR"/node-*.pid; do
    [[ -e "$f" ]] || continue
    for _ in $(seq 1 300); do running "$f" || break; sleep 0.1; done
    rm -f "$f"
  done
  if running "$DIR/etcd.pid"; then kill -TERM "$(cat "$DIR/etcd.pid")"; fi
  rm -f "$DIR/etcd.pid"
  if [[ "$keep" != --keep ]]; then rm -rf "$DIR"; fi
  echo "cluster down"
}

case "${1:-}" in
  up) shift; up "$@" ;;
  status) status ;;
  down) shift; down "${1:-}" ;;
  *) die "usage: scripts/cluster.sh up N [SHARDS] | status | down [--keep]" ;;
esac
