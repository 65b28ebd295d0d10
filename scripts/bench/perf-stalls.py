#!/usr/bin/env python3
"""What each workload of a suite run added to ringlog's stall counters: the `<result>.stalls.txt`
files scripts/bench/perf-suite.sh keeps beside each single-node ringlog result (the shard's
Prometheus counters before and after the workload). Per result: stalls of the shard longer than
1 / 5 / 20 ms (a due task, such as a request's, could not run: a long task, a blocking call,
the thread or the vCPU preempted), the longest stall since the broker started, data writes
slower than 1 / 5 / 20 ms (the device; an acks=1 produce waits for its write), fdatasyncs
slower than that (a produce under flush.messages=1 waits for one) and segment seals (flushed
offsets after a roll wait for the seal before them). Longest figures are since the broker
started; older stalls.txt files without a counter show "—".

    scripts/bench/perf-stalls.py FOLDER      (every *.stalls.txt at or under FOLDER)
"""
import glob
import os
import re
import sys

if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
    sys.exit("usage: perf-stalls.py FOLDER   (a perf-suite output folder)")
LINE = re.compile(r'^(\w+)(?:\{([^}]*)\})?\s+(\S+)$')


def parse(lines):
    out = {}
    for line in lines:
        m = LINE.match(line.strip())
        if not m:
            continue
        name, labels, value = m.groups()
        labels = dict(re.findall(r'(\w+)="([^"]*)"', labels or ""))
        labels.pop("shard", None)
        key = (name, tuple(sorted(labels.items())))
        try:
            out[key] = out.get(key, 0.0) + float(value) if not name.endswith("longest_seconds") \
                else max(out.get(key, 0.0), float(value))
        except ValueError:
            pass
    return out


def sections(path):
    parts, current = {}, None
    for line in open(path):
        if line.startswith("# before") or line.startswith("# after"):
            current = line[2:].strip()
            parts[current] = []
        elif current:
            parts[current].append(line)
    return parse(parts.get("before", [])), parse(parts.get("after", []))


def added(before, after, name, **labels):
    key = (name, tuple(sorted(labels.items())))
    if key not in after:
        return None
    return after[key] - before.get(key, 0.0)


files = sorted(glob.glob(os.path.join(sys.argv[1], "**", "*.stalls.txt"), recursive=True))
if not files:
    sys.exit(f"perf-stalls.py: no *.stalls.txt under {sys.argv[1]}")
print("| result | stalls > 1 / 5 / 20 ms | longest stall (ms, since start) | data writes | slow writes > 1 / 5 / 20 ms | longest write (ms) | fdatasyncs | slow syncs > 1 / 5 / 20 ms | longest sync (ms) | seals | longest seal (ms) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
fmt = lambda v: "—" if v is None else f"{v:.0f}"
ms = lambda v: "—" if v is None else f"{v * 1000:.1f}"
for f in files:
    before, after = sections(f)
    slow = lambda name: [added(before, after, name, longer_than=t) for t in ("0.001", "0.005", "0.02")]
    longest = lambda name: after.get((name, ()))
    name = os.path.relpath(f, sys.argv[1]).removesuffix(".stalls.txt")
    print(f"| {name} | {' / '.join(fmt(x) for x in slow('ringlog_shard_stalls_total'))} | "
          f"{ms(longest('ringlog_shard_stall_longest_seconds'))} | "
          f"{fmt(added(before, after, 'ringlog_log_data_writes_total'))} | "
          f"{' / '.join(fmt(x) for x in slow('ringlog_log_slow_data_writes_total'))} | "
          f"{ms(longest('ringlog_log_data_write_longest_seconds'))} | "
          f"{fmt(added(before, after, 'ringlog_log_syncs_total'))} | "
          f"{' / '.join(fmt(x) for x in slow('ringlog_log_slow_syncs_total'))} | "
          f"{ms(longest('ringlog_log_sync_longest_seconds'))} | "
          f"{fmt(added(before, after, 'ringlog_log_seals_total'))} | "
          f"{ms(longest('ringlog_log_seal_longest_seconds'))} |")
