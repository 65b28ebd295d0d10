#!/usr/bin/env bash
# Does the log cleaner hurt produce latency? Loads a compacted topic with ~2 GB of 1 KiB
# records over 5000 keys (cleaner off), then runs the same fixed-rate produce workload
# (perf/workloads/fixed-rate-10000.yaml, another topic) three times on copies of that data:
# cleaner off, cleaner on (it cleans the 2 GB during the run), cleaner throttled to 50 MB/s
# (it cleans all along the run). Broker on CPU 1, load generator on CPU 0. Prints each run's
# publish latency and broker CPU s/GB; repeat it, the machine is noisy.
#   scripts/bench/bench-cleaner.sh [RECORDS]      (default 2000000)
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
RECORDS="${1:-2000000}"
[[ "$RECORDS" =~ ^[0-9]+$ ]] || { echo "bench-cleaner: RECORDS must be a number, got '$RECORDS'" >&2; exit 2; }
cargo build --release -q -p node --bin ringlog -p bench-harness
BIN=target/release/ringlog
BENCH=target/release/ringlog-bench
BASE=target/bench-cleaner
OUT="${OUT:-$BASE-results}"
PORT="${PORT:-19500}"
rm -rf "$BASE" "$BASE"-*; mkdir -p "$BASE" "$OUT"
broker_up() { wait_port "$PORT" 30 || die "no broker on $PORT"; }

taskset -c 1 "$BIN" serve --data-dir "$BASE" --listen "127.0.0.1:$PORT" --shards 1 --set log.cleaner.enable=false >"$OUT/load.log" 2>&1 &
PID=$!; broker_up
taskset -c 0 python3 - "127.0.0.1:$PORT" "$RECORDS" <<'PY'
import sys, time
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
b, n = sys.argv[1], int(sys.argv[2])
admin = AdminClient({"bootstrap.servers": b})
admin.create_topics([NewTopic("dirty", 1, 1, config={
    "cleanup.policy": "compact", "segment.bytes": str(64 << 20), "min.cleanable.dirty.ratio": "0.01"})])["dirty"].result(30)
p = Producer({"bootstrap.servers": b, "linger.ms": 20, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
v, t = b"x" * 1000, time.time()
for i in range(n):
    while True:
        try:
            p.produce("dirty", key=b"k%d" % (i % 5000), value=v, partition=0); break
        except BufferError:
            p.poll(0.05)
    if i % 10000 == 0:
        p.poll(0)
assert p.flush(120) == 0
print(f"loaded {n} records in {time.time() - t:.1f} s")
PY
kill -TERM "$PID"; wait "$PID" || true
du -sh "$BASE/dirty-0"
for mode in off on throttled; do
  case $mode in
    off) S=(--set log.cleaner.enable=false) ;;
    on) S=() ;;
    throttled) S=(--set log.cleaner.io.max.bytes.per.second=52428800) ;;
  esac
  rm -rf "$BASE-$mode"; cp -a "$BASE" "$BASE-$mode"; sync
  taskset -c 1 "$BIN" serve --data-dir "$BASE-$mode" --listen "127.0.0.1:$PORT" --shards 1 "${S[@]}" >"$OUT/$mode.log" 2>&1 &
  PID=$!; broker_up
  taskset -c 0 "$BENCH" run --bootstrap "127.0.0.1:$PORT" --workload perf/workloads/fixed-rate-10000.yaml \
    --out "$OUT/$mode.json" --broker-pid "$PID" --duration-minutes 0.75 --warmup-minutes 0.05 >"$OUT/$mode.bench" 2>&1
  kill -TERM "$PID"; wait "$PID" || true
  grep -o "log cleaned.*" "$OUT/$mode.log" | head -1 || true
  python3 - "$OUT/$mode.json" "$mode" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:>9}: publish p50 {d['aggregatedPublishLatency50pct']:.2f} ms, p99 {d['aggregatedPublishLatency99pct']:.2f} ms, "
      f"p99.9 {d['aggregatedPublishLatency999pct']:.2f} ms, max {d['aggregatedPublishLatencyMax']:.2f} ms, "
      f"broker CPU {d['brokerCpuSecondsPerGB']:.1f} s/GB")
PY
  rm -rf "$BASE-$mode"
done
rm -rf "$BASE"
echo "results: $OUT"
