#!/usr/bin/env bash
# Measure the raw device under DIR with fio (O_DIRECT), as a baseline for ringlog's own
# append/fsync benchmarks.
#
#   scripts/bench/bench-raw-device.sh [DIR]      (default: <repo>/target/bench-tmp)
#
# DIR must be on the disk the log will live on (NOT a tmpfs /tmp). The fio files go into
# a fresh DIR/raw-device.XXXXXX directory that is removed afterwards. Needs fio + python3
# (scripts/install-deps.sh). Progress goes to stderr; stdout gets one machine-readable line
# per figure (key=value, times in microseconds, bandwidth in MiB/s = 2^20 bytes/s):
#
#   bench_env dir=.. fs=.. device=.. rotational=.. write_cache=.. fua=.. nproc=.. loadavg=..
#   raw_prefill bs=1048576 qd=8 MiBps=..        first write of the bandwidth file into
#                                               fallocated (unwritten) extents
#   raw_write bs=<bytes> qd=<n> MiBps=.. iops=.. clat_p50_us=.. clat_p99_us=..
#                                               sequential O_DIRECT overwrite, io_uring,
#                                               bs 16k/256k/1m x iodepth 1/4
#   raw_fdatasync bs=16384 p50_us=.. p99_us=.. p999_us=.. max_us=.. mean_us=.. n=..
#                                               fdatasync() latency after each 16 KiB O_DIRECT
#                                               write, appending into a fresh fallocated file
#                                               (the way ringlog appends into preallocated
#                                               segments: every sync commits extent conversion)
#   raw_fdatasync_overwrite bs=16384 (same keys) same, overwriting already-written blocks
#                                               (pure data + cache flush)
#   raw_write_fdatasync bs=16384 mean_us=.. write_mean_us=.. sync_mean_us=.. loop_mean_us=..
#                                               write+fdatasync per 16 KiB (means only: fio
#                                               reports write and sync latencies separately,
#                                               percentiles of the sum are not available)
#   raw_write_dsync bs=16384 p50_us=.. p99_us=.. p999_us=.. max_us=.. mean_us=.. n=..
#                                               latency of one O_DIRECT|O_DSYNC 16 KiB write
#                                               (= write + flush in one syscall), appending
#                                               into a fresh fallocated file
#
# Env: BENCH_RUNTIME (s per bandwidth run, default 4), BENCH_RAMP (s, default 1),
#      BENCH_SYNC_RUNTIME (s per latency run, default 6), BENCH_FILE_MIB (bandwidth file,
#      default 1024), BENCH_ALLOW_TMPFS=1 (skip the tmpfs refusal).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
BASE_DIR="${1:-$REPO_ROOT/target/bench-tmp}"
RUNTIME="${BENCH_RUNTIME:-4}"
RAMP="${BENCH_RAMP:-1}"
SYNC_RUNTIME="${BENCH_SYNC_RUNTIME:-6}"
FILE_MIB="${BENCH_FILE_MIB:-1024}"
START=$SECONDS

# Its own die and log: every line it prints to stderr starts "bench-raw-device:".
die() { echo "bench-raw-device: error: $*" >&2; exit 1; }
log() { echo "bench-raw-device: [+$((SECONDS - START))s] $*" >&2; }

for c in fio python3 df; do
  command -v "$c" >/dev/null 2>&1 || die "$c not found (run scripts/install-deps.sh)"
done

mkdir -p "$BASE_DIR"
WORK="$(mktemp -d "$(cd "$BASE_DIR" && pwd)/raw-device.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

read -r DEV FSTYPE MOUNT < <(df -PT "$WORK" | awk 'NR == 2 {print $1, $2, $7}')
TMP_FSTYPE="$(df -PT /tmp | awk 'NR == 2 {print $2}')"
if [[ "$FSTYPE" == tmpfs || "$FSTYPE" == ramfs ]] && [[ "${BENCH_ALLOW_TMPFS:-0}" != 1 ]]; then
  die "$WORK is on $FSTYPE, not a disk; pass a DIR on the real disk (BENCH_ALLOW_TMPFS=1 to force)"
fi
# Block device queue attributes (partition -> parent disk); "?" when unknown.
qattr() {
  local name sys
  name="$(basename "$(readlink -f "$DEV" 2>/dev/null || echo "$DEV")")"
  sys="/sys/class/block/$name"
  [[ -e "$sys/partition" ]] && sys="$(dirname "$(readlink -f "$sys")")"
  local v
  v="$(cat "$sys/queue/$1" 2>/dev/null)" || v='?'
  echo "${v// /_}"
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' ','; }
echo "bench_env dir=$WORK fs=$FSTYPE device=$DEV mount=$MOUNT tmp_fs=$TMP_FSTYPE rotational=$(qattr rotational)" \
     "write_cache=$(qattr write_cache) fua=$(qattr fua) scheduler=$(qattr scheduler) nproc=$(nproc)" \
     "loadavg=$(loadavg) fio=$(fio --version)"
[[ "$TMP_FSTYPE" == tmpfs ]] && log "note: /tmp is tmpfs; never benchmark there"

# run_fio NAME JSON_OUT FIO_ARGS... ; common options for all jobs.
run_fio() {
  local name="$1" out="$2"; shift 2
  if ! fio --name="$name" --output-format=json --output="$out" \
        --direct=1 --rw=write --numjobs=1 --invalidate=1 "$@" 2>"$out.err"; then
    cat "$out.err" >&2
    [[ -s "$out" ]] && tail -n 20 "$out" >&2
    die "fio job $name failed"
  fi
}

# parse KIND JSON [extra key=value ...]: prints one result line from fio's JSON output.
parse() {
  python3 - "$@" <<'PY'
import json, sys
kind, path, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(path) as f:
    text = f.read()
# fio may print notes before the JSON document.
job = json.loads(text[text.index("{"):])["jobs"][0]
if job.get("error"):
    sys.exit(f"fio job error {job['error']} in {path}")
w = job["write"]

def us(ns):
    return f"{ns / 1000:.1f}"

def pct(stat, p):
    return stat["percentile"][f"{p:f}"]

def lat_line(stat):
    if not stat.get("N"):
        sys.exit(f"no samples in {path}")
    return (f"p50_us={us(pct(stat, 50))} p99_us={us(pct(stat, 99))} p999_us={us(pct(stat, 99.9))} "
            f"max_us={us(stat['max'])} mean_us={us(stat['mean'])} n={stat['N']}")

if kind == "bw":
    c = w["clat_ns"]
    out = (f"MiBps={w['bw_bytes'] / 2**20:.1f} iops={w['iops']:.0f} "
           f"clat_p50_us={us(pct(c, 50))} clat_p99_us={us(pct(c, 99))}")
elif kind == "prefill":
    out = f"MiBps={w['bw_bytes'] / 2**20:.1f}"
elif kind == "sync":
    out = lat_line(job["sync"]["lat_ns"])
elif kind == "combined":
    s, c = job["sync"]["lat_ns"], w["clat_ns"]
    loop_us = job["job_runtime"] * 1000 / max(w["total_ios"], 1)  # job_runtime is in ms
    out = (f"mean_us={us(c['mean'] + s['mean'])} write_mean_us={us(c['mean'])} "
           f"sync_mean_us={us(s['mean'])} loop_mean_us={loop_us:.1f}")
elif kind == "dsync":
    out = lat_line(w["clat_ns"])
else:
    sys.exit(f"unknown kind {kind}")
print(" ".join(extra + [out]))
PY
}

# (a) sequential O_DIRECT write bandwidth, io_uring. The file is written once first, so
# the measured runs overwrite allocated blocks (no extent conversion in the figures).
BWFILE="$WORK/bw.dat"
log "prefill ${FILE_MIB} MiB ($WORK)"
run_fio prefill "$WORK/prefill.json" --filename="$BWFILE" --size="${FILE_MIB}m" \
  --ioengine=io_uring --bs=1m --iodepth=8
echo "raw_prefill $(parse prefill "$WORK/prefill.json" bs=1048576 qd=8)"

for bs in 16384 262144 1048576; do
  for qd in 1 4; do
    log "write bs=$bs qd=$qd (${RAMP}s ramp + ${RUNTIME}s)"
    run_fio "write-$bs-$qd" "$WORK/bw-$bs-$qd.json" --filename="$BWFILE" --size="${FILE_MIB}m" \
      --ioengine=io_uring --bs="$bs" --iodepth="$qd" --time_based --ramp_time="$RAMP" --runtime="$RUNTIME"
    echo "raw_write $(parse bw "$WORK/bw-$bs-$qd.json" bs="$bs" qd="$qd")"
  done
done

# (a') the same writes appending into a fresh fallocated file: what appending a log segment
# does (every write converts unwritten extents). One new file per run, never wrapped.
for bs in 16384 262144 1048576; do
  log "append bs=$bs qd=4 into a fresh fallocated file (${RUNTIME}s)"
  run_fio "append-$bs" "$WORK/append-$bs.json" --filename="$WORK/append-$bs.dat" --size=4g \
    --fallocate=native --ioengine=io_uring --bs="$bs" --iodepth=4 --runtime="$RUNTIME"
  echo "raw_append $(parse bw "$WORK/append-$bs.json" bs="$bs" qd=4)"
  rm -f "$WORK/append-$bs.dat"
done

# (b) fdatasync latency after each 16 KiB O_DIRECT write (psync: write(), fdatasync(), ...).
# Fresh 2 GiB file, fallocated by fio (unwritten extents), not time_based: it never wraps.
log "16 KiB write + fdatasync, fresh fallocated file (${SYNC_RUNTIME}s)"
run_fio fdatasync "$WORK/sync.json" --filename="$WORK/sync.dat" --size=2g --fallocate=native \
  --ioengine=sync --bs=16k --fdatasync=1 --runtime="$SYNC_RUNTIME"
echo "raw_fdatasync $(parse sync "$WORK/sync.json" bs=16384)"

log "16 KiB write + fdatasync, overwriting written blocks (${SYNC_RUNTIME}s)"
run_fio fdatasync-overwrite "$WORK/sync-ow.json" --filename="$BWFILE" --size="${FILE_MIB}m" \
  --ioengine=sync --bs=16k --fdatasync=1 --time_based --runtime="$SYNC_RUNTIME"
echo "raw_fdatasync_overwrite $(parse sync "$WORK/sync-ow.json" bs=16384)"

# (c) write + fdatasync per 16 KiB write: fio keeps separate write/sync statistics, so the
# sum is only available as a mean (from the fallocated run above); for percentiles use
# O_DSYNC writes, where one pwrite() = data write + flush (+ extent conversion commit).
echo "raw_write_fdatasync $(parse combined "$WORK/sync.json" bs=16384)"
log "16 KiB O_DIRECT|O_DSYNC writes, fresh fallocated file (${SYNC_RUNTIME}s)"
run_fio dsync "$WORK/dsync.json" --filename="$WORK/dsync.dat" --size=2g --fallocate=native \
  --ioengine=sync --bs=16k --sync=dsync --runtime="$SYNC_RUNTIME"
echo "raw_write_dsync $(parse dsync "$WORK/dsync.json" bs=16384)"

log "done in $((SECONDS - START))s (loadavg $(loadavg))"
