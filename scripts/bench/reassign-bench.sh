#!/usr/bin/env bash
# Replica reassignment under acks=all traffic, ringlog vs Apache Kafka 4.1.1 (3-node loopback
# clusters growing to 4, Kafka's kafka-reassign-partitions tool for both): DATA_MB MiB in
# PARTITIONS partitions move one replica each onto the new node while a producer writes RATE
# msg/s; move time, MiB/s and the producer's latency before and during the move.
#
#   scripts/bench/reassign-bench.sh [OUT_DIR=target/reassign-bench]
#
# Env: DATA_MB (1024), PARTITIONS (6), RATE (2000), THROTTLE (bytes/s, unset or 0: none),
# ROUNDS (1), REASSIGN_TARGETS ("ringlog kafka"), MOVE_TIMEOUT (3600), DEVICE_BW (1; 0 skips fio),
# BASELINE (10 s), KEEP_LOGS (1: keep every node's logs in OUT_DIR).
# Benchmarks the ringlog binary as built (RINGLOG_BIN, default target/release/ringlog): build it
# first (cargo build --release -p node --bin ringlog). See scripts/bench/reassign_bench.py.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
bench_against_kafka_setup
# Whatever happens to the Python side (even kill -9), no cluster stays behind.
cleanup() {
  RINGLOG_CLUSTER_DIR="$REPO_ROOT/target/reassign-ringlog" scripts/cluster.sh down >/dev/null 2>&1 || true
  KAFKA_CLUSTER_DIR="$REPO_ROOT/target/reassign-kafka" scripts/kafka/kafka-cluster.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
python3 "$SCRIPT_DIR/reassign_bench.py" "${1:-target/reassign-bench}"
