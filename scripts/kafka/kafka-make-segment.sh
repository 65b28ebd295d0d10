#!/usr/bin/env bash
# Produce a real Apache-Kafka-written partition for compatibility tests.
#
#   scripts/kafka/kafka-make-segment.sh OUT_DIR
#
# Starts a throwaway single-node Kafka (scripts/kafka/kafka-start.sh, fresh data dir,
# loopback only), creates topic `kafka-written` (1 partition, segment.bytes
# 1 MiB => several segments), produces a mix of batches:
#   1. MAKE_PLAIN_RECORDS (3000): keys + 2 headers, uncompressed, multi-record batches
#   2. MAKE_GZIP_RECORDS  (1000): keys + 2 headers, gzip batches
#   3. MAKE_SYNC_RECORDS   (100): null keys, no headers, one record per batch (--sync),
#                                non-idempotent producer (producerId -1, baseSequence -1)
#   4. MAKE_PERF_RECORDS  (2000): ProducerPerformance, 512-byte values, no keys, uncompressed
# stops Kafka cleanly (SIGTERM: segments flushed, indexes trimmed) and copies
# the partition folder to OUT_DIR/kafka-written-0/. Then self-checks the copy
# with DumpLogSegments (index verification + deep iteration record count).
#
# Env: KAFKA_PORT (default 19192), KAFKA_CONTROLLER_PORT (default 19193),
#      MAKE_SEGMENT_BYTES (1048576, Kafka 4 minimum), MAKE_VALUE_BYTES (~400),
#      MAKE_VERIFY (1), KEEP_KAFKA_DATA (0: delete the broker's temp data dir).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

(( $# == 1 )) || usage OUT_DIR
OUT_DIR="$1"

export KAFKA_PORT="${KAFKA_PORT:-19192}"
export KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19193}"
KAFKA_DATA_DIR="$(mktemp -d /tmp/ringlog-kafka-make.XXXXXX)"
export KAFKA_DATA_DIR
# shellcheck source=kafka-common.sh
source "$SCRIPT_DIR/kafka-common.sh"

TOPIC=kafka-written
SEGMENT_BYTES="${MAKE_SEGMENT_BYTES:-1048576}"
N_PLAIN="${MAKE_PLAIN_RECORDS:-3000}"
N_GZIP="${MAKE_GZIP_RECORDS:-1000}"
N_SYNC="${MAKE_SYNC_RECORDS:-100}"
N_PERF="${MAKE_PERF_RECORDS:-2000}"
VALUE_BYTES="${MAKE_VALUE_BYTES:-400}"
VERIFY="${MAKE_VERIFY:-1}"
TOTAL=$((N_PLAIN + N_GZIP + N_SYNC + N_PERF))
START_TIME=$SECONDS

started=0 # broker currently running
cleanup() {
  local rc=$?
  if (( started )); then "$SCRIPT_DIR/kafka-stop.sh" || true; fi
  if [[ "${KEEP_KAFKA_DATA:-0}" == 1 ]] || [[ $rc -ne 0 && -e "$KAFKA_DATA_DIR/kafka.out" ]]; then
    kafka_log "broker data kept in $KAFKA_DATA_DIR"
  else
    rm -rf "$KAFKA_DATA_DIR"
  fi
  exit $rc
}
trap cleanup EXIT

KAFKA_LIBS="$(kafka_libs_dir)"
export KAFKA_LIBS

# gen_lines N PREFIX MODE: stdin lines for ConsoleProducer.
#   MODE=headers: "h-seq:<i>,h-src:<prefix>\tkey-<prefix>-<i>\tvalue..."
#   MODE=nullkey: "NULL\tvalue..." (null.marker=NULL => null key)
gen_lines() {
  awk -v n="$1" -v p="$2" -v mode="$3" -v vb="$VALUE_BYTES" 'BEGIN {
    srand(42);
    alpha = "abcdefghijklmnopqrstuvwxyz0123456789 ";
    for (i = 0; i < n; i++) {
      len = int(vb / 2 + rand() * vb);
      v = p "-value-" i "-";
      while (length(v) < len) v = v substr(alpha, int(rand() * 37) + 1, 1);
      if (mode == "headers")
        printf "h-seq:%d,h-src:%s\tkey-%s-%d\t%s\n", i, p, p, i, v;
      else
        printf "NULL\t%s\n", v;
    }
  }'
}

console_produce() { # console_produce EXTRA_ARGS... < lines
  kafka_tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$KAFKA_BOOTSTRAP" --topic "$TOPIC" \
    --producer-property acks=all --producer-property linger.ms=5 --producer-property batch.size=16384 \
    --property parse.key=true --property key.separator=$'\t' "$@"
}

"$SCRIPT_DIR/kafka-start.sh" >/dev/null
started=1

kafka_log "creating topic $TOPIC (1 partition, segment.bytes=$SEGMENT_BYTES)"
kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$KAFKA_BOOTSTRAP" --create --topic "$TOPIC" \
  --partitions 1 --replication-factor 1 \
  --config segment.bytes="$SEGMENT_BYTES" --config compression.type=producer --config message.timestamp.type=CreateTime >&2

kafka_log "producing $N_PLAIN uncompressed records (keys + headers)"
gen_lines "$N_PLAIN" plain headers | console_produce --compression-codec none \
  --property parse.headers=true --property headers.delimiter=$'\t' \
  --property headers.separator=, --property headers.key.separator=:

kafka_log "producing $N_GZIP gzip records (keys + headers)"
gen_lines "$N_GZIP" gzip headers | console_produce --compression-codec gzip \
  --property parse.headers=true --property headers.delimiter=$'\t' \
  --property headers.separator=, --property headers.key.separator=:

kafka_log "producing $N_SYNC single-record batches (null keys, no headers, non-idempotent)"
gen_lines "$N_SYNC" sync nullkey | console_produce --sync --compression-codec none --property null.marker=NULL \
  --producer-property enable.idempotence=false

kafka_log "producing $N_PERF records with ProducerPerformance (512-byte values)"
kafka_tool org.apache.kafka.tools.ProducerPerformance --topic "$TOPIC" --num-records "$N_PERF" \
  --record-size 512 --throughput -1 \
  --producer-props bootstrap.servers="$KAFKA_BOOTSTRAP" acks=all linger.ms=5 batch.size=16384 compression.type=none >&2

END_OFFSET="$(kafka_tool org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$KAFKA_BOOTSTRAP" \
  --topic "$TOPIC" --time -1 | awk -F: -v t="$TOPIC" '$1 == t && $2 == 0 {print $3}')"
[[ "$END_OFFSET" == "$TOTAL" ]] || kafka_die "log end offset is '$END_OFFSET', expected $TOTAL"

"$SCRIPT_DIR/kafka-stop.sh"
started=0

SRC="$KAFKA_DATA_DIR/data/$TOPIC-0"
[[ -d "$SRC" ]] || kafka_die "partition folder $SRC not found"
mkdir -p "$OUT_DIR"
DEST="$(cd "$OUT_DIR" && pwd)/$TOPIC-0"
if [[ -e "$DEST" ]]; then
  kafka_log "replacing existing $DEST"
  rm -rf "$DEST"
fi
cp -a "$SRC" "$DEST"

if [[ "$VERIFY" == 1 ]]; then
  kafka_log "verifying the copy with DumpLogSegments"
  shopt -s nullglob
  idx=("$DEST"/*.index "$DEST"/*.timeindex)
  logs=("$DEST"/*.log)
  err="$(kafka_tool kafka.tools.DumpLogSegments --verify-index-only \
          --files "$(IFS=,; echo "${idx[*]}")" 2>&1 >/dev/null)" || kafka_die "DumpLogSegments index verification crashed: $err"
  [[ -z "$err" ]] || kafka_die "DumpLogSegments reports index problems: $err"
  deep="$(kafka_tool kafka.tools.DumpLogSegments --deep-iteration --files "$(IFS=,; echo "${logs[*]}")" 2>&1)" \
    || kafka_die "DumpLogSegments --deep-iteration failed"
  if grep -qE 'invalid bytes|Non-consecutive' <<<"$deep"; then kafka_die "DumpLogSegments: $(grep -E 'invalid bytes|Non-consecutive' <<<"$deep")"; fi
  n_records="$(grep -c '^| offset:' <<<"$deep" || true)"
  n_batches="$(grep -c '^baseOffset:' <<<"$deep" || true)"
  [[ "$n_records" == "$TOTAL" ]] || kafka_die "DumpLogSegments saw $n_records records, expected $TOTAL"
  kafka_log "DumpLogSegments: indexes verified, $n_records records in $n_batches batches"
fi

{
  echo "kafka version:    $KAFKA_VERSION"
  echo "topic-partition:  $TOPIC-0 (segment.bytes=$SEGMENT_BYTES)"
  echo "records produced: $TOTAL (plain+headers $N_PLAIN, gzip+headers $N_GZIP, sync/null-key $N_SYNC, perf $N_PERF)"
  echo "log end offset:   $END_OFFSET"
  echo "files:"
  (cd "$DEST" && ls -l --time-style=+ | awk 'NR > 1 {printf "  %10d  %s\n", $5, $NF}')
  echo "elapsed:          $((SECONDS - START_TIME))s"
} | tee "$OUT_DIR/$TOPIC-summary.txt" >&2
echo "$DEST"
