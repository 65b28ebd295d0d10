#!/usr/bin/env bash
# Client quotas against a flooding tenant, ringlog vs Apache Kafka 4.1.1 (single-node brokers):
# the flooder held to its producer_byte_rate, and what it does to another tenant's publish
# latency. See scripts/bench/quota_bench.py.
#
#   scripts/bench/quota-bench.sh [OUT_DIR=target/quota-bench]
#
# Env: QUOTA_MB (2), TENANT_RATE (2000), VALUE_BYTES (1024), DURATION (40 s), WARMUP (15 s),
# ROUNDS (2), TARGETS ("ringlog kafka"). Benchmarks the ringlog binary as built.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
bench_against_kafka_setup
python3 "$SCRIPT_DIR/quota_bench.py" "${1:-target/quota-bench}"
