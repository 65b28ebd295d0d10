#!/bin/bash
# usage: amp.sh BINARY OUT.json [extra --set args]
cd /work/main
B=$1; OUT=$2; shift 2
D=$(mktemp -d -p target amp.XXXX)
"$B" serve --data-dir "$D" --listen 127.0.0.1:39093 --set metrics.listen=127.0.0.1:9644 "$@" > "$D/broker.log" 2>&1 &
P=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/39093) 2>/dev/null && break; sleep 0.1; done
target/release/ringlog-bench run --bootstrap 127.0.0.1:39093 --workload perf/workloads/partitions-10000.yaml \
  --out "$OUT" --target "$(basename "$B")" --broker-pid "$P" --duration-minutes 1 --warmup-minutes 1 > "$OUT.log" 2>&1 &
BP=$!
sleep 90
io() { awk '/^read_bytes|^write_bytes/ {printf "%s ", $2}' /proc/$P/io; }
curl -s 127.0.0.1:9644/metrics > "$OUT.m1"; a=$(io); sleep 20; b=$(io); curl -s 127.0.0.1:9644/metrics > "$OUT.m2"
python3 -c "
a='$a'.split(); b='$b'.split()
print('device read MB/s %.0f, write MB/s %.0f' % ((int(b[0])-int(a[0]))/20e6, (int(b[1])-int(a[1]))/20e6))" | tee "$OUT.io"
grep measuring "$OUT.log" | awk 'NR>=30 && NR<=50 {c+=$5; n++} END {printf "consumed over the same ~20 s: %.0f msg/s (%.0f MB/s)\n", c/n, c/n*1.05/1000}' | tee -a "$OUT.io"
wait $BP
grep -E "on .*: publish" "$OUT.log"
kill $P; wait $P
rm -rf "$D"
