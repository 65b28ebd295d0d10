#!/usr/bin/env bash
# Failover time, ringlog vs Apache Kafka (3-node clusters on loopback, default settings):
# kill -9 the partition leader KILLS times under an acks=all producer, time to the first
# acknowledgement from the new leader, then check every acknowledged record is at its offset.
#
#   scripts/bench/failover-bench.sh [KILLS=5] [OUT_DIR=target/failover-bench]
#
# FAILOVER_TARGETS="ringlog" (or "kafka") runs one side only. See scripts/bench/failover_bench.py.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
setup_deps
cargo build --release -q -p node --bin ringlog
exec python3 "$SCRIPT_DIR/failover_bench.py" "${1:-5}" "${2:-target/failover-bench}"
