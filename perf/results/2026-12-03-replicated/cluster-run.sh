#!/usr/bin/env bash
# One ringlog-bench workload against a fresh 3-node ringlog cluster (scripts/cluster.sh), for
# A/B runs of two builds and for profiles:
#
#   RINGLOG_BIN=<build> perf/results/2026-12-03-replicated/cluster-run.sh WORKLOAD OUTPREFIX [none|stat|perf]
#
# Prints the idle cluster's CPU ticks over 10 s, then runs WORKLOAD (30 s after 6 s of warm-up)
# into OUTPREFIX.json; `stat` (default) counts the brokers' system calls for 10 s mid-run with
# `perf stat`, `perf` records a 5 s DWARF call-graph profile into OUTPREFIX.perf.data.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$REPO_ROOT"
W=$1; OUT=$2
export RINGLOG_CLUSTER_DIR; RINGLOG_CLUSTER_DIR=$(mktemp -d -p "$REPO_ROOT/target" prof-cluster.XXXX)
trap 'scripts/cluster.sh down >/dev/null 2>&1' EXIT
scripts/cluster.sh up 3 1 >/dev/null
PIDS=$(cat "$RINGLOG_CLUSTER_DIR"/node-*.pid | paste -sd,)
ticks() { for p in ${PIDS//,/ }; do awk '{print $14+$15}' "/proc/$p/stat"; done | paste -sd+ | bc; }
t0=$(ticks); sleep 10; t1=$(ticks)
echo "idle cluster: $((t1 - t0)) ticks in 10 s (3 nodes)"
target/release/ringlog-bench run --bootstrap 127.0.0.1:19100 --workload "$W" --out "$OUT.json" \
  --target ringlog-3nodes --broker-pid "$PIDS" --duration-minutes 0.5 --warmup-minutes 0.1 >"$OUT.bench.log" 2>&1 &
B=$!
sleep 16
case "${3:-stat}" in
  none) ;;
  perf) perf record -F 999 --call-graph dwarf,16384 -p "$PIDS" -o "$OUT.perf.data" -- sleep 5 2>/dev/null ;;
  stat) perf stat -e 'raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto' \
          -p "$PIDS" -- sleep 10 2>&1 | tail -12 ;;
  *) echo "mode must be none, stat or perf, got '$3'" >&2; exit 2 ;;
esac
wait $B
tail -1 "$OUT.bench.log"
