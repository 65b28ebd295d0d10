#!/usr/bin/env bash
# Failover time, ringlog vs Apache Kafka (3-node clusters on loopback, default settings):
# kill -9 the partition leader KILLS times under an acks=all producer, time to the first
# acknowledgement from the new leader, then check every acknowledged record is at its offset.
#
#   scripts/failover-bench.sh [KILLS=5] [OUT_DIR=target/failover-bench]
#
# FAILOVER_TARGETS="ringlog" (or "kafka") runs one side only. See scripts/failover_bench.py.
set -euo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$SCRIPT_DIR/.."
# shellcheck source=install-deps.sh
source "$SCRIPT_DIR/install-deps.sh"
ringlog_install_deps
ringlog_raise_memlock
cargo build --release -q -p node --bin ringlog
exec python3 "$SCRIPT_DIR/failover_bench.py" "${1:-5}" "${2:-target/failover-bench}"
