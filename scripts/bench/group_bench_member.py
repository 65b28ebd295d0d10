#!/usr/bin/env python3
"""One member of group_bench.py's group: a confluent-kafka (librdkafka) consumer in its own
process, auto-committing as consumers usually do, logging JSON lines to OUT:

    {"t": ..., "ev": "subscribed"}
    {"t": ..., "ev": "assign" | "revoke" | "lost", "partitions": [...]}
    {"t": ..., "ev": "got", "partitions": [...]}      one per polled batch: partitions it read

Usage: group_bench_member.py BOOTSTRAP GROUP TOPIC PROTOCOL SESSION_MS OUT
(PROTOCOL classic: librdkafka's default eager range/roundrobin assignors, session.timeout.ms
SESSION_MS; consumer: KIP-848, the broker's session timeout.)
"""
import json
import sys
import time

from confluent_kafka import Consumer


def main():
    bootstrap, group, topic, protocol, session_ms, out = sys.argv[1:7]
    log = open(out, "a", buffering=1)

    def ev(kind, **kw):
        log.write(json.dumps({"t": time.time(), "ev": kind, **kw}) + "\n")

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "latest", "fetch.wait.max.ms": 50}
    if protocol == "classic":
        conf.update({"session.timeout.ms": int(session_ms), "heartbeat.interval.ms": 1000})
    c = Consumer(conf)
    c.subscribe([topic],
                on_assign=lambda _c, ps: ev("assign", partitions=sorted(p.partition for p in ps)),
                on_revoke=lambda _c, ps: ev("revoke", partitions=sorted(p.partition for p in ps)),
                on_lost=lambda _c, ps: ev("lost", partitions=sorted(p.partition for p in ps)))
    ev("subscribed")
    while True:
        ms = c.consume(num_messages=1000, timeout=0.05)
        got = sorted({m.partition() for m in ms if m.error() is None})
        if got:
            ev("got", partitions=got)


if __name__ == "__main__":
    main()
