# shellcheck shell=bash
# The preamble every script under scripts/ sources right after its `set -euo pipefail`, with a
# path relative to itself:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"       (scripts/*.sh)
#   source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"    (scripts/<folder>/*.sh)
#
# It runs nothing and changes no shell option or directory; it sets
#   REPO_ROOT    the repository root, absolute (from this file's own location)
#   SCRIPT_DIR   the sourcing script's own folder, absolute
# and defines the helpers several scripts share:
#   die MESSAGE...            "<script name>: MESSAGE" to stderr, exit 1
#   usage ARGS...             "usage: $0 ARGS" to stderr, exit 2
#   setup_deps                install/check the tools (scripts/install-deps.sh) and raise
#                             RLIMIT_MEMLOCK in this shell (inherited by what it starts)
#   port_open PORT            whether 127.0.0.1:PORT takes a connection now (bash's /dev/tcp)
#   wait_port PORT SECONDS    poll port_open every 0.1 s: 0 once open, 1 after SECONDS
#   wait_listening PORT PID LOG NAME
#                             wait up to 10 s for PORT; if process PID died instead, print
#                             its LOG and fail with "NAME did not start"
# scripts/install-deps.sh and scripts/kafka/kafka-common.sh are libraries of their own, also
# sourced from outside these scripts (tests/clients, `bash -c`): they do not source this file.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[1]:-${BASH_SOURCE[0]}}")" && pwd)"

die() {
  echo "${0##*/}: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 $*" >&2
  exit 2
}

setup_deps() {
  # shellcheck source=install-deps.sh
  source "$REPO_ROOT/scripts/install-deps.sh"
  ringlog_install_deps
  ringlog_raise_memlock
}

# For the benchmarks against Apache Kafka: tools installed, the ringlog binary built (RINGLOG_BIN,
# default target/release/ringlog), Kafka's jars fetched and exported as KAFKA_LIBS (and
# RINGLOG_KAFKA_LIBS).
bench_against_kafka_setup() {
  setup_deps
  [[ -x "${RINGLOG_BIN:-target/release/ringlog}" ]] || die "no ringlog binary: cargo build --release -p node --bin ringlog"
  KAFKA_LIBS="$(scripts/kafka/fetch-kafka.sh | tail -n1)"
  export KAFKA_LIBS RINGLOG_KAFKA_LIBS="$KAFKA_LIBS"
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_port() {
  local port="$1" i
  for ((i = 0; i < $2 * 10; i++)); do
    port_open "$port" && return 0
    sleep 0.1
  done
  return 1
}

wait_listening() {
  wait_port "$1" 10 || true
  kill -0 "$2" 2>/dev/null || { cat "$3" >&2; die "$4 did not start"; }
}
