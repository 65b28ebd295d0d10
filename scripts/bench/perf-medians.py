#!/usr/bin/env python3
"""Medians over a results folder's runs (FOLDER/run1, run2, ... as scripts/bench/perf-suite.sh writes
them): per workload and target, publish rate, publish and end-to-end p99 / p99.9 and broker
CPU-s/GB, each as the median with every run's figure; then, run by run, each target's ratio to
Apache Kafka's (or to ringlog-baseline's, for before/after runs) and its distance to the null
broker's floor; and the device floor of each run when the suite measured it.

    scripts/bench/perf-medians.py FOLDER

Targets are the result files' drivers with the suite's suffixes (-fsync, -cold, -Nnodes)
dropped, so `ringlog-3nodes` and `ringlog-fsync` are `ringlog`. Prints Markdown.
"""
import glob
import json
import os
import re
import statistics
import sys

if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
    sys.exit("usage: perf-medians.py FOLDER   (a folder holding run1/, run2/, ... of perf-suite results)")
FOLDER = sys.argv[1]
KEYS = [("msg/s", "publishRate"), ("pub p99", "aggregatedPublishLatency99pct"),
        ("pub p99.9", "aggregatedPublishLatency999pct"), ("e2e p99", "aggregatedEndToEndLatency99pct"),
        ("e2e p99.9", "aggregatedEndToEndLatency999pct"), ("CPU-s/GB", "brokerCpuSecondsPerGB")]
LATENCY = KEYS[1:5]
ORDER = ["ringlog", "ringlog-baseline", "kafka", "null"]

runs = sorted(glob.glob(os.path.join(FOLDER, "run*")), key=lambda p: int(re.sub(r"\D", "", os.path.basename(p)) or 0))
if not runs:
    sys.exit(f"perf-medians.py: no run*/ folders in {FOLDER}")


def figure(result, key):
    v = result.get(key)
    if isinstance(v, list):  # publishRate: one sample a second
        return statistics.mean(v) if v else None
    return v


data = {}  # (workload, target) -> key -> {run: value}
floors = {}
for run in runs:
    name = os.path.basename(run)
    for f in glob.glob(os.path.join(run, "*.json")):
        if f.endswith("device-floor.json"):
            floors[name] = json.load(open(f))
            continue
        r = json.load(open(f))
        target = re.sub(r"-(fsync|cold|\d+nodes)", "", r["driver"])
        for _, key in KEYS:
            data.setdefault((r["workload"], target), {}).setdefault(key, {})[name] = figure(r, key)


def rate(workload):
    m = re.search(r"(\d+)", workload)
    return (int(m.group(1)) if m else 0, workload)


def fmt(v):
    if v is None:
        return "—"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}"


def med(values):
    xs = [x for x in values if x is not None]
    return statistics.median(xs) if xs else None


names = [os.path.basename(r) for r in runs]
workloads = sorted({w for w, _ in data}, key=rate)
targets = sorted({t for _, t in data}, key=lambda t: ORDER.index(t) if t in ORDER else len(ORDER))
print(f"{len(runs)} runs ({', '.join(names)}); medians, each run's figure in brackets\n")
print("| workload | target | " + " | ".join(label for label, _ in KEYS) + " |")
print("|---|---|" + "---|" * len(KEYS))
for w in workloads:
    for t in targets:
        d = data.get((w, t))
        if not d:
            continue
        cells = []
        for _, k in KEYS:
            per_run = [d[k].get(n) for n in names]
            cells.append(f"**{fmt(med(per_run))}** ({' / '.join(fmt(x) for x in per_run)})")
        print(f"| {w} | {t} | " + " | ".join(cells) + " |")

for base in ("kafka", "ringlog-baseline"):
    rows = []
    for w in workloads:
        rl, b = data.get((w, "ringlog")), data.get((w, base))
        if not (rl and b):
            continue
        cells = []
        for _, k in KEYS:
            per_run = [rl[k].get(n) / b[k][n] if rl[k].get(n) and b[k].get(n) else None for n in names]
            cells.append(" / ".join(fmt(x) for x in per_run))
        rows.append(f"| {w} | " + " | ".join(cells) + " |")
    if rows:
        print(f"\nringlog ÷ {base}, run by run:\n")
        print("| workload | " + " | ".join(label for label, _ in KEYS) + " |")
        print("|---|" + "---|" * len(KEYS))
        print("\n".join(rows))

rows = []
for w in workloads:
    nl = data.get((w, "null"))
    if not nl:
        continue
    for t in targets:
        d = data.get((w, t))
        if t == "null" or not d:
            continue
        cells = []
        for _, k in LATENCY:
            per_run = [d[k][n] - nl[k][n] if d[k].get(n) is not None and nl[k].get(n) is not None else None
                       for n in names]
            cells.append(" / ".join(fmt(x) for x in per_run))
        rows.append(f"| {w} | {t} | " + " | ".join(cells) + " |")
if rows:
    print("\nEach target minus the null broker (ms), run by run:\n")
    print("| workload | target | " + " | ".join(label for label, _ in LATENCY) + " |")
    print("|---|---|" + "---|" * len(LATENCY))
    print("\n".join(rows))

if floors:
    print("\nDevice floor (fio, 16 KiB at 10 MB/s; ms), run by run:\n")
    print("| run | write p50 / p99 / p99.9 | write + fdatasync (O_DSYNC) p50 / p99 / p99.9 |")
    print("|---|---|---|")
    for n in names:
        fl = floors.get(n)
        if fl:
            w, s = fl["writeLatencyMs"], fl["writeSyncLatencyMs"]
            print(f"| {n} | {w['50']} / {w['99']} / {w['99.9']} | {s['50']} / {s['99']} / {s['99.9']} |")
