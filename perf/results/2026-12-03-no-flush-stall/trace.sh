#!/usr/bin/env bash
# Block-layer trace of a 3-node cluster under replicated 50 000 msg/s: which process issued each
# device cache flush (FF) and each fdatasync, and where the O_DIRECT writes (WS) stop.
#
#   RINGLOG_BIN=<build> perf/results/2026-12-03-no-flush-stall/trace.sh OUTPREFIX
#
# Writes OUTPREFIX.json (the run), /dev/shm/trace.perf.data (40 s of block events, on tmpfs so
# perf's own writeback does not show) and prints every gap > 50 ms between O_DIRECT writes with
# the other block events and fdatasyncs around it (gaps.py).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$REPO_ROOT"
OUT=$1
perf/results/2026-12-03-replicated/cluster-run.sh perf/workloads/replicated-acks-all-50000.yaml "$OUT" none >"$OUT.out" 2>&1 &
sleep 14
perf record -a -e block:block_rq_issue,block:block_rq_complete,syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync \
  -o /dev/shm/trace.perf.data -- sleep 40 2>/dev/null
wait
tail -1 "$OUT.out"
perf script -i /dev/shm/trace.perf.data -F comm,pid,tid,time,event,trace 2>/dev/null \
  | python3 "$(dirname "${BASH_SOURCE[0]}")/gaps.py"
