#!/usr/bin/env bash
# Apache Kafka (KRaft) with N brokers on loopback, each a combined broker+controller and a voter
# of one controller quorum — the Kafka side of the replicated benchmarks.
#
#   scripts/kafka/kafka-cluster.sh up N       start brokers 1..N (those not running), wait until they
#                                             answer metadata; prints the bootstrap list last
#   scripts/kafka/kafka-cluster.sh add I      start broker I > N, broker-only (process.roles=broker,
#                                             an observer of the N voters), on the same port
#                                             scheme; wait until it is registered and unfenced;
#                                             prints the bootstrap list with it last
#   scripts/kafka/kafka-cluster.sh start I    start broker I again (after a kill), same data
#   scripts/kafka/kafka-cluster.sh pid I      broker I's pid
#   scripts/kafka/kafka-cluster.sh down       stop every broker (SIGTERM) and remove the data
#
# Broker I listens on 127.0.0.1:(KAFKA_CLUSTER_PORT + 10*(I-1)), its controller one port above.
# Replication: default.replication.factor and the internal topics' = min(N, 3),
# min.insync.replicas = KAFKA_MIN_ISR (default 2 with 3 brokers, else 1); everything else is
# Kafka's default (broker.session.timeout.ms 9000, replica.lag.time.max.ms 30000, no fsync per
# message unless KAFKA_EXTRA_PROPS says so).
# Env: KAFKA_CLUSTER_DIR (default target/kafka-cluster), KAFKA_CLUSTER_PORT (default 29192),
# KAFKA_HEAP_OPTS (default -Xms512m -Xmx1g), KAFKA_EXTRA_PROPS, KAFKA_VERSION,
# KAFKA_START_TIMEOUT (seconds for every broker to register, default 300: three JVMs starting on
# two busy cores took more than 120 s in two suite runs in a row on 2026-12-04).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=kafka-common.sh
source "$SCRIPT_DIR/kafka-common.sh"

DIR="${KAFKA_CLUSTER_DIR:-$REPO_ROOT/target/kafka-cluster}"
BASE="${KAFKA_CLUSTER_PORT:-29192}"
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms512m -Xmx1g}"

port_of() { echo $((BASE + 10 * ($1 - 1))); }
count() { cat "$DIR/brokers" 2>/dev/null || kafka_die "no Kafka cluster in $DIR (scripts/kafka/kafka-cluster.sh up N)"; }

voters() { # N
  local v=() i
  for ((i = 1; i <= $1; i++)); do v+=("$i@$KAFKA_HOST:$(($(port_of "$i") + 1))"); done
  local IFS=,; echo "${v[*]}"
}

start_one() { # I N   (I > N: a broker-only node added with `add`)
  local i="$1" n="$2" rf=$(( $2 < 3 ? $2 : 3 ))
  local min_isr="${KAFKA_MIN_ISR:-$(( $2 >= 3 ? 2 : 1 ))}"
  local roles=broker,controller
  (( i <= n )) || roles=broker
  KAFKA_PROCESS_ROLES="$roles" KAFKA_DATA_DIR="$DIR/broker-$i" KAFKA_PORT="$(port_of "$i")" KAFKA_CONTROLLER_PORT="$(($(port_of "$i") + 1))" \
    KAFKA_NODE_ID="$i" KAFKA_QUORUM_VOTERS="$(voters "$n")" KAFKA_CLUSTER_ID="$(cat "$DIR/cluster-id")" \
    KAFKA_REPLICATION="$rf" KAFKA_MIN_ISR="$min_isr" KAFKA_NO_WAIT=1 \
    "$SCRIPT_DIR/kafka-start.sh" >/dev/null
}

running() { # I
  local f="$DIR/broker-$1/kafka.pid"
  [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

up() { # N
  local n="$1" i
  [[ "$n" =~ ^[1-9]$ ]] || kafka_die "N must be 1..9, got '$n'"
  mkdir -p "$DIR"
  if [[ -f "$DIR/brokers" && "$(cat "$DIR/brokers")" != "$n" ]]; then
    kafka_die "a $(cat "$DIR/brokers")-broker cluster already in $DIR (scripts/kafka/kafka-cluster.sh down first)"
  fi
  echo "$n" >"$DIR/brokers"
  [[ -f "$DIR/cluster-id" ]] || kafka_tool kafka.tools.StorageTool random-uuid | tail -n1 >"$DIR/cluster-id"
  for ((i = 1; i <= n; i++)); do
    running "$i" || start_one "$i" "$n"
  done
  local timeout=${KAFKA_START_TIMEOUT:-300}
  local bootstrap=() deadline=$((SECONDS + timeout))
  for ((i = 1; i <= n; i++)); do bootstrap+=("$KAFKA_HOST:$(port_of "$i")"); done
  local IFS=,
  # Every broker registered and unfenced: the metadata lists all N.
  until [[ "$(kafka_tool org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "${bootstrap[*]}" 2>/dev/null \
      | grep -c '^127.0.0.1:')" == "$n" ]]; do
    if (( SECONDS >= deadline )); then
      # The caller's cleanup removes $DIR: show why here, while the logs exist.
      for f in "$DIR"/broker-*/kafka.out; do echo "== $f (last 30 lines)"; tail -n 30 "$f"; done >&2
      kafka_die "the $n Kafka brokers did not all register within $timeout s (logs above)"
    fi
    sleep 1
  done
  kafka_log "Kafka cluster up: $n brokers"
  echo "${bootstrap[*]}"
}

bootstrap_of() { # I...
  local b=() i
  for i in "$@"; do b+=("$KAFKA_HOST:$(port_of "$i")"); done
  local IFS=,; echo "${b[*]}"
}

add() { # I
  local i="$1" n
  n="$(count)"
  [[ "$i" =~ ^[1-9]$ ]] && (( i > n )) || kafka_die "add takes a broker id above the $n voters and at most 9, got '$i'"
  running "$i" && kafka_die "broker $i already runs"
  start_one "$i" "$n"
  local live=() d
  for d in "$DIR"/broker-*; do
    d="${d##*/broker-}"
    running "$d" && live+=("$d")
  done
  local bootstrap timeout=${KAFKA_START_TIMEOUT:-300}
  bootstrap="$(bootstrap_of "${live[@]}")"
  local deadline=$((SECONDS + timeout))
  # Registered and unfenced: the metadata lists it.
  until kafka_tool org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$bootstrap" 2>/dev/null \
      | grep -q "^$KAFKA_HOST:$(port_of "$i") (id: $i "; do
    if ! running "$i" || (( SECONDS >= deadline )); then
      echo "== $DIR/broker-$i/kafka.out (last 40 lines)" >&2
      tail -n 40 "$DIR/broker-$i/kafka.out" >&2 || true
      kafka_die "broker $i did not register within $timeout s (or exited; log above)"
    fi
    sleep 1
  done
  kafka_log "Kafka broker $i added (broker-only)"
  echo "$bootstrap"
}

down() {
  [[ -d "$DIR" ]] || return 0
  for d in "$DIR"/broker-*; do
    [[ -d "$d" ]] || continue
    KAFKA_DATA_DIR="$d" "$SCRIPT_DIR/kafka-stop.sh" >/dev/null 2>&1 || true
  done
  rm -rf "$DIR"
}

case "${1:-}" in
  up) up "${2:?usage: scripts/kafka/kafka-cluster.sh up N}" ;;
  add) add "${2:?usage: scripts/kafka/kafka-cluster.sh add I}" ;;
  start) start_one "${2:?usage: scripts/kafka/kafka-cluster.sh start I}" "$(count)" ;;
  pid) cat "$DIR/broker-${2:?usage: scripts/kafka/kafka-cluster.sh pid I}/kafka.pid" ;;
  down) down ;;
  *) kafka_die "usage: scripts/kafka/kafka-cluster.sh up N | add I | start I | pid I | down" ;;
esac
