#!/bin/bash
# usage: cold.sh BINARY OUT [extra --set]: the cold catch-up (64 MiB read cache, page cache dropped
# after the backlog is written), ringlog only, 0.3 min; samples the virtual disk (/sys/block/vda/stat)
# every 100 ms into OUT.dev while it runs
cd /work/main
B=$1; OUT=$2; shift 2
D=$(mktemp -d -p target cc.XXXX)
"$B" serve --data-dir "$D" --listen 127.0.0.1:39093 --set log.read.cache.bytes=67108864 "$@" > "$D/broker.log" 2>&1 &
P=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/39093) 2>/dev/null && break; sleep 0.1; done
target/release/ringlog-bench run --bootstrap 127.0.0.1:39093 --workload perf/workloads/catch-up-read.yaml \
  --out "$OUT.json" --target cc --broker-pid "$P" --duration-minutes 0.3 --warmup-minutes 0 --drop-caches > "$OUT.log" 2>&1 &
BP=$!
# sample device stats every 100 ms while the harness runs
python3 - "$P" "$BP" > "$OUT.dev" <<'PY'
import sys,time,os
p,bp=sys.argv[1],int(sys.argv[2])
def dev():
    f=open('/sys/block/vda/stat').read().split()
    return int(f[0]),int(f[2]),int(f[8])  # reads, sectors read, inflight
def cpu():
    t={}
    for tid in os.listdir(f'/proc/{p}/task'):
        try:
            s=open(f'/proc/{p}/task/{tid}/stat').read()
            name=s[s.index('(')+1:s.rindex(')')]
            f=s[s.rindex(')')+2:].split()
            t[name]=t.get(name,0)+int(f[11])+int(f[12])
        except Exception: pass
    return t
prev=dev(); pc=cpu(); pt=time.time()
while True:
    try: os.kill(bp,0)
    except OSError: break
    time.sleep(0.1)
    d=dev(); c=cpu(); t=time.time()
    mb=(d[1]-prev[1])*512/1e6/(t-pt)
    if mb>50:
        busy={k:round((c.get(k,0)-pc.get(k,0))/(t-pt),0) for k in c if c.get(k,0)-pc.get(k,0)>0}
        print(f"{t:.1f} read {mb:.0f} MB/s reqs {(d[0]-prev[0])/(t-pt):.0f}/s inflight {d[2]} cpu% {busy}")
    prev=d; pc=c; pt=t
PY
wait $BP
grep -E "catch-up|drain" "$OUT.log" | tail -3
kill $P; wait $P
cp "$D/broker.log" "$OUT.broker" 2>/dev/null; rm -rf "$D"
