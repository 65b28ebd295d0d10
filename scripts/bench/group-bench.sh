#!/usr/bin/env bash
# Consumer group rebalances, ringlog vs Apache Kafka 4.1.1, classic vs consumer protocol
# (KIP-848): how long a 20-member group takes to absorb a new member and to recover from a
# killed one, and how long partitions stop being consumed meanwhile. See
# scripts/bench/group_bench.py.
#
#   scripts/bench/group-bench.sh [OUT_DIR=target/group-bench]
#
# Env: MEMBERS (20), PARTITIONS (40), RATE (2000), SESSION_MS (6000), STEADY (10 s), ROUNDS (2),
# TARGETS ("ringlog kafka"), PROTOCOLS ("classic consumer upgrade"; upgrade: classic members, a
# consumer-protocol member joins — online migration). Benchmarks the ringlog binary as built.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
bench_against_kafka_setup
python3 "$SCRIPT_DIR/group_bench.py" "${1:-target/group-bench}"
