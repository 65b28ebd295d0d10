#!/usr/bin/env bash
# On demand (not in CI): the Jepsen-style failover test with many leader kills.
#   scripts/soak/failover-soak.sh [FAILOVERS]   default 200 (about 5 s each)
# Three nodes and etcd on loopback, replication factor 3, min.insync.replicas=2, an idempotent
# acks=all producer; the partition leader's node is killed -9 FAILOVERS times and restarted; the
# checker then reads everything back (tests/clients/cluster/test_replication.py).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
n=${1:-200}
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "failover-soak.sh: FAILOVERS must be a positive number, got '$n'" >&2; exit 2; }
cd "$REPO_ROOT"
cargo build --release -p node --bin ringlog
RINGLOG_FAILOVERS="$n" python3 -m pytest -q -s tests/clients/cluster/test_replication.py -k again_and_again
