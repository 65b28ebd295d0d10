"""Consumer groups judged from their members' own logs: member processes
(support/group_member.py) that a test can start, let leave and kill -9; each member's ownership
of partitions over time (from its assign callback to its revoke callback, or to its death);
a producer that remembers every acknowledged record; and a watch on the committed offsets that
records any going back.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

# A broker serving the consumer protocol, with sessions short enough for a killed member's
# partitions to move within a test.
CONSUMER_PROTOCOL = {
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
}

MEMBER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "group_member.py")


class Members:
    """Member processes of one group, each logging to its own file."""

    def __init__(self, bootstrap, group, topic, tmp):
        self.bootstrap, self.group, self.topic, self.tmp = bootstrap, group, topic, tmp
        self.procs = {}
        self.killed = {}  # name -> time of kill -9

    def start(self, name, seconds=None, instance_id=None, protocol="consumer", classic_assignor=None):
        out = os.path.join(self.tmp, f"{name}.log")
        args = [sys.executable, MEMBER, self.bootstrap, self.group, self.topic, protocol, out]
        if seconds is not None:
            args.append(str(seconds))
        env = dict(os.environ, GROUP_INSTANCE_ID=instance_id or "", CLASSIC_ASSIGNOR=classic_assignor or "")
        self.procs[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

    def kill9(self, name):
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)
        self.killed[name] = time.time()

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()

    def events(self):
        out = {}
        for name in self.procs:
            path = os.path.join(self.tmp, f"{name}.log")
            if os.path.exists(path):
                with open(path) as f:
                    out[name] = [json.loads(line) for line in f if line.endswith("\n")]
        return out

    def consumed(self):
        return {(e["partition"], e["offset"]) for evs in self.events().values() for e in evs if e["ev"] == "record"}


def ownership(events, killed, now):
    """Per partition, the (start, end, member) intervals in which a member owned it."""
    spans = {}
    for name, evs in events.items():
        held = {}
        for e in evs:
            if e["ev"] == "assign":
                for p in e["partitions"]:
                    held.setdefault(p, e["t"])
            elif e["ev"] in ("revoke", "lost"):
                for p in e["partitions"]:
                    if p in held:
                        spans.setdefault(p, []).append((held.pop(p), e["t"], name))
            elif e["ev"] == "closed":
                for p, t in held.items():
                    spans.setdefault(p, []).append((t, e["t"], name))
                held = {}
        end = killed.get(name, now)
        for p, t in held.items():
            spans.setdefault(p, []).append((t, end, name))
    return spans


def assert_never_owned_twice(spans):
    for p, ss in spans.items():
        ss.sort()
        for (s1, e1, m1), (s2, e2, m2) in zip(ss, ss[1:]):
            assert s2 >= e1, f"partition {p} owned by {m1} ({s1:.3f}-{e1:.3f}) and {m2} from {s2:.3f}"


def judge_members(members, watch, owners, closed):
    """The judgement of a run of `Members` with a `CommittedWatch` (both finished): exactly
    the members `owners` owned partitions at some time (so the hand-overs were real), those in
    `closed` left cleanly, no partition owned by two at once, committed offsets never back.
    Returns the members' events."""
    events = members.events()
    spans = ownership(events, members.killed, time.time())
    assert {m for ss in spans.values() for _, _, m in ss} == set(owners), spans
    for name in closed:
        assert any(e["ev"] == "closed" for e in events[name]), f"{name} did not leave cleanly"
    assert_never_owned_twice(spans)
    assert not watch.regressions, f"committed offsets went back: {watch.regressions}"
    return events


class Producing:
    """Produces to every partition in turn until stopped; remembers every acknowledged record."""

    def __init__(self, bootstrap, topic, partitions, rate=200):
        self.acked = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(bootstrap, topic, partitions, rate), daemon=True)
        self.thread.start()

    def run(self, bootstrap, topic, partitions, rate):
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        i = 0
        while not self.stop.is_set():
            p.produce(topic, f"v{i}".encode(), partition=i % partitions,
                      on_delivery=lambda err, m: err or self.acked.add((m.partition(), m.offset())))
            i += 1
            p.poll(0)
            time.sleep(1 / rate)
        p.flush(30)

    def finish(self):
        self.stop.set()
        self.thread.join(60)


class CommittedWatch:
    """Samples the group's committed offsets of `topic`; any partition's going back is recorded.

    It asks through a consumer of the group that never joins it (Consumer.committed): librdkafka's
    admin client (list_consumer_group_offsets) crashes the process when an OffsetFetch answer
    asks it to look the coordinator up again (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: it has
    no group handle to do it with), which a coordinator moving gives."""

    def __init__(self, bootstrap, group, topic, partitions):
        self.regressions = []
        self.last = {}
        self.stop = threading.Event()
        self.args = (bootstrap, group, [TopicPartition(topic, p) for p in range(partitions)])
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        bootstrap, group, tps = self.args
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        while not self.stop.is_set():
            try:
                got = c.committed(tps, timeout=10)
            except Exception:  # noqa: BLE001 - the coordinator restarting or moving
                time.sleep(0.5)
                continue
            for tp in got:
                if tp.offset < 0:
                    continue
                before = self.last.get(tp.partition, -1)
                if tp.offset < before:
                    self.regressions.append((tp.partition, before, tp.offset))
                self.last[tp.partition] = max(before, tp.offset)
            time.sleep(0.5)
        c.close()

    def finish(self):
        self.stop.set()
        self.thread.join(30)


def describe(bootstrap, group, timeout=30):
    """ConsumerGroupDescribe through the Admin API, asked again while the coordinator is not
    there yet (no `__consumer_offsets` yet, a coordinator loading or moving)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer is in
    deadline = time.time() + timeout
    while True:
        try:
            # (the request times out inside librdkafka first: see CommittedWatch)
            return admin.describe_consumer_groups([group], request_timeout=10)[group].result(30)
        except KafkaException as e:
            # librdkafka does not flag these as retriable in an admin result
            again = e.args[0].retriable() or e.args[0].code() in (
                KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
                KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
            if not again or time.time() > deadline:
                raise
            time.sleep(0.3)
