#!/usr/bin/env bash
# The project's single test entry point (CI runs it through .ci/run).
#
#   scripts/test.sh
#
# 1. installs/checks tools (scripts/install-deps.sh; apt-get only if something is missing)
# 2. raises RLIMIT_MEMLOCK for this shell and its children (glommio needs >= 512 KiB)
# 3. fetches the Apache Kafka jars for the interop tests (scripts/kafka/fetch-kafka.sh, cached
#    in .cache/kafka/); their directory is exported as RINGLOG_KAFKA_LIBS
# 4. cargo fmt --check, cargo clippy -D warnings, cargo test (all --release)
#
# Exits non-zero on the first failure. With CI=true, cargo output is uncoloured.
#
# Why --release for clippy too: clippy (check mode) and test (build mode) cannot share the
# compiled library crates, but build scripts and proc-macros (syn, serde_derive, ...) are
# full host builds in both and are shared when the profile is the same.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

if [[ "${CI:-}" == true ]]; then
  export CARGO_TERM_COLOR=never
fi

START=$SECONDS
section() {
  printf '\n==== [%s +%ss] %s ====\n' "$(date +%H:%M:%S)" "$((SECONDS - START))" "$*"
}
current=""
on_exit() {
  local rc=$?
  if (( rc != 0 )); then
    printf '\n==== FAILED: %s (exit %s) after %ss ====\n' "${current:-setup}" "$rc" "$((SECONDS - START))" >&2
  fi
}
trap on_exit EXIT
step() { current="$*"; section "$*"; }

step "dependencies (scripts/install-deps.sh)"
# shellcheck source=scripts/install-deps.sh
source scripts/install-deps.sh
ringlog_install_deps
cargo --version
rustc --version

step "memlock limit"
ringlog_raise_memlock 512

step "Kafka jars (scripts/kafka/fetch-kafka.sh)"
RINGLOG_KAFKA_LIBS="$(scripts/kafka/fetch-kafka.sh | tail -n1)"
export RINGLOG_KAFKA_LIBS
echo "RINGLOG_KAFKA_LIBS=$RINGLOG_KAFKA_LIBS"

step "cargo fmt --check"
cargo fmt --all -- --check

step "no import cycle between the modules of a crate (scripts/import-cycles.py)"
for src in iouring-log/src replication/src node/src kafka-client/src bench-harness/src perf/src; do
  python3 scripts/import-cycles.py "$src"
done

step "cargo clippy (release, -D warnings)"
cargo clippy --workspace --all-targets --release -- -D warnings

step "cargo test (release)"
cargo test --workspace --release

step "client compatibility tests against the real ringlog binary (pytest tests/clients)"
# The binary `cargo test` built above for node's integration tests (target/release/ringlog): a
# `cargo build -p node` here would resolve dependency features without the dev-dependencies and
# rebuild node and the crates under it (about 2 minutes of CI) for the same code.
cargo test --workspace --release --no-run
python3 -m pytest -q --durations=10 tests/clients

current=""
section "all checks passed in $((SECONDS - START))s"
