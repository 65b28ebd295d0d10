#!/usr/bin/env bash
# Single-node broker benchmark with a real client: 2 shards, 1 KiB records produced by kcat
# (librdkafka) and consumed back, MB/s and broker CPU-seconds per GB, next to
# the same client producing into librdkafka's in-process mock cluster (the client's own
# ceiling), measured in the same run. Not a test. (The mock cluster cannot be consumed from
# another process, so it has no consume figure.)
#
#   scripts/bench/bench-broker.sh [RECORDS]     (default 1000000)
#
# Env: BENCH_READ_CACHE_BYTES=0 measures fetches with the read cache off (every read from the device).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
setup_deps
RECORDS="${1:-1000000}"
cargo build --release -q -p node --bin ringlog
DATA="$(mktemp -d -p "$REPO_ROOT/target" bench-broker.XXXXXX)"
PORT="${BENCH_PORT:-29692}"
target/release/ringlog serve --data-dir "$DATA" --listen "127.0.0.1:$PORT" --shards 2 \
  --set "log.read.cache.bytes=${BENCH_READ_CACHE_BYTES:--1}" >"$DATA/broker.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DATA"' EXIT
wait_port "$PORT" 10 || true
python3 "$SCRIPT_DIR/bench_clients.py" --bootstrap "127.0.0.1:$PORT" --broker-pid "$PID" --records "$RECORDS"
