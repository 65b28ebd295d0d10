#!/usr/bin/env python3
"""Where a broker's I/O waits: records the kernel's io_uring and block-layer tracepoints on all
CPUs for SECONDS (perf), then prints
  - each io_uring operation's latency in the kernel, submission to completion, by opcode
    (FSYNC is what a produce under flush.messages=1 waits for; WRITE_FIXED an O_DIRECT append);
  - each block request's latency on the device, by kind (WS: a synchronous write, WSM: its
    metadata, FF: a cache flush);
  - of the FSYNC operations slower than 1 ms, how many overlapped a large write (>= 512 KiB) on
    the device, against a sample of the fast ones: the device serves requests in order, so an
    fdatasync issued behind a large write waits for it.
Run it while a workload runs (e.g. scripts/bench/perf-suite.sh with SUITE_DURABILITY=fsync):

    scripts/bench/io-trace.py SECONDS [OUT.txt]     (root; OUT.txt keeps `perf script`'s text)
    scripts/bench/io-trace.py --text OUT.txt        (the same figures from a kept text)
"""
import os
import random
import re
import subprocess
import sys
import tempfile

EVENTS = ["io_uring:io_uring_submit_req", "io_uring:io_uring_complete",
          "block:block_rq_issue", "block:block_rq_complete"]
LARGE_SECTORS = 1024  # 512 KiB


def record(seconds, keep):
    work = tempfile.mkdtemp(prefix="io-trace.")
    data = os.path.join(work, "perf.data")
    try:
        subprocess.run(["perf", "record", "-a", "-q", "-o", data]
                       + sum((["-e", e] for e in EVENTS), []) + ["--", "sleep", seconds],
                       check=True)
        text = subprocess.run(["perf", "script", "-i", data], check=True, capture_output=True,
                              text=True).stdout
    finally:
        if os.path.exists(data):
            os.remove(data)
        os.rmdir(work)
    if keep:
        with open(keep, "w") as f:
            f.write(text)
    return text


if len(sys.argv) == 3 and sys.argv[1] == "--text":
    text, what = open(sys.argv[2]).read(), f"from {sys.argv[2]}"
elif len(sys.argv) in (2, 3) and sys.argv[1].isdigit() and int(sys.argv[1]) >= 1:
    text, what = record(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None), f"{sys.argv[1]} s"
else:
    sys.exit("usage: io-trace.py SECONDS [OUT.txt] | io-trace.py --text OUT.txt   (SECONDS a whole number >= 1)")

STAMP = re.compile(r"\s(\d+\.\d+):\s+(\S+):")
submitted, uring = {}, {}
issued, device = {}, {}
large = []
flushes_issued = []
for line in text.splitlines():
    m = STAMP.search(line)
    if not m:
        continue
    t, event = float(m.group(1)), m.group(2)
    if event == "io_uring:io_uring_submit_req":
        req = re.search(r"req (0x\w+)", line).group(1)
        submitted[req] = (t, re.search(r"opcode (\w+)", line).group(1))
    elif event == "io_uring:io_uring_complete":
        req = re.search(r"req (0x\w+)", line).group(1)
        if req in submitted:
            t0, op = submitted.pop(req)
            uring.setdefault(op, []).append((t0, t))
    elif event == "block:block_rq_issue":
        if re.search(r" FF 0 \(\)", line):
            flushes_issued.append(t)
            continue
        m2 = re.search(r" (\w+) \d+ \(\) (\d+) \+ (\d+)", line)
        if m2:
            issued[(m2.group(1), m2.group(2))] = (t, int(m2.group(3)))
    elif event == "block:block_rq_complete":
        if re.search(r" FF \(\)", line):
            if flushes_issued:  # flushes complete in order here
                device.setdefault("FF", []).append((flushes_issued.pop(0), t))
            continue
        m2 = re.search(r" (\w+) \(\) (\d+) \+ (\d+)", line)
        if m2 and (m2.group(1), m2.group(2)) in issued:
            t0, sectors = issued.pop((m2.group(1), m2.group(2)))
            device.setdefault(m2.group(1), []).append((t0, t))
            if m2.group(1).startswith("W") and sectors >= LARGE_SECTORS:
                large.append((t0, t))


def row(name, spans):
    ms = sorted((b - a) * 1e3 for a, b in spans)
    n = len(ms)
    q = lambda p: ms[min(n - 1, int(n * p))]
    slow = sum(x > 1 for x in ms)
    return (f"| {name} | {n} | {q(.5):.3f} | {q(.99):.3f} | {q(.999):.3f} | {ms[-1]:.3f} | "
            f"{slow} ({100 * slow / n:.1f} %) |")


print(f"Traced {what} on all CPUs.\n")
print("| io_uring operation (kernel, submit to complete) | n | p50 ms | p99 ms | p99.9 ms | max ms | > 1 ms |")
print("|---|---|---|---|---|---|---|")
for op, spans in sorted(uring.items(), key=lambda kv: -len(kv[1])):
    print(row(op, spans))
print("\n| block request (device, issue to complete) | n | p50 ms | p99 ms | p99.9 ms | max ms | > 1 ms |")
print("|---|---|---|---|---|---|---|")
for kind, spans in sorted(device.items(), key=lambda kv: -len(kv[1])):
    print(row(kind, spans))
if large:
    print()
    print(row(f"writes >= {LARGE_SECTORS // 2} KiB", large).replace("| ", "| large: ", 1))
fsyncs = uring.get("FSYNC", [])
if fsyncs:
    overlaps = lambda a, b: any(s < b and e > a for s, e in large)
    slow = [s for s in fsyncs if s[1] - s[0] > 0.001]
    fast = [s for s in fsyncs if s[1] - s[0] <= 0.001]
    sample = random.Random(1).sample(fast, min(2000, len(fast)))
    print(f"\nFSYNCs slower than 1 ms: {len(slow)}, of which {sum(overlaps(*s) for s in slow)} "
          f"overlapped a write >= {LARGE_SECTORS // 2} KiB on the device; of {len(sample)} faster "
          f"ones (a sample): {sum(overlaps(*s) for s in sample)}.")
