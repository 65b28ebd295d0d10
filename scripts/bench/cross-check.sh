#!/usr/bin/env bash
# Cross-checks ringlog-bench against Kafka's own kafka-producer-perf-test (ProducerPerformance
# from the kafka-tools jar) on the same ringlog node and the same workload: 1 KiB records into a
# 2-partition topic, acks=1, linger 1 ms, 128 KiB batches, 5 requests in flight, one producer, at
# each fixed rate and at max rate (-1). Neither tool excludes a warm-up; both report publish
# latency from send() to acknowledgement. The broker runs on CPU 1, the load generators on CPU 0.
# The last column is the mean latency without the JVM's warm-up: kafka-producer-perf-test's
# 5-second windows after the first two, ringlog-bench's whole run (it has no warm-up to skip).
#
#   scripts/bench/cross-check.sh [SECONDS_PER_RUN] [RATE...]     (default: 30 s; 10000 50000 -1)
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
SECONDS_PER_RUN="${1:-30}"; shift || true
RATES=("$@"); (( ${#RATES[@]} )) || RATES=(10000 50000 -1)
[[ "$SECONDS_PER_RUN" =~ ^[0-9]+$ ]] || { echo "SECONDS_PER_RUN must be a whole number, got '$SECONDS_PER_RUN'" >&2; exit 2; }
setup_deps
cargo build --release -q -p node -p bench-harness

WORK="$(mktemp -d -p "$REPO_ROOT/target" cross-check.XXXXXX)"
PORT=29392
taskset -c 1 target/release/ringlog serve --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" >"$WORK/broker.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
wait_listening "$PORT" "$PID" "$WORK/broker.log" ringlog
target/release/ringlog topic --bootstrap-server "127.0.0.1:$PORT" create xcheck --partitions 2 >/dev/null

printf '| rate (msg/s) | tool | sent msg/s | p50 ms | p99 ms | p99.9 ms | max ms | mean ms, steady state |\n|---|---|---|---|---|---|---|---|\n'
for rate in "${RATES[@]}"; do
  [[ "$rate" =~ ^-?[0-9]+$ ]] || { echo "rate must be an integer (-1 = max), got '$rate'" >&2; exit 2; }
  if (( rate > 0 )); then records=$(( rate * SECONDS_PER_RUN )); else records=$(( 300000 * SECONDS_PER_RUN )); fi
  taskset -c 0 bash -c "source '$REPO_ROOT/scripts/kafka/kafka-common.sh'; kafka_tool org.apache.kafka.tools.ProducerPerformance \
      --topic xcheck --num-records $records --record-size 1024 --throughput $rate \
      --producer-props bootstrap.servers=127.0.0.1:$PORT acks=1 linger.ms=1 batch.size=131072 \
      max.in.flight.requests.per.connection=5 compression.type=none" >"$WORK/perf-test.out"
  # Windows every 5 s: "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency."
  # then the total: "..., p50 ms 50th, p95 ms 95th, p99 ms 99th, p999 ms 99.9th."; the steady-state
  # mean skips the first two windows (JVM warm-up).
  python3 - "$WORK/perf-test.out" "$rate" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]) if "records sent" in l]
total = lines[-1]
m = re.search(r"([\d.]+) records/sec.*?([\d.]+) ms max latency, (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th, (\d+) ms 99.9th", total)
windows = [float(re.search(r"([\d.]+) ms avg latency", l).group(1)) for l in lines[:-1]][2:]
steady = sum(windows) / len(windows) if windows else float("nan")
print("| %s | kafka-producer-perf-test | %.0f | %s | %s | %s | %s | %.2f |" % (sys.argv[2], float(m.group(1)), m.group(3), m.group(4), m.group(5), m.group(2), steady))
PY
  rate_field="producerRate: $rate"; (( rate > 0 )) || rate_field="producerRate: 0"
  cat >"$WORK/w.yaml" <<YAML
name: cross-check
topics: 1
partitionsPerTopic: 2
messageSize: 1024
producersPerTopic: 1
subscriptionsPerTopic: 0
consumerPerSubscription: 0
$rate_field
keyDistributor: NO_KEY
testDurationMinutes: 1
warmupDurationMinutes: 0
producer: { acks: 1, batchSizeBytes: 131072, lingerMs: 1, compression: none, maxInFlight: 5 }
YAML
  taskset -c 0 target/release/ringlog-bench run --bootstrap "127.0.0.1:$PORT" --workload "$WORK/w.yaml" \
    --out "$WORK/r.json" --broker-pid $PID --duration-minutes "$(awk "BEGIN{print $SECONDS_PER_RUN/60}")" >/dev/null 2>&1
  python3 - "$WORK/r.json" "$rate" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rate = sum(r["publishRate"]) / max(1, len(r["publishRate"]))
print("| %s | ringlog-bench | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (sys.argv[2], rate,
      r["aggregatedPublishLatency50pct"], r["aggregatedPublishLatency99pct"],
      r["aggregatedPublishLatency999pct"], r["aggregatedPublishLatencyMax"],
      r["aggregatedPublishLatencyAvg"]))
PY
done
