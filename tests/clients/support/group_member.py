"""One consumer-group member as its own process (so a test can kill -9 it): a confluent-kafka
(librdkafka) consumer subscribed to TOPIC in GROUP with the given group.protocol. It commits
synchronously after every record and when partitions are revoked, and writes one JSON line per
event to OUT, flushed at once:

    {"t": <unix time>, "ev": "assign" | "revoke" | "lost", "partitions": [...]}
    {"t": ..., "ev": "record", "topic": t, "partition": p, "offset": o}
    {"t": ..., "ev": "error", "error": "..."}

Usage: python3 group_member.py BOOTSTRAP GROUP TOPIC PROTOCOL OUT [SECONDS]
Runs SECONDS (default: until killed), then closes (leaving the group). TOPIC starting with `^` is
a regex subscription; GROUP_INSTANCE_ID in the environment makes the member static; a classic
member uses CLASSIC_ASSIGNOR (default cooperative-sticky; `range` is eager).
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError


def main():
    bootstrap, group, topic, protocol, out = sys.argv[1:6]
    seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 1e9
    log = open(out, "a", buffering=1)

    def ev(kind, **kw):
        log.write(json.dumps({"t": time.time(), "ev": kind, **kw}) + "\n")

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "error_cb": lambda e: ev("error", error=str(e))}
    if os.environ.get("GROUP_INSTANCE_ID"):
        conf["group.instance.id"] = os.environ["GROUP_INSTANCE_ID"]
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                     "partition.assignment.strategy": os.environ.get("CLASSIC_ASSIGNOR") or "cooperative-sticky"})
    c = Consumer(conf)

    def on_assign(consumer, parts):
        ev("assign", partitions=sorted(p.partition for p in parts))

    def on_revoke(consumer, parts):
        try:
            consumer.commit(asynchronous=False)
        except Exception as e:  # noqa: BLE001 - nothing to commit is fine
            ev("error", error=f"commit on revoke: {e}")
        ev("revoke", partitions=sorted(p.partition for p in parts))

    def on_lost(consumer, parts):
        ev("lost", partitions=sorted(p.partition for p in parts))

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    end = time.time() + seconds
    parent = os.getppid()
    while time.time() < end:
        if os.getppid() != parent:
            os._exit(0)  # the test that started it died: nothing left to report to
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                ev("error", error=str(m.error()))
            continue
        ev("record", topic=m.topic(), partition=m.partition(), offset=m.offset())
        try:
            c.commit(message=m, asynchronous=False)
        except Exception as e:  # noqa: BLE001 - a fenced commit: the record comes again
            ev("error", error=f"commit: {e}")
    c.close()
    ev("closed")


if __name__ == "__main__":
    main()
