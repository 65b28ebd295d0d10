#!/usr/bin/env bash
# The performance lab's suite: runs workloads against ringlog and Apache Kafka 4.x (KRaft,
# started from the jars scripts/kafka/fetch-kafka.sh resolves) one after the other on this machine,
# then renders one HTML report and a Markdown summary from all result files.
#
#   scripts/bench/perf-suite.sh OUT_DIR WORKLOAD.yaml...
#
# Env: SUITE_DURATION_MINUTES / SUITE_WARMUP_MINUTES override the workloads' durations;
# SUITE_TARGETS (default "ringlog kafka"; "ringlog-baseline" runs the ringlog binary named by
# SUITE_RINGLOG_BASELINE_BIN, e.g. an older commit's build, for before/after figures; "null"
# runs `ringlog-bench null-broker`, the floor: records in memory and nothing else, so the report
# can state each broker's own share of a percentile as its figure minus the floor's);
# SUITE_DEVICE_FLOOR=1 first measures the data device with fio (16 KiB O_DIRECT sequential
# writes at 10 MB/s, and the same with an fdatasync after each) into OUT_DIR/device-floor.json,
# which the report shows beside the brokers; SUITE_BROKER_CPUS / SUITE_HARNESS_CPUS (taskset CPU
# lists, e.g. 1 and 0) pin each broker and ringlog-bench to separate cores — ringlog then runs one
# shard per allowed CPU, Kafka's JVM sizes its thread pools to the same CPUs.
# SUITE_DURABILITY=fsync makes both brokers fsync every message before acknowledging it
# (ringlog log.flush.interval.messages=1, Kafka log.flush.interval.messages=1); results then go
# to files named *-fsync-*. Durability is the same for both: neither fsyncs per
# message (Kafka's default flush policy; ringlog's log.flush.interval.messages=-1), acks=1 as the
# workloads say. Both brokers use all cores; ringlog-bench runs beside them.
# SUITE_KAFKA_HEAP (default "-Xms1g -Xmx1g", kafka-server-start.sh's default) sets Apache Kafka's
# JVM heap: with 10 000 partitions a 1 GiB heap runs out (OutOfMemoryError in its network
# threads), so the partitions-10000 workload runs Kafka with "-Xms4g -Xmx4g".
# SUITE_COLD=1 (catch-up reads): the harness syncs and drops the page cache after writing the
# backlog (--drop-caches), and ringlog runs with a read cache of 64 MiB (log.read.cache.bytes:
# room for read-ahead, none for a 4 GB backlog), so neither broker has the backlog in memory
# when the consumers start; results go to files named
# *-cold-*, and the device's own O_DIRECT sequential read rate (fio, 1 MiB reads, 4 in flight)
# is measured first, into OUT_DIR/raw-device-read.txt.
# SUITE_CLUSTER=N runs each target as an N-node cluster on loopback instead of one node:
# ringlog via scripts/cluster.sh (etcd + N nodes, SUITE_CLUSTER_SHARDS shards each, default 1),
# Apache Kafka via scripts/kafka/kafka-cluster.sh (N KRaft brokers, each a controller-quorum voter);
# both at their default settings (broker.session.timeout.ms 9000, replica.lag.time.max.ms
# 30000); results go to files named *-Nnodes-*, broker CPU summed over the N processes.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
(( $# >= 2 )) || usage "OUT_DIR WORKLOAD.yaml..."
OUT_DIR="$1"; shift
mkdir -p "$OUT_DIR"
setup_deps
KAFKA_SCRIPTS="$REPO_ROOT/scripts/kafka"
cargo build --release -q -p node -p bench-harness -p perf
for w in "$@"; do target/release/ringlog-bench check "$w" >/dev/null; done
BROKER_PIN=(); HARNESS_PIN=()
[[ -n "${SUITE_BROKER_CPUS:-}" ]] && BROKER_PIN=(taskset -c "$SUITE_BROKER_CPUS")
[[ -n "${SUITE_HARNESS_CPUS:-}" ]] && HARNESS_PIN=(taskset -c "$SUITE_HARNESS_CPUS")
RINGLOG_SET=(); SUFFIX=""
case "${SUITE_DURABILITY:-none}" in
  none) ;;
  fsync)
    RINGLOG_SET=(--set log.flush.interval.messages=1)
    export RINGLOG_CLUSTER_SET="log.flush.interval.messages=1"
    export KAFKA_EXTRA_PROPS="log.flush.interval.messages=1"
    SUFFIX="-fsync" ;;
  *) echo "SUITE_DURABILITY must be none or fsync, got '${SUITE_DURABILITY}'" >&2; exit 2 ;;
esac
# The workloads' brokerConfig (one for all workloads of a call; ringlog-bench refuses a mix):
# broker properties both brokers start with, e.g. a retention check interval.
BROKER_CONFIG="$(target/release/ringlog-bench broker-config "$@")" || exit 2
for kv in $BROKER_CONFIG; do
  RINGLOG_SET+=(--set "$kv")
  export RINGLOG_CLUSTER_SET="${RINGLOG_CLUSTER_SET:+$RINGLOG_CLUSTER_SET }$kv"
  export KAFKA_EXTRA_PROPS="${KAFKA_EXTRA_PROPS:+$KAFKA_EXTRA_PROPS$'\n'}$kv"
done
# SUITE_RINGLOG_SET="key=value ..." adds broker properties to a single ringlog node (e.g.
# log.read.cache.bytes=6442450944 for a read cache that holds a 4 GB catch-up backlog).
for kv in ${SUITE_RINGLOG_SET:-}; do RINGLOG_SET+=(--set "$kv"); done
OVERRIDES=()
if [[ "${SUITE_COLD:-0}" == 1 ]]; then
  RINGLOG_SET+=(--set log.read.cache.bytes=67108864)
  OVERRIDES+=(--drop-caches)
  SUFFIX="$SUFFIX-cold"
  RAW="$(mktemp -d -p "$REPO_ROOT/target" raw-read.XXXXXX)"
  fio --name=seqread --filename="$RAW/read.dat" --size=4G --rw=read --bs=1M --iodepth=4 \
    --ioengine=io_uring --direct=1 --output-format=json >"$RAW/fio.json" 2>/dev/null
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]["read"]; print("raw_read bs=1048576 qd=4 MBps=%.0f" % (j["bw_bytes"] / 1e6))' "$RAW/fio.json" | tee "$OUT_DIR/raw-device-read.txt" >&2
  rm -rf "$RAW"
fi
if [[ "${SUITE_DEVICE_FLOOR:-0}" == 1 ]]; then
  "$SCRIPT_DIR/device-floor.sh" "$OUT_DIR/device-floor.json" "$REPO_ROOT/target"
fi
[[ -n "${SUITE_DURATION_MINUTES:-}" ]] && OVERRIDES+=(--duration-minutes "$SUITE_DURATION_MINUTES")
[[ -n "${SUITE_WARMUP_MINUTES:-}" ]] && OVERRIDES+=(--warmup-minutes "$SUITE_WARMUP_MINUTES")
RESULTS=()
CLUSTER="${SUITE_CLUSTER:-}"
if [[ -n "$CLUSTER" ]]; then
  [[ "$CLUSTER" =~ ^[1-9]$ ]] || { echo "SUITE_CLUSTER must be 1..9, got '$CLUSTER'" >&2; exit 2; }
  SUFFIX="$SUFFIX-${CLUSTER}nodes"
fi

# A single ringlog node serves its Prometheus endpoint here; the suite keeps the shard's stall
# and data-write counters before and after each workload in <result>.stalls.txt
# (scripts/bench/perf-stalls.py FOLDER prints what each workload added), so a slow tail can be
# told apart: a shard that could not run (stall probe) or a device that wrote slowly.
METRICS_PORT=29404
stall_counters() { # LABEL
  echo "# $1"
  python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
    "http://127.0.0.1:$METRICS_PORT/metrics" 2>/dev/null |
    grep -E '^ringlog_(shard_stall|shard_stalls|log_slow_|log_data_write|log_sync|log_seal|shard_task_queue_busy)' || true
}

run_workloads() { # TARGET BOOTSTRAP PID [METRICS]
  for w in "${WORKLOADS[@]}"; do
    local name; name="$(basename "$w" .yaml)"
    local out="$OUT_DIR/$1$SUFFIX-$name.json"
    echo "== $1: $name" >&2
    [[ -n "${4:-}" ]] && stall_counters before >"${out%.json}.stalls.txt"
    "${HARNESS_PIN[@]}" target/release/ringlog-bench run --bootstrap "$2" --workload "$w" --out "$out" --target "$1$SUFFIX" --broker-pid "$3" "${OVERRIDES[@]}"
    [[ -n "${4:-}" ]] && stall_counters after >>"${out%.json}.stalls.txt"
    RESULTS+=("$out")
  done
}

# A failed workload or a target that does not start must not leave a broker running.
CURRENT_PID=""
cleanup() {
  [[ -n "$CURRENT_PID" ]] && kill -TERM "$CURRENT_PID" 2>/dev/null && wait "$CURRENT_PID" 2>/dev/null
  [[ -n "${RINGLOG_CLUSTER_DIR:-}" ]] && "$REPO_ROOT/scripts/cluster.sh" down >/dev/null 2>&1
  [[ -n "${KAFKA_CLUSTER_DIR:-}" ]] && "$KAFKA_SCRIPTS/kafka-cluster.sh" down >/dev/null 2>&1
  [[ -n "${KAFKA_DATA_DIR:-}" && -f "${KAFKA_DATA_DIR}/kafka.pid" ]] && "$KAFKA_SCRIPTS/kafka-stop.sh" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT
WORKLOADS=("$@")
# Fixed ports stay below 32768: clients' local ports come from 32768-60999 (ip_local_port_range).
for target in ${SUITE_TARGETS:-ringlog kafka}; do
  if [[ -n "$CLUSTER" ]]; then
    case "$target" in
      ringlog)
        export RINGLOG_CLUSTER_DIR; RINGLOG_CLUSTER_DIR="$(mktemp -d -p "$REPO_ROOT/target" suite-cluster.XXXXXX)"
        "${BROKER_PIN[@]}" "$REPO_ROOT/scripts/cluster.sh" up "$CLUSTER" "${SUITE_CLUSTER_SHARDS:-1}" >&2
        PIDS="$(cat "$RINGLOG_CLUSTER_DIR"/node-*.pid | paste -sd,)"
        BOOTSTRAP="$(for i in $(seq 1 "$CLUSTER"); do echo "127.0.0.1:$((19000 + 100 * i))"; done | paste -sd,)"
        run_workloads ringlog "${BOOTSTRAP%%,*}" "$PIDS"   # ringlog-bench discovers the rest
        "$REPO_ROOT/scripts/cluster.sh" down >/dev/null; RINGLOG_CLUSTER_DIR=""
        ;;
      kafka)
        export KAFKA_CLUSTER_DIR; KAFKA_CLUSTER_DIR="$(mktemp -d -p "$REPO_ROOT/target" suite-kafka-cluster.XXXXXX)"
        BOOTSTRAP="$("${BROKER_PIN[@]}" "$KAFKA_SCRIPTS/kafka-cluster.sh" up "$CLUSTER" | tail -n1)"
        PIDS="$(for i in $(seq 1 "$CLUSTER"); do "$KAFKA_SCRIPTS/kafka-cluster.sh" pid "$i"; done | paste -sd,)"
        run_workloads kafka "${BOOTSTRAP%%,*}" "$PIDS"
        "$KAFKA_SCRIPTS/kafka-cluster.sh" down; KAFKA_CLUSTER_DIR=""
        ;;
      *) echo "SUITE_CLUSTER runs ringlog and kafka, not '$target'" >&2; exit 2 ;;
    esac
    continue
  fi
  case "$target" in
    ringlog|ringlog-baseline)
      BIN=target/release/ringlog
      if [[ "$target" == ringlog-baseline ]]; then
        BIN="${SUITE_RINGLOG_BASELINE_BIN:?ringlog-baseline needs SUITE_RINGLOG_BASELINE_BIN}"
      fi
      DATA="$(mktemp -d -p "$REPO_ROOT/target" suite-ringlog.XXXXXX)"
      "${BROKER_PIN[@]}" "$BIN" serve --data-dir "$DATA" --listen 127.0.0.1:29092 \
        --set "metrics.listen=127.0.0.1:$METRICS_PORT" "${RINGLOG_SET[@]}" >"$DATA/broker.log" 2>&1 &
      PID=$!; CURRENT_PID=$PID
      wait_listening 29092 "$PID" "$DATA/broker.log" ringlog
      run_workloads "$target" 127.0.0.1:29092 "$PID" metrics
      kill -TERM $PID; wait $PID || true
      CURRENT_PID=""
      rm -rf "$DATA"
      ;;
    kafka)
      export KAFKA_DATA_DIR; KAFKA_DATA_DIR="$(mktemp -d -p "$REPO_ROOT/target" suite-kafka.XXXXXX)"
      export KAFKA_PORT=29192 KAFKA_CONTROLLER_PORT=29193 KAFKA_HEAP_OPTS="${SUITE_KAFKA_HEAP:--Xms1g -Xmx1g}"
      "${BROKER_PIN[@]}" "$KAFKA_SCRIPTS/kafka-start.sh" >/dev/null || die "Apache Kafka did not start (see $KAFKA_DATA_DIR)"
      run_workloads kafka 127.0.0.1:29192 "$(cat "$KAFKA_DATA_DIR/kafka.pid")"
      "$KAFKA_SCRIPTS/kafka-stop.sh" >/dev/null
      rm -rf "$KAFKA_DATA_DIR"; KAFKA_DATA_DIR=""
      ;;
    null)
      # The floor: ringlog-bench's null broker (records in memory, nothing else), pinned as
      # the brokers are, so its figures are the client + network + machine share of each
      # percentile (perf/README.md, "The floor").
      NULL_LOG="$(mktemp -p "$REPO_ROOT/target" suite-null.XXXXXX)"
      "${BROKER_PIN[@]}" target/release/ringlog-bench null-broker --listen 127.0.0.1:29292 >"$NULL_LOG" 2>&1 &
      PID=$!; CURRENT_PID=$PID
      wait_listening 29292 "$PID" "$NULL_LOG" "the null broker"
      run_workloads null 127.0.0.1:29292 "$PID"
      kill -TERM $PID; wait $PID || true
      CURRENT_PID=""
      rm -f "$NULL_LOG"
      ;;
    *) echo "unknown target '$target' (ringlog, ringlog-baseline, kafka, null)" >&2; exit 2 ;;
  esac
done
DEVICE=()
[[ -f "$OUT_DIR/device-floor.json" ]] && DEVICE=(--device-floor "$OUT_DIR/device-floor.json")
target/release/ringlog-perf report "${RESULTS[@]}" --html "$OUT_DIR/report.html" --markdown "$OUT_DIR/summary.md" --title "ringlog vs Apache Kafka" "${DEVICE[@]}"
