#!/usr/bin/env bash
# On demand (not in CI): runs the Jepsen-style kill-the-leader test again and again, each run a
# fresh cluster (its checker's read happens once per run, so a fault there shows only across
# runs; scripts/soak/failover-soak.sh instead kills many leaders in one run).
#   scripts/soak/replication-repeat.sh [RUNS]   default 50; stops at the first failure
# A failed run's output (with the short-read diagnostics: librdkafka's log, each node's log
# tail, threads, stacks and sockets) is kept in target/replication-repeat-failed.log.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
n=${1:-50}
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "replication-repeat.sh: RUNS must be a positive number, got '$n'" >&2; exit 2; }
cd "$REPO_ROOT"
cargo build --release -p node --bin ringlog
log="$REPO_ROOT/target/replication-repeat-run.log"
for i in $(seq "$n"); do
  if python3 -m pytest -q -x tests/clients/cluster/test_replication.py -k again_and_again > "$log" 2>&1; then
    echo "run $i of $n: passed ($(tail -1 "$log"))"
  else
    mv "$log" "$REPO_ROOT/target/replication-repeat-failed.log"
    echo "run $i of $n: FAILED; output in target/replication-repeat-failed.log" >&2
    exit 1
  fi
done
