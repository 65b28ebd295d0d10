#!/usr/bin/env python3
"""Back-to-back transactions from one confluent-kafka producer against a running cluster
(scripts/cluster.sh up 3): begin, 100 records of 100 bytes over 6 partitions, commit, again at
once, for SECONDS; prints transactions/s and commit latency p50/p99 (the commit call to its
return). Shows how long the next transaction waits for the previous one to complete.

    python3 scripts/bench/txn_back_to_back.py LABEL [--reader] [--debug]

--reader runs a read_committed consumer of the topic alongside; --debug sets librdkafka's
debug=eos (to stderr: count "concurrent operation" to see AddPartitionsToTxn refused with
CONCURRENT_TRANSACTIONS). Env: BOOTSTRAP (127.0.0.1:19100), TOPIC (txn-b2b, created RF 3,
min.insync.replicas 2), SECONDS (15).
"""
import multiprocessing as mp
import os
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ.get("BOOTSTRAP", "127.0.0.1:19100")
TOPIC = os.environ.get("TOPIC", "txn-b2b")
SECONDS = float(os.environ.get("SECONDS", "15"))


def reader(stop):
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "txn-b2b-reader",
                  "isolation.level": "read_committed", "auto.offset.reset": "latest"})
    c.subscribe([TOPIC])
    while not stop.is_set():
        c.poll(0.2)
    c.close()


def main():
    label = sys.argv[1] if len(sys.argv) > 1 else "run"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    if TOPIC not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(TOPIC, 6, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        time.sleep(2)
    stop = mp.Event()
    r = mp.Process(target=reader, args=(stop,))
    if "--reader" in sys.argv:
        r.start()
        time.sleep(3)
    conf = {"bootstrap.servers": BOOTSTRAP, "transactional.id": f"txn-b2b-{label}-{time.time()}",
            "linger.ms": 5, "acks": "all"}
    if "--debug" in sys.argv:
        conf["debug"] = "eos"
    p = Producer(conf)
    p.init_transactions(30)
    commits, n, start = [], 0, time.time()
    while time.time() - start < SECONDS:
        p.begin_transaction()
        for i in range(100):
            p.produce(TOPIC, value=b"x" * 100, partition=(n * 100 + i) % 6)
        t0 = time.time()
        p.commit_transaction(30)
        commits.append((time.time() - t0) * 1000)
        n += 1
    elapsed = time.time() - start
    stop.set()
    if r.is_alive():
        r.join()
    commits.sort()
    print(f"{label}: {n / elapsed:.1f} txn/s, commit p50 {commits[len(commits) // 2]:.1f} ms, "
          f"p99 {commits[int(len(commits) * 0.99)]:.1f} ms")


if __name__ == "__main__":
    main()
