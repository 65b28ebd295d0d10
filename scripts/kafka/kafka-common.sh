# shellcheck shell=bash
# Shared helpers for the Apache Kafka tooling scripts (sourced, not executed).
# Everything derives from this file's location; nothing here is specific to
# one checkout path. Standalone (it does not source scripts/lib.sh): tests/clients
# and `bash -c` callers source it on its own to run kafka_tool.

KAFKA_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$KAFKA_SCRIPTS_DIR/../.." && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
JAVA="${JAVA:-java}"

# Loopback-only defaults shared by start/stop/make-segment.
KAFKA_HOST="127.0.0.1"
KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
KAFKA_DATA_DIR="${KAFKA_DATA_DIR:-/tmp/ringlog-kafka}"
KAFKA_BOOTSTRAP="$KAFKA_HOST:$KAFKA_PORT"

kafka_die() { echo "error: $*" >&2; exit 1; }
kafka_log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

kafka_check_java() {
  command -v "$JAVA" >/dev/null 2>&1 || kafka_die "java not found (set JAVA=/path/to/java; Kafka 4.x needs Java 17+)"
  local v
  v="$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n1)"
  [[ -n "$v" && "$v" -ge 17 ]] || kafka_die "Kafka $KAFKA_VERSION needs Java 17+, '$JAVA' is version '${v:-unknown}'"
}

# Prints the libs dir (fetching into .cache/ on first use).
kafka_libs_dir() {
  local out
  out="$("$KAFKA_SCRIPTS_DIR/fetch-kafka.sh" "$KAFKA_VERSION")" || kafka_die "fetch-kafka.sh failed"
  printf '%s\n' "$out" | tail -n1
}

# kafka_java HEAP LOG4J2_CONFIG MAIN_CLASS ARGS... : run a Kafka main class in the foreground.
kafka_java() {
  local heap="$1" log_cfg="$2"; shift 2
  [[ -n "${KAFKA_LIBS:-}" ]] || KAFKA_LIBS="$(kafka_libs_dir)"
  kafka_check_java
  # shellcheck disable=SC2086
  "$JAVA" $heap -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$log_cfg" \
    ${KAFKA_EXTRA_JVM_OPTS:-} \
    -cp "$KAFKA_LIBS/*" "$@"
}

# Run a command-line tool class (quiet logging: WARN+ to stderr).
kafka_tool() {
  kafka_java "-Xmx512m" "$KAFKA_SCRIPTS_DIR/kafka-log4j2-tools.properties" "$@"
}
