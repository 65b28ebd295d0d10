import sys,ast,json
for f in sys.argv[1:]:
    cpu=0;mb=0
    for l in open(f+'.dev'):
        parts=l.split()
        mb+=float(parts[2])*0.1
        d=ast.literal_eval(l[l.index('{'):])
        cpu+=sum(v for k,v in d.items() if k.startswith('shard'))/100*0.1
    j=json.load(open(f+'.json'))
    print(f"{f}: drain {j['catchUpReadMBps']:.0f} MB/s, device {mb/1000:.2f} GB read, shard CPU {cpu:.2f} s = {cpu/(mb/1000):.3f} s/GB read, publish p99 {j['aggregatedPublishLatency99pct']}")
