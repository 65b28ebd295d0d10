#!/usr/bin/env bash
# Stop the broker started by scripts/kafka/kafka-start.sh (same KAFKA_DATA_DIR):
# SIGTERM (clean, controlled shutdown: segments/indexes are flushed & trimmed),
# wait up to KAFKA_STOP_TIMEOUT seconds (default 60), then SIGKILL.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=kafka-common.sh
source "$SCRIPT_DIR/kafka-common.sh"

PID_FILE="$KAFKA_DATA_DIR/kafka.pid"
TIMEOUT="${KAFKA_STOP_TIMEOUT:-60}"

if [[ ! -f "$PID_FILE" ]]; then
  kafka_log "no pid file $PID_FILE; nothing to stop"
  exit 0
fi
PID="$(cat "$PID_FILE")"
[[ "$PID" =~ ^[0-9]+$ ]] || kafka_die "bad pid file $PID_FILE"

# Only signal the process if it still is our Kafka broker (pid may be recycled).
if ! kill -0 "$PID" 2>/dev/null || ! tr '\0' ' ' <"/proc/$PID/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka'; then
  kafka_log "Kafka (pid $PID) not running"
  rm -f "$PID_FILE"
  exit 0
fi

kafka_log "stopping Kafka (pid $PID) with SIGTERM"
kill -TERM "$PID"
deadline=$((SECONDS + TIMEOUT))
while kill -0 "$PID" 2>/dev/null; do
  if (( SECONDS >= deadline )); then
    kafka_log "Kafka still running after ${TIMEOUT}s; sending SIGKILL"
    kill -KILL "$PID" 2>/dev/null || true
    sleep 1
    break
  fi
  sleep 0.5
done
rm -f "$PID_FILE"
kafka_log "Kafka stopped"
