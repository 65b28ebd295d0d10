#!/bin/bash
# usage: rate.sh BINARY OUT.json — like ab10k.sh, plus the broker's Fetch/Produce request counts
# and CPU seconds over 30 s of the measured minute.
set -u
cd /work/main
D=$(mktemp -d -p target ab10k.XXXX)
taskset -c 1 "$1" serve --data-dir "$D" --listen 127.0.0.1:39093 --set metrics.listen=127.0.0.1:9644 > "$D/broker.log" 2>&1 &
P=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/39093) 2>/dev/null && break; sleep 0.1; done
taskset -c 0 target/release/ringlog-bench run --bootstrap 127.0.0.1:39093 --workload "$WL" \
  --out "$2" --target "$(basename "$1")" --broker-pid "$P" --duration-minutes 1 --warmup-minutes 1 > "$2.log" 2>&1 &
B=$!
sleep 80
cpu() { awk '{print $14+$15}' /proc/$P/stat; }
req() { curl -s 127.0.0.1:9644/metrics | awk -F'[ ]' -v r="$1" '$1 ~ "ringlog_requests_total" && $1 ~ "request=\""r"\"" {s+=$2} END {print s}'; }
c1=$(cpu); f1=$(req Fetch); p1=$(req Produce); sleep 30; c2=$(cpu); f2=$(req Fetch); p2=$(req Produce)
tck=$(getconf CLK_TCK)
python3 -c "
c=($c2-$c1)/$tck; f=($f2-$f1)/30; p=($p2-$p1)/30
print(f'$(basename $1): broker CPU {c/30:.2f} s/s, Fetch {f:.0f}/s, Produce {p:.0f}/s, CPU per fetch+produce request {c/30/(f+p)*1e6:.0f} us')" | tee "$2.rates"
wait $B
grep -E "on .*: publish" "$2.log"
kill "$P"; wait "$P"
rm -rf "$D"
