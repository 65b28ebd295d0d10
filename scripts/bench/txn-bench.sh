#!/usr/bin/env bash
# Transactional produce, ringlog vs Apache Kafka 4.1.1 (3-node loopback clusters, RF 3,
# acks=all, min.insync.replicas 2): commit latency, end-to-end latency to a read_committed
# consumer and broker CPU-s/GB, for transactions of TXN_RECORDS records at fixed RATES, and the
# same records without transactions. See scripts/bench/txn_bench.py.
#
#   scripts/bench/txn-bench.sh [OUT_DIR=target/txn-bench]
#
# Env: RATES ("20 100"), TXN_RECORDS (100), VALUE_BYTES (100), DURATION (20 s), PARTITIONS (6),
# ROUNDS (2), TXN_TARGETS ("ringlog kafka"). Benchmarks the ringlog binary as built.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
bench_against_kafka_setup
cleanup() {
  RINGLOG_CLUSTER_DIR="$REPO_ROOT/target/txn-ringlog" scripts/cluster.sh down >/dev/null 2>&1 || true
  KAFKA_CLUSTER_DIR="$REPO_ROOT/target/txn-kafka" scripts/kafka/kafka-cluster.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
python3 "$SCRIPT_DIR/txn_bench.py" "${1:-target/txn-bench}"
