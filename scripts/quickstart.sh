#!/usr/bin/env bash
# The main job: build, start a single ringlog node with its embedded defaults (one shard per
# core, a fresh data dir), run a short workload with ringlog-bench (about 40 s), print the
# summary table and write the result JSON and the HTML report (perf/results/quickstart-*).
#
#   scripts/quickstart.sh [WORKLOAD.yaml]     (default perf/workloads/quickstart.yaml)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
setup_deps
WORKLOAD="${1:-perf/workloads/quickstart.yaml}"
echo "== building ringlog and ringlog-bench (release)" >&2
cargo build --release -q -p node -p bench-harness -p perf
target/release/ringlog-bench check "$WORKLOAD" >/dev/null
DATA="$(mktemp -d -p "$REPO_ROOT/target" quickstart.XXXXXX)"
PORT="$(python3 -c 'import socket
for _ in range(100):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", p + 1)); t.close(); print(p); break
    except OSError:
        t.close()')"
echo "== starting ringlog on 127.0.0.1:$PORT (data: $DATA)" >&2
target/release/ringlog serve --data-dir "$DATA" --listen "127.0.0.1:$PORT" >"$DATA/broker.log" 2>&1 &
PID=$!
# The node's data (hundreds of MB after the run) goes with it; its log is printed on failure.
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do
  port_open "$PORT" && break
  kill -0 $PID 2>/dev/null || { cat "$DATA/broker.log" >&2; exit 1; }
  sleep 0.1
done
mkdir -p perf/results
OUT="perf/results/quickstart-$(date +%Y%m%dT%H%M%S).json"
echo "== running $WORKLOAD" >&2
target/release/ringlog-bench run --bootstrap "127.0.0.1:$PORT" --workload "$WORKLOAD" --out "$OUT" --broker-pid "$PID"
kill -TERM $PID; wait $PID || true
echo "result JSON: $OUT"
target/release/ringlog-perf report "$OUT" --html "${OUT%.json}.html" --title "ringlog quickstart"
