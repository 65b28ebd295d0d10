#!/usr/bin/env python3
"""Medians over the runs of this folder (run1, run2, ...): per workload and target, publish and
end-to-end p99 / p99.9, broker CPU-s/GB; ringlog's ratio to Kafka and its distance to the null
broker's floor, per run and as medians. Usage: medians.py [FOLDER]"""
import glob
import json
import os
import statistics
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
KEYS = [("pub p99", "aggregatedPublishLatency99pct"), ("pub p99.9", "aggregatedPublishLatency999pct"),
        ("e2e p99", "aggregatedEndToEndLatency99pct"), ("e2e p99.9", "aggregatedEndToEndLatency999pct"),
        ("CPU-s/GB", "brokerCpuSecondsPerGB")]
runs = sorted(glob.glob(os.path.join(folder, "run*")))
data = {}  # (workload, target) -> key -> [per run]
for run in runs:
    for f in glob.glob(os.path.join(run, "*.json")):
        if f.endswith("device-floor.json"):
            continue
        r = json.load(open(f))
        k = (r["workload"], r["driver"])
        for _, key in KEYS:
            data.setdefault(k, {}).setdefault(key, []).append(r.get(key))
def rate(w):
    return int(w.split("-")[2])
workloads = sorted({w for w, _ in data}, key=rate)
fmt = lambda v: "—" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.2f}")
med = lambda xs: statistics.median([x for x in xs if x is not None]) if any(x is not None for x in xs) else None
print(f"{len(runs)} runs\n")
print("| msg/s | target | " + " | ".join(l for l, _ in KEYS) + " |")
print("|---|---|" + "---|" * len(KEYS))
for w in workloads:
    for t in ("ringlog", "kafka", "null"):
        d = data.get((w, t))
        if not d:
            continue
        cells = [f"**{fmt(med(d[k]))}** ({' / '.join(fmt(x) for x in d[k])})" for _, k in KEYS]
        print(f"| {rate(w)} | {t} | " + " | ".join(cells) + " |")
print("\nringlog ÷ Kafka (per run; target ≤ 0.33) and ringlog − null (ms, per run; target p99 ≤ 1):\n")
print("| msg/s | " + " | ".join(f"{l} ÷ Kafka" for l, _ in KEYS[:4]) + " | pub p99 − null | e2e p99 − null |")
print("|---|" + "---|" * 6)
for w in workloads:
    rl, kf, nl = data.get((w, "ringlog")), data.get((w, "kafka")), data.get((w, "null"))
    if not (rl and kf and nl):
        continue
    cells = []
    for _, k in KEYS[:4]:
        rs = [a / b for a, b in zip(rl[k], kf[k]) if a and b]
        cells.append(f"{' / '.join(f'{x:.2f}' for x in rs)}")
    for k in ("aggregatedPublishLatency99pct", "aggregatedEndToEndLatency99pct"):
        ds = [a - b for a, b in zip(rl[k], nl[k]) if a is not None and b is not None]
        cells.append(' / '.join(f"{x:.2f}" for x in ds))
    print(f"| {rate(w)} | " + " | ".join(cells) + " |")
