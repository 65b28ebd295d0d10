#!/usr/bin/env bash
# Consumer group rebalance time, ringlog vs Apache Kafka 4.x in the same run: a group of
# MEMBERS librdkafka consumers on a PARTITIONS-partition topic (scripts/bench/bench_rebalance.py):
# join to first fetch, an extra member joining, a member leaving; median of ROUNDS rounds.
# Both brokers run with group.initial.rebalance.delay.ms=0 (the delay is a fixed wait, the same
# for both) and on CPU 1; the consumers run on CPU 0.
#
#   scripts/bench/bench-rebalance.sh OUT_DIR [MEMBERS] [PARTITIONS] [ROUNDS]   (default 10 100 5)
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
(( $# >= 1 )) || usage "OUT_DIR [MEMBERS] [PARTITIONS] [ROUNDS]"
OUT_DIR="$1"; MEMBERS="${2:-10}"; PARTITIONS="${3:-100}"; ROUNDS="${4:-5}"
for v in "$MEMBERS" "$PARTITIONS" "$ROUNDS"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "MEMBERS, PARTITIONS and ROUNDS must be whole numbers, got '$v'" >&2; exit 2; }
done
mkdir -p "$OUT_DIR"
setup_deps
cargo build --release -q -p node
BENCH=(taskset -c 0 python3 "$SCRIPT_DIR/bench_rebalance.py" --members "$MEMBERS" --partitions "$PARTITIONS" --rounds "$ROUNDS")

DATA="$(mktemp -d -p "$REPO_ROOT/target" rebalance-ringlog.XXXXXX)"
taskset -c 1 target/release/ringlog serve --data-dir "$DATA" --listen 127.0.0.1:29492 \
  --set group.initial.rebalance.delay.ms=0 >"$DATA/broker.log" 2>&1 &
PID=$!
wait_listening 29492 "$PID" "$DATA/broker.log" ringlog
echo "== ringlog" >&2
"${BENCH[@]}" --bootstrap 127.0.0.1:29492 >"$OUT_DIR/rebalance-ringlog.json" || { tail -20 "$DATA/broker.log" >&2; exit 1; }
kill -TERM $PID; wait $PID || true
rm -rf "$DATA"

export KAFKA_DATA_DIR; KAFKA_DATA_DIR="$(mktemp -d -p "$REPO_ROOT/target" rebalance-kafka.XXXXXX)"
export KAFKA_PORT=29592 KAFKA_CONTROLLER_PORT=29593 KAFKA_HEAP_OPTS="-Xms1g -Xmx1g"
export KAFKA_EXTRA_PROPS="group.initial.rebalance.delay.ms=0"
taskset -c 1 "$REPO_ROOT/scripts/kafka/kafka-start.sh" >/dev/null || die "Apache Kafka did not start (see $KAFKA_DATA_DIR)"
echo "== kafka" >&2
"${BENCH[@]}" --bootstrap 127.0.0.1:29592 >"$OUT_DIR/rebalance-kafka.json" || { "$REPO_ROOT/scripts/kafka/kafka-stop.sh"; exit 1; }
"$REPO_ROOT/scripts/kafka/kafka-stop.sh" >/dev/null
rm -rf "$KAFKA_DATA_DIR"

python3 - "$OUT_DIR/rebalance-ringlog.json" "$OUT_DIR/rebalance-kafka.json" "$MEMBERS" "$PARTITIONS" "$ROUNDS" <<'PY' | tee "$OUT_DIR/rebalance.md"
import json, sys
r, k = (json.load(open(p)) for p in sys.argv[1:3])
print(f"Rebalance, {sys.argv[3]} members on {sys.argv[4]} partitions, median of {sys.argv[5]} rounds (seconds):\n")
print("| phase | ringlog | Apache Kafka | Kafka / ringlog |\n|---|---|---|---|")
names = {"join": "join to first fetch (all members)", "grow": "a member joins", "leave": "a member leaves"}
for ph, label in names.items():
    a, b = r[ph]["median"], k[ph]["median"]
    print(f"| {label} | {a:.3f} | {b:.3f} | {b / a:.2f}× |")
PY
