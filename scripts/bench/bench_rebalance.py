#!/usr/bin/env python3
"""Consumer group rebalance time against one broker (driven by scripts/bench/bench-rebalance.sh).

One topic of P partitions with a record in each. Per round, a fresh group of N confluent-kafka
(librdkafka) consumers, eager `range` assignor, heartbeat every 100 ms, no commits (so a new owner
always has a record to fetch at once), measures:

- join:  all N subscribe at once -> every partition assigned exactly once and every member has
         fetched a record (join to first fetch);
- grow:  an (N+1)-th member subscribes -> the new member has fetched from its partitions and
         the N+1 assignments cover every partition exactly once;
- leave: one member closes (LeaveGroup) -> its partitions are owned and fetched by the others.

Prints one JSON object: per phase the list of per-round seconds and their median.
"""
import argparse
import json
import statistics
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


class Member:
    def __init__(self, bootstrap, group, topic, name):
        self.assignment = set()
        self.fetched = {}  # partition -> time of the first record since the last assignment
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 100,
            "partition.assignment.strategy": "range", "fetch.wait.max.ms": 10,
        })
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, _c, parts):
        with self.lock:
            self.assignment = {p.partition for p in parts}
            self.fetched = {}

    def _revoke(self, _c, _parts):
        with self.lock:
            self.assignment = set()
            self.fetched = {}

    def _run(self):
        while not self.stop.is_set():
            for m in self.consumer.consume(num_messages=500, timeout=0.02):
                if m.error() is None:
                    with self.lock:
                        self.fetched.setdefault(m.partition(), time.monotonic())

    def snapshot(self):
        with self.lock:
            return set(self.assignment), dict(self.fetched)

    def close(self):
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


def settled(members, partitions, must_fetch):
    """Whether assignments cover every partition once, every member owns some (there are more
    partitions than members) and each member in `must_fetch` has fetched from a partition it
    owns."""
    snaps = [m.snapshot() for m in members]
    owned = [a for a, _ in snaps]
    if not all(owned):
        return False
    if sum(len(a) for a in owned) != partitions or set().union(*owned) != set(range(partitions)):
        return False
    for m in must_fetch:
        a, f = m.snapshot()
        if a and not (set(f) & a):
            return False
    return True


def wait(members, partitions, must_fetch, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if settled(members, partitions, must_fetch):
            return time.monotonic()
        time.sleep(0.002)
    raise SystemExit(f"group did not settle within {timeout} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.members < 2 or args.partitions < args.members + 1 or args.rounds < 1:
        raise SystemExit(f"need members >= 2, partitions > members, rounds >= 1; got {vars(args)}")

    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, args.partitions)])[topic].result(60)
    p = Producer({"bootstrap.servers": args.bootstrap})
    for i in range(args.partitions):
        p.produce(topic, value=b"x", partition=i)
    if p.flush(60):
        raise SystemExit("could not produce the seed records")

    phases = {"join": [], "grow": [], "leave": []}
    # Round -1 is a warm-up, not recorded: the broker creates __consumer_offsets on the first
    # FindCoordinator, and both clients and brokers open their connections.
    for r in range(-1, args.rounds):
        group = f"rb-{r}-{uuid.uuid4().hex[:8]}"
        t0 = time.monotonic()
        members = [Member(args.bootstrap, group, topic, f"m{i}") for i in range(args.members)]
        joined = wait(members, args.partitions, members, 60) - t0

        t1 = time.monotonic()
        newcomer = Member(args.bootstrap, group, topic, "newcomer")
        members.append(newcomer)
        grown = wait(members, args.partitions, members, 60) - t1

        leaving = members.pop(0)
        t2 = time.monotonic()
        leaving.close()
        left = wait(members, args.partitions, members, 60) - t2
        for m in members:
            m.close()
        if r >= 0:
            for name, took in (("join", joined), ("grow", grown), ("leave", left)):
                phases[name].append(took)
    out = {k: {"seconds": v, "median": statistics.median(v)} for k, v in phases.items()}
    out.update(members=args.members, partitions=args.partitions, rounds=args.rounds)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
