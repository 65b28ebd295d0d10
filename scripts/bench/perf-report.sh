#!/usr/bin/env bash
# Renders a results folder's report.html again from its result JSON (the HTML reports are
# generated, not committed; see perf/RESULTS.md). The committed summary.md is left as it is.
#
#   scripts/bench/perf-report.sh OUT_DIR_OR_RUN_DIR
#
# Every folder at or under the argument that holds perf-suite result files
# (<target>[-fsync][-cold][-Nnodes]-<workload>.json, as scripts/bench/perf-suite.sh names them) gets
# its report.html, rendered as perf-suite.sh renders it:
#
#   target/release/ringlog-perf report DIR/<result>.json... --html DIR/report.html \
#     --title "ringlog vs Apache Kafka" [--device-floor DIR/device-floor.json]
#
# The results are passed target by target in REPORT_TARGETS order (default
# "ringlog-baseline ringlog kafka null"; the first result of each workload is the base of the
# ratios, so set REPORT_TARGETS to the run's SUITE_TARGETS to get its report exactly), the
# workloads of a target in version order. Builds ringlog-perf only when it is missing.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
(( $# == 1 )) && [[ -d "$1" ]] || usage OUT_DIR_OR_RUN_DIR
TOP="$(cd "$1" && pwd)"
cd "$REPO_ROOT"
TOP="${TOP#"$REPO_ROOT"/}"   # paths as perf-suite.sh passes them (the report shows them)
BIN=target/release/ringlog-perf
[[ -x "$BIN" ]] || cargo build --release -q -p perf

# The result files of folder $1, in report order, one per line.
results_in() {
  local dir="$1" t f re
  for t in ${REPORT_TARGETS:-ringlog-baseline ringlog kafka null}; do
    re="^${t}(-fsync)?(-cold)?(-[1-9]nodes)?-.+\.json$"
    while IFS= read -r f; do
      [[ "$f" =~ $re ]] || continue
      [[ "$t" == ringlog && "$f" == ringlog-baseline-* ]] && continue
      echo "$dir/$f"
    done < <(find "$dir" -maxdepth 1 -type f -name '*.json' -printf '%f\n' | sort -V)
  done
}

rendered=0
while IFS= read -r dir; do
  mapfile -t files < <(results_in "$dir")
  (( ${#files[@]} > 0 )) || continue
  device=()
  [[ -f "$dir/device-floor.json" ]] && device=(--device-floor "$dir/device-floor.json")
  "$BIN" report "${files[@]}" --html "$dir/report.html" --title "ringlog vs Apache Kafka" "${device[@]}" >/dev/null
  echo "$dir/report.html (${#files[@]} results)"
  rendered=$((rendered + 1))
done < <(find "$TOP" -type d | sort)
(( rendered > 0 )) || die "no perf-suite result files (<target>-<workload>.json) under $1"
