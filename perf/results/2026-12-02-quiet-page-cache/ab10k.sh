#!/bin/bash
# One run of 10 000 partitions at 20 000 msg/s, producers only, broker on CPU 1, ringlog-bench on
# CPU 0, one minute of warm-up (creating 10 000 partitions' files takes a while here).
# usage: ab10k.sh RINGLOG_BINARY OUT.json   (from the repository root)
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
D=$(mktemp -d -p target ab10k.XXXX)
taskset -c 1 "$1" serve --data-dir "$D" --listen 127.0.0.1:39093 > "$D/broker.log" 2>&1 &
P=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/39093) 2>/dev/null && break; sleep 0.1; done
taskset -c 0 target/release/ringlog-bench run --bootstrap 127.0.0.1:39093 --workload "${WL:-$HERE/workload.yaml}" \
  --out "$2" --target "$(basename "$1")" --broker-pid "$P" --duration-minutes 1 --warmup-minutes "${WARM:-1}" > "$2.log" 2>&1
grep -E "on .*: publish" "$2.log"
kill "$P"; wait "$P"
rm -rf "$D"
