import json,sys
for f in sys.argv[1:]:
    d=json.load(open(f));c=d['consumeRate'];p=d['publishRate']
    io=open(f+'.io').read().split('\n')[0] if __import__('os').path.exists(f+'.io') else ''
    print('%-40s pub %6.0f cons %6.0f backlog-end %8d e2e p50 %7.0f p99 %7.0f | pub p50 %6.0f p99 %6.0f p99.9 %6.0f | cpu %.1f rss %.0f | %s'%(f.split('/')[-1],sum(p)/len(p),sum(c)/len(c),d['backlog'][-1],d['aggregatedEndToEndLatency50pct'],d['aggregatedEndToEndLatency99pct'],d['aggregatedPublishLatency50pct'],d['aggregatedPublishLatency99pct'],d['aggregatedPublishLatency999pct'],d['brokerCpuSecondsPerGB'],d['brokerPeakRssMB'],io))
