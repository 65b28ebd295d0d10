#!/usr/bin/env bash
# The device floor of an acknowledgement, for the perf suite's reports: fio on the data device
# under DIR, the way ringlog writes a moderate stream —
#   write:       16 KiB O_DIRECT sequential writes, io_uring, one in flight, at 10 MB/s
#                (an acks=1 produce waits for one such write);
#   write+sync:  the same with O_DSYNC (each write and its cache flush in one call: what an
#                acknowledgement waits for under flush.messages=1).
# Writes OUT.json: {"writeLatencyMs": {"50": .., "99": .., "99.9": ..},
# "writeSyncLatencyMs": {...}, "blockSize": 16384, "rateBytesPerSecond": 10000000,
# "seconds": ..}. Needs fio and python3 (scripts/install-deps.sh).
#
#   scripts/bench/device-floor.sh OUT.json [DIR]     (DIR default: <repo>/target; not a tmpfs)
#
# Env: DEVICE_FLOOR_SECONDS (per run, default 15).
set -euo pipefail
# shellcheck source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
(( $# >= 1 )) || usage "OUT.json [DIR]"
OUT="$1"
BASE="${2:-$REPO_ROOT/target}"
SECS="${DEVICE_FLOOR_SECONDS:-15}"
[[ "$SECS" =~ ^[1-9][0-9]*$ ]] || { echo "DEVICE_FLOOR_SECONDS must be a whole number of seconds, got '$SECS'" >&2; exit 2; }
mkdir -p "$BASE"
WORK="$(mktemp -d -p "$BASE" device-floor.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
# The file's blocks are written once before the measured runs overwrite them, as ringlog's
# appends land in segments preallocated and zero-filled ahead (10 MB/s x SECS fits in it; a
# longer run wraps around).
FILE_MIB=256
fio --name=layout --filename="$WORK/floor.dat" --size="${FILE_MIB}M" --rw=write --bs=1m \
  --direct=1 --ioengine=io_uring --iodepth=4 --output-format=json >/dev/null
run() { # NAME EXTRA-FIO-ARGS...
  local name="$1"; shift
  fio --name="$name" --filename="$WORK/floor.dat" --size="${FILE_MIB}M" --rw=write \
    --bs=16k --direct=1 --ioengine=io_uring --iodepth=1 --rate=10m --time_based \
    --runtime="$SECS" --percentile_list=50:99:99.9 --output-format=json "$@" >"$WORK/$name.json"
}
run write
run writesync --sync=dsync
python3 - "$WORK/write.json" "$WORK/writesync.json" "$SECS" >"$OUT" <<'EOF'
import json, sys
def pct(path):
    w = json.load(open(path))["jobs"][0]["write"]["clat_ns"]["percentile"]
    return {k: round(w[f"{float(k):.6f}"] / 1e6, 3) for k in ("50", "99", "99.9")}
print(json.dumps({
    "writeLatencyMs": pct(sys.argv[1]),
    "writeSyncLatencyMs": pct(sys.argv[2]),
    "blockSize": 16384,
    "rateBytesPerSecond": 10_000_000,
    "seconds": int(sys.argv[3]),
}, indent=2))
EOF
cat "$OUT" >&2
