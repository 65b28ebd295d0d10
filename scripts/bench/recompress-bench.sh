#!/usr/bin/env bash
# Broker-side recompression (topic compression.type), ringlog vs Apache Kafka 4.1.1, one
# single-node broker each: payload MB/s and broker CPU-s/GB when the broker compresses every
# uncompressed batch to zstd / lz4 / gzip, against the same records stored as sent. See
# scripts/bench/recompress_bench.py.
#
#   scripts/bench/recompress-bench.sh [OUT_DIR=target/recompress-bench]
#
# Env: CASES ("producer zstd lz4 gzip"), RATE_MB (20), VALUE_BYTES (1024), DURATION (15 s),
# PARTITIONS (4), ROUNDS (2), TARGETS ("ringlog kafka"). Benchmarks the ringlog binary as built.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
bench_against_kafka_setup
python3 "$SCRIPT_DIR/recompress_bench.py" "${1:-target/recompress-bench}"
