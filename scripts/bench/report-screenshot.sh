#!/usr/bin/env bash
# Screenshots an HTML report (ringlog-perf's) with headless Chromium, to look at it as a reader
# would: scripts/bench/report-screenshot.sh REPORT.html [OUT.png] [WIDTHxHEIGHT]
# Needs Debian's `chromium` (apt-get install chromium); installs it when missing and root.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
report="${1:?usage: scripts/bench/report-screenshot.sh REPORT.html [OUT.png] [WIDTHxHEIGHT]}"
out="${2:-${report%.html}.png}"
size="${3:-1000x3000}"
[[ -f "$report" ]] || { echo "report-screenshot: no such file: $report" >&2; exit 2; }
[[ "$size" =~ ^[0-9]+x[0-9]+$ ]] || { echo "report-screenshot: size must be WIDTHxHEIGHT, got '$size'" >&2; exit 2; }
if ! command -v chromium >/dev/null 2>&1; then
  [[ "$(id -u)" == 0 ]] || die "chromium is not installed (apt-get install chromium)"
  DEBIAN_FRONTEND=noninteractive apt-get -qq update >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2
fi
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="${size/x/,}" --screenshot="$out" "file://$(realpath "$report")" 2>/dev/null >&2
echo "$out"
