"""Reads `perf script -F comm,pid,tid,time,event,trace` of block events on stdin; prints each gap
of more than 50 ms between O_DIRECT write issues (WS) with the non-WS events from 300 ms before
it to its end (buffered writeback, W, left out), then the issue counts by process and kind."""
import collections
import re
import sys

ev = []
for line in sys.stdin:
    m = re.match(r'\s*(\S+)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s+(.*)', line)
    if m:
        comm, _pid, tid, t, e, rest = m.groups()
        ev.append((float(t), comm, tid, e, rest))
if not ev:
    sys.exit("no events")
ws = [x for x in ev if x[3] == 'block:block_rq_issue' and ' WS ' in x[4]]
t0 = ev[0][0]
for a, b in zip(ws, ws[1:]):
    if b[0] - a[0] > 0.05:
        print(f"gap {a[0] - t0:.3f}..{b[0] - t0:.3f} s ({(b[0] - a[0]) * 1000:.0f} ms)")
        for x in ev:
            if a[0] - 0.3 <= x[0] <= b[0] + 0.01 and ' WS ' not in x[4] and ' W ' not in x[4] \
                    and x[3] != 'block:block_rq_complete':
                print(f"   {x[0] - t0:.3f} {x[1]} {x[3]} {x[4][:80]}")
print(collections.Counter((x[1].split('-')[0], x[4].split()[1])
                          for x in ev if x[3] == 'block:block_rq_issue'))
