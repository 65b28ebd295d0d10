#!/usr/bin/env bash
# Append benchmark of iouring-log next to the raw device, measured in the same run.
#
#   scripts/bench/bench-log.sh [DIR]        (default: <repo>/target/bench-tmp; must not be tmpfs)
#
# 1. fio on the same filesystem (scripts/bench/bench-raw-device.sh): O_DIRECT io_uring write bandwidth
#    at 16 KiB / 256 KiB / 1 MiB and queue depth 1 and 4; fdatasync latency after 16 KiB writes.
# 2. iouring-log (iouring-log/examples/append_bench.rs): append throughput for batches of 1 KiB
#    records of about 16 KiB, 256 KiB and 1 MiB (BENCH_LOG_BYTES each, default 2 GiB), and
#    append+fsync latency of a 16 KiB batch (BENCH_FSYNC_COUNT, default 3000).
# Prints the raw lines, then a Markdown table with ratios to the raw device.
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cd "$REPO_ROOT"
setup_deps

DIR="${1:-$REPO_ROOT/target/bench-tmp}"
mkdir -p "$DIR"
TOTAL="${BENCH_LOG_BYTES:-2147483648}"
COUNT="${BENCH_FSYNC_COUNT:-3000}"
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT

cargo build --release -q -p iouring-log --example append_bench
BIN="$REPO_ROOT/target/release/examples/append_bench"

"$SCRIPT_DIR/bench-raw-device.sh" "$DIR" | tee -a "$OUT"
for bs in 16384 262144 1048576; do
  d="$(mktemp -d -p "$DIR")"
  "$BIN" throughput "$d" "$bs" "$TOTAL" | tee -a "$OUT"
  rm -rf "$d"
done
d="$(mktemp -d -p "$DIR")"
"$BIN" fsync "$d" 16384 "$COUNT" | tee -a "$OUT"
rm -rf "$d"

python3 - "$OUT" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def kv(r): return dict(x.split("=", 1) for x in r[1:] if "=" in x)
raw = {(int(kv(r)["bs"]), int(kv(r)["qd"])): float(kv(r)["MiBps"]) for r in rows if r[0] == "raw_write"}
fresh = {int(kv(r)["bs"]): float(kv(r)["MiBps"]) for r in rows if r[0] == "raw_append"}
sync = next(kv(r) for r in rows if r[0] == "raw_fdatasync")
print("\n| iouring-log append (1 KiB records) | MiB/s | CPU s/GiB | raw append, fresh file, same bs, qd 4 | ratio | raw overwrite, same bs, qd 4 | ratio |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    if r[0] != "log_append": continue
    d = kv(r); b = int(d["batch_bytes"]); m = float(d["MiBps"])
    bs = min(fresh, key=lambda k: abs(k - b))
    f, o = fresh[bs], raw[(bs, 4)]
    print(f"| batch {b} B (raw at {bs} B) | {m:.0f} | {d['cpu_s_per_GiB']} | {f:.0f} | {m/f:.2f} | {o:.0f} | {m/o:.2f} |")
for r in rows:
    if r[0] != "log_append_fsync": continue
    d = kv(r)
    print(f"\n| 16 KiB | p50 µs | p99 µs | p99.9 µs |\n|---|---|---|---|")
    print(f"| iouring-log append + flush (fdatasync) | {d['p50_us']} | {d['p99_us']} | {d['p999_us']} |")
    print(f"| raw O_DIRECT write then fdatasync: fdatasync alone | {sync['p50_us']} | {sync['p99_us']} | {sync['p999_us']} |")
PY
