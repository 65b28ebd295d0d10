#!/bin/bash
# usage: prof.sh BINARY OUT_PREFIX — amp.sh's run (50 000 msg/s over 10 000 partitions) with a
# 20 s `perf record` of the broker during the measured minute; writes OUT_PREFIX.txt (top
# symbols, self and children) and OUT_PREFIX.json (the harness's result).
cd /work/main
B=$1; OUT=$2
D=$(mktemp -d -p target prof.XXXX)
"$B" serve --data-dir "$D" --listen 127.0.0.1:39093 > "$D/broker.log" 2>&1 &
P=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/39093) 2>/dev/null && break; sleep 0.1; done
target/release/ringlog-bench run --bootstrap 127.0.0.1:39093 --workload perf/workloads/partitions-10000.yaml \
  --out "$OUT.json" --target "$(basename "$B")" --broker-pid "$P" --duration-minutes 1 --warmup-minutes 1 > "$OUT.log" 2>&1 &
BP=$!
sleep 90
perf record -F 499 -g -p "$P" -o /tmp/prof-perf.data -- sleep 20 >/dev/null 2>&1
wait $BP
kill $P; wait $P
perf report -i /tmp/prof-perf.data --no-children --percent-limit 0.7 --stdio -g none 2>/dev/null | grep -v "^$" | head -70 > "$OUT.txt"
perf report -i /tmp/prof-perf.data --children --percent-limit 3 --stdio -g none 2>/dev/null | grep -v "^$" | head -70 >> "$OUT.txt"
grep -E "on .*: publish" "$OUT.log"
rm -rf "$D"
