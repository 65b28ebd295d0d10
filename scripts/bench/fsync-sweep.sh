#!/usr/bin/env bash
# The highest rate each broker sustains with publish p99 <= a bound while fsyncing every
# message (ringlog log.flush.interval.messages=1, Kafka log.flush.interval.messages=1: an
# acknowledged record survives a power loss on both).
#
#   scripts/bench/fsync-sweep.sh OUT_DIR [RATE...]        (default rates 1000 2000 5000 10000 20000 50000 100000)
#
# Runs perf/workloads/fixed-rate-10000.yaml's shape (1 KiB records, 2 partitions, one producer,
# one consumer) at each rate through scripts/bench/perf-suite.sh with SUITE_DURABILITY=fsync, then prints
# per broker each rate's achieved rate and publish p50/p99/p99.9, and the highest rate that was
# delivered (>= 98 % of the target) with p99 <= SWEEP_P99_MS (default 10). Other env as
# perf-suite.sh (SUITE_BROKER_CPUS, SUITE_HARNESS_CPUS, SUITE_DURATION_MINUTES, ...).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
(( $# >= 1 )) || usage "OUT_DIR [RATE...]"
OUT_DIR="$1"; shift
RATES=("$@")
(( ${#RATES[@]} > 0 )) || RATES=(1000 2000 5000 10000 20000 50000 100000)
for r in "${RATES[@]}"; do
  [[ "$r" =~ ^[1-9][0-9]*$ ]] || { echo "a rate must be a positive whole number, got '$r'" >&2; exit 2; }
done
mkdir -p "$OUT_DIR/workloads"
WORKLOADS=()
for r in "${RATES[@]}"; do
  w="$OUT_DIR/workloads/fsync-rate-$r.yaml"
  sed -e "s/^name: .*/name: fsync-rate-$r-1kb/" -e "s/^producerRate: .*/producerRate: $r/" \
    perf/workloads/fixed-rate-10000.yaml > "$w"
  WORKLOADS+=("$w")
done
SUITE_DURABILITY=fsync "$SCRIPT_DIR/perf-suite.sh" "$OUT_DIR" "${WORKLOADS[@]}"
python3 - "$OUT_DIR" "${SWEEP_P99_MS:-10}" <<'EOF'
import glob, json, os, sys
out, bound = sys.argv[1], float(sys.argv[2])
rows = {}
for path in glob.glob(os.path.join(out, "*-fsync-fsync-rate-*.json")):
    r = json.load(open(path))
    target = os.path.basename(path).split("-fsync-")[0]
    want = r["workloadDefinition"]["producerRate"]
    got = sum(r["publishRate"]) / max(len(r["publishRate"]), 1)
    rows.setdefault(target, []).append((want, got, r["aggregatedPublishLatency50pct"],
                                        r["aggregatedPublishLatency99pct"], r["aggregatedPublishLatency999pct"]))
lines = [f"| broker | target msg/s | achieved | p50 ms | p99 ms | p99.9 ms |", "|---|---|---|---|---|---|"]
best = {}
for target, rs in sorted(rows.items()):
    for want, got, p50, p99, p999 in sorted(rs):
        lines.append(f"| {target} | {want} | {got:.0f} | {p50:.2f} | {p99:.2f} | {p999:.2f} |")
        if got >= 0.98 * want and p99 <= bound:
            best[target] = max(best.get(target, 0), want)
lines.append("")
for target in sorted(rows):
    lines.append(f"highest rate with p99 <= {bound:g} ms, fsync per message: {target} {best.get(target, 0)} msg/s")
text = "\n".join(lines)
print(text)
open(os.path.join(out, "fsync-sweep.md"), "w").write(text + "\n")
EOF
