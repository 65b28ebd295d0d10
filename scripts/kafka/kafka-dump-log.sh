#!/usr/bin/env bash
# Run Apache Kafka's DumpLogSegments (what bin/kafka-dump-log.sh runs) from the
# cached jars (scripts/kafka/fetch-kafka.sh). All arguments are passed through, e.g.
#   scripts/kafka/kafka-dump-log.sh --files 00000000000000000000.log --deep-iteration --print-data-log
#   scripts/kafka/kafka-dump-log.sh --files 00000000000000000000.index --verify-index-only
#   scripts/kafka/kafka-dump-log.sh --files 00000000000000000000.timeindex --index-sanity-check
# Index/time-index dumps need the segment's .log (and for .timeindex also the
# .index) next to the file. See scripts/kafka/KAFKA_DUMP_LOG_NOTES.md.
# Convenience: if the first argument is not an option, all leading non-option
# arguments are joined into --files a,b,c.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=kafka-common.sh
source "$SCRIPT_DIR/kafka-common.sh"

(( $# > 0 )) || { kafka_tool kafka.tools.DumpLogSegments --help; exit 2; }

args=()
if [[ "$1" != -* ]]; then
  files=()
  while (( $# > 0 )) && [[ "$1" != -* ]]; do files+=("$1"); shift; done
  args+=(--files "$(IFS=,; echo "${files[*]}")")
fi
args+=("$@")

KAFKA_LIBS="$(kafka_libs_dir)"
kafka_tool kafka.tools.DumpLogSegments "${args[@]}"
