#!/usr/bin/env bash
# Fuzzes the broker's request decoding and handlers with cargo fuzz (libFuzzer; nightly Rust).
# Not part of scripts/test.sh (CI): run it by hand.
#
#   scripts/soak/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#
# Targets (node/fuzz/fuzz_targets): decode_request (any bytes as a request frame; Produce
# records through the log's batch validation) and handle_request (every decodable request run
# by the real handlers against a shard context with one real partition log). Leak detection is
# off for handle_request: its harness (executor, log, writer task) lives for the whole process
# by design and is reported at exit.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
SECONDS_PER_TARGET="${1:-60}"
cd "$REPO_ROOT/node"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
cargo +nightly fuzz build -O
cargo +nightly fuzz run decode_request -O -- -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096
ASAN_OPTIONS=detect_leaks=0 cargo +nightly fuzz run handle_request -O -- -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 -detect_leaks=0
