"""Consumer groups against the real ringlog binary: confluent-kafka (librdkafka), kafka-python and
kcat's balanced consumer, plus the group protocol's error answers on the wire and the
`ringlog group` CLI. (The Java client and franz-go have their group checks in their own files.)

Groups use the eager `range` assignor with session.timeout.ms=6000 (the broker's minimum);
brokers run with group.initial.rebalance.delay.ms=0 unless a test needs the delay.
"""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition, ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient, NewTopic

from support import wire as w
from support.broker import BINARY, Broker
from support.waiting import wait_for

NO_DELAY = {"group.initial.rebalance.delay.ms": "0"}
SESSION_MS = 6000


def create_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)


def produce(bootstrap, topic, values, partitions=None):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i, v in enumerate(values):
        if partitions is None:
            p.produce(topic, value=v.encode(), key=v.encode())
        else:
            p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(30) == 0


def committed_total(bootstrap, group):
    a = AdminClient({"bootstrap.servers": bootstrap})
    r = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return sum(tp.offset for tp in r.topic_partitions if tp.offset >= 0)


class Member:
    """A confluent-kafka group consumer on its own thread. Commits synchronously after every
    polled batch and when partitions are revoked, so only records being processed when a member
    dies can be consumed twice."""

    def __init__(self, bootstrap, group, topic, name, extra=None):
        self.name = name
        self.records = []  # (partition, offset, value)
        self.assignment = set()
        self.assignments_seen = 0
        self.stop_flag = threading.Event()
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
        }
        conf.update(extra or {})
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, consumer, partitions):
        self.assignment = {p.partition for p in partitions}
        self.assignments_seen += 1

    def _revoked(self, consumer, partitions):
        if self.records:
            try:
                consumer.commit(asynchronous=False)
            except Exception:
                pass
        self.assignment = set()

    def _run(self):
        while not self.stop_flag.is_set():
            msgs = self.consumer.consume(num_messages=200, timeout=0.2)
            got = False
            for m in msgs:
                if m.error():
                    continue
                self.records.append((m.partition(), m.offset(), m.value().decode()))
                got = True
            if got:
                self.consumer.commit(asynchronous=False)

    def close(self):
        self.stop_flag.set()
        self.thread.join(30)
        self.consumer.close()


def group_cli(broker, *args):
    """`ringlog group --bootstrap-server BROKER ARGS...` (the completed process)."""
    return subprocess.run([BINARY, "group", "--bootstrap-server", broker.bootstrap, *args],
                          capture_output=True, text=True, timeout=30)


def balanced(members, partitions):
    owned = [m.assignment for m in members]
    union = set().union(*owned)
    return union == set(range(partitions)) and sum(len(o) for o in owned) == partitions


def values(members):
    return [v for m in members for (_, _, v) in m.records]


@pytest.fixture
def broker0(make_broker):
    return make_broker(settings=NO_DELAY).start()


def test_three_members_split_six_partitions_and_consume_exactly_once(broker0):
    topic, group = "g-three", "three"
    create_topic(broker0.bootstrap, topic, 6)
    members = [Member(broker0.bootstrap, group, topic, f"m{i}") for i in range(3)]
    try:
        wait_for("3 members with 2 partitions each",
                 lambda: balanced(members, 6) and all(len(m.assignment) == 2 for m in members), 30, interval=0.05)
        sent = [f"v-{i}" for i in range(3000)]
        producer = threading.Thread(target=lambda: [produce(broker0.bootstrap, topic, sent[i:i + 300])
                                                    for i in range(0, 3000, 300)])
        producer.start()
        producer.join(60)
        wait_for("3000 records consumed", lambda: len(values(members)) >= 3000, 60, interval=0.05)
        time.sleep(0.5)
        got = values(members)
        assert sorted(got) == sorted(sent), "every record exactly once across the group"
        for m in members:
            assert {p for (p, _, _) in m.records} <= m.assignment, (m.name, m.assignment)
    finally:
        for m in members:
            m.close()
    assert committed_total(broker0.bootstrap, group) == 3000

    # the CLI sees the same group: no lag, empty after the members left
    out = group_cli(broker0, "describe", group)
    assert out.returncode == 0, out.stderr
    assert f"Group {group} is Empty" in out.stdout, out.stdout
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith(group + " ")]
    assert len(rows) == 6 and all(r[5] == "0" for r in rows), out.stdout
    listed = group_cli(broker0, "list")
    assert any(line.split() == [group, "Empty"] for line in listed.stdout.splitlines()), listed.stdout


def test_members_join_and_leave_cleanly_while_producing(broker0):
    topic, group = "g-churn", "churn"
    create_topic(broker0.bootstrap, topic, 6)
    sent = [f"c-{i}" for i in range(4000)]
    stop = threading.Event()

    def produce_slowly():
        for i in range(0, len(sent), 100):
            produce(broker0.bootstrap, topic, sent[i:i + 100])
            time.sleep(0.05)
        stop.set()

    a, b = Member(broker0.bootstrap, group, topic, "a"), Member(broker0.bootstrap, group, topic, "b")
    members = [a, b]
    try:
        wait_for("2 members balanced", lambda: balanced(members, 6), 30, interval=0.05)
        t = threading.Thread(target=produce_slowly)
        t.start()
        wait_for("consumption under way", lambda: len(values(members)) > 500, 30, interval=0.05)
        c = Member(broker0.bootstrap, group, topic, "c")
        members.append(c)
        wait_for("a third member owns partitions",
                 lambda: balanced(members, 6) and all(m.assignment for m in members), 30, interval=0.05)
        a.close()
        live = [b, c]
        wait_for("a's partitions moved to b and c", lambda: balanced(live, 6), 30, interval=0.05)
        t.join(60)
        wait_for("every record consumed", lambda: set(values(members)) >= set(sent), 60, interval=0.05)
    finally:
        for m in members[1:]:
            m.close()
    got = values(members)
    assert set(got) == set(sent), "no record skipped"
    dups = len(got) - len(set(got))
    # Commits after every batch and on revocation: a clean leave or join re-delivers nothing
    # beyond a batch in flight when the rebalance began.
    assert dups <= 400, f"{dups} duplicates"


CHILD = r"""
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": "victim",
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
              "partition.assignment.strategy": "range"})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("ASSIGNED", ",".join(str(p.partition) for p in ps), flush=True))
while True:
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    print("REC", m.value().decode(), flush=True)
    c.commit(message=m, asynchronous=False)
"""


def victim_records(lines):
    """Values the killed member printed (its last line may be cut short by the kill)."""
    return [f[1] for f in (l.split() for l in lines if l.startswith("REC")) if len(f) == 2]


def test_killed_member_times_out_and_its_partitions_move(broker0):
    topic, group = "g-kill", "kill"
    create_topic(broker0.bootstrap, topic, 6)
    sent = [f"k-{i}" for i in range(3000)]
    child = subprocess.Popen([sys.executable, "-c", CHILD, broker0.bootstrap, group, topic],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    child_lines = []
    reader = threading.Thread(target=lambda: child_lines.extend(iter(child.stdout.readline, "")), daemon=True)
    reader.start()
    survivor = Member(broker0.bootstrap, group, topic, "survivor")

    def victim_owns():
        assigned = [l.split() for l in child_lines if l.startswith("ASSIGNED")]
        return bool(assigned) and len(assigned[-1]) == 2

    try:
        wait_for("both members own partitions",
                 lambda: victim_owns() and survivor.assignment and len(survivor.assignment) < 6, 30, interval=0.05)
        # Records go to every partition, so the victim has work of its own.
        produce(broker0.bootstrap, topic, sent[:1500], partitions=6)
        wait_for(lambda: f"the victim consuming: {child_lines[:20]}",
                 lambda: sum(l.startswith("REC") for l in child_lines) > 50, 30, interval=0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        killed_at = time.time()
        produce(broker0.bootstrap, topic, sent[1500:], partitions=6)
        wait_for("survivor owns all 6 after the session timeout",
                 lambda: survivor.assignment == set(range(6)), 30, interval=0.05)
        took = time.time() - killed_at
        wait_for("every record consumed",
                 lambda: set(values([survivor])) | set(victim_records(child_lines)) >= set(sent), 60, interval=0.05)
    finally:
        survivor.close()
        if child.poll() is None:
            child.kill()
    assert took >= SESSION_MS / 1000 - 1.5, f"partitions moved after {took:.1f} s, before the session timeout"
    victim = victim_records(child_lines)
    got = values([survivor]) + victim
    assert set(got) == set(sent), "no record skipped"
    dups = len(got) - len(set(got))
    # The victim committed each record after printing it: at most one uncommitted record per
    # partition it owned can be delivered again.
    assert dups <= 6, f"{dups} duplicates"


def test_more_members_than_partitions_leaves_two_idle(broker0):
    topic, group = "g-eight", "eight"
    create_topic(broker0.bootstrap, topic, 6)
    members = [Member(broker0.bootstrap, group, topic, f"e{i}") for i in range(8)]
    try:
        def settled():
            return (balanced(members, 6) and sum(1 for m in members if not m.assignment) == 2
                    and all(m.assignments_seen for m in members))
        wait_for("6 members with one partition, 2 idle", settled, 40, interval=0.05)
        admin = AdminClient({"bootstrap.servers": broker0.bootstrap})
        d = admin.describe_consumer_groups([group])[group].result(30)
        assert len(d.members) == 8
        owned = [len(m.assignment.topic_partitions) for m in d.members]
        assert sorted(owned) == [0, 0, 1, 1, 1, 1, 1, 1], owned
    finally:
        for m in members:
            m.close()


def test_two_groups_each_receive_every_record(broker0):
    topic = "g-two"
    create_topic(broker0.bootstrap, topic, 4)
    sent = [f"t-{i}" for i in range(1000)]
    produce(broker0.bootstrap, topic, sent)
    g1 = [Member(broker0.bootstrap, "first", topic, "f0"), Member(broker0.bootstrap, "first", topic, "f1")]
    g2 = [Member(broker0.bootstrap, "second", topic, "s0")]
    try:
        wait_for("both groups consume everything",
                 lambda: len(values(g1)) >= 1000 and len(values(g2)) >= 1000, 40, interval=0.05)
    finally:
        for m in g1 + g2:
            m.close()
    assert sorted(values(g1)) == sorted(sent)
    assert sorted(values(g2)) == sorted(sent)


def test_committed_offsets_survive_broker_kill9_and_the_group_resumes(make_broker):
    b = make_broker(settings=NO_DELAY).start()
    topic, group = "g-restart", "restart"
    create_topic(b.bootstrap, topic, 3)
    sent = [f"r-{i}" for i in range(1200)]
    produce(b.bootstrap, topic, sent[:600])
    m = Member(b.bootstrap, group, topic, "first")
    try:
        wait_for("first half consumed", lambda: len(m.records) >= 600, 30, interval=0.05)
        time.sleep(0.3)
    finally:
        m.close()
    first = values([m])
    assert sorted(first) == sorted(sent[:600])
    b.kill9()
    b2 = Broker(settings=NO_DELAY, data_dir=b.data_dir)
    b2.port = b.port
    b2.start()
    try:
        assert committed_total(b2.bootstrap, group) == 600
        produce(b2.bootstrap, topic, sent[600:])
        m2 = Member(b2.bootstrap, group, topic, "second")
        try:
            wait_for("second half consumed", lambda: len(m2.records) >= 600, 30, interval=0.05)
            time.sleep(0.5)
        finally:
            m2.close()
        assert sorted(values([m2])) == sorted(sent[600:]), "resumed exactly at the committed offsets"
    finally:
        b2.stop()


def test_kafka_python_group_consumers(broker0):
    from kafka import KafkaConsumer
    topic, group = "g-kpy", "kpy"
    create_topic(broker0.bootstrap, topic, 4)
    sent = [f"p-{i}" for i in range(800)]
    produce(broker0.bootstrap, topic, sent)
    got, lock = [], threading.Lock()

    def run(name):
        c = KafkaConsumer(topic, bootstrap_servers=broker0.bootstrap, group_id=group, client_id=name,
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                          consumer_timeout_ms=4000)
        for msg in c:
            with lock:
                got.append(msg.value.decode())
            c.commit()
        c.close()

    threads = [threading.Thread(target=run, args=(f"kp{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert set(got) == set(sent)
    assert len(got) - len(set(got)) <= 100, "only the records of a rebalance window repeat"
    assert committed_total(broker0.bootstrap, group) == 800


def test_kcat_balanced_consumers_split_the_topic(make_broker):
    # The default 3 s initial rebalance delay lets both kcat processes join the first generation.
    b = make_broker().start()
    topic, group = "g-kcat", "kcatgroup"
    create_topic(b.bootstrap, topic, 6)
    sent = [f"kc-{i}" for i in range(600)]
    produce(b.bootstrap, topic, sent, partitions=6)
    cmd = ["kcat", "-b", b.bootstrap, "-G", group, "-o", "beginning", "-e", "-q", "-f", "%p %s\\n",
           "-X", "auto.offset.reset=earliest", topic]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            pytest.fail(f"kcat -G did not finish: {err}\n{b.read_log()}")
        outs.append([line.split() for line in out.splitlines() if line.strip()])
    parts = [{int(p) for p, _ in o} for o in outs]
    assert parts[0] and parts[1] and not parts[0] & parts[1], parts
    assert sorted(v for o in outs for _, v in o) == sorted(sent)


def test_group_errors_on_the_wire(broker0):
    topic, group = "g-wire", "wire"
    create_topic(broker0.bootstrap, topic, 2)
    s = w.connect(broker0.bootstrap)
    err, node, host, port = w.find_coordinator_v0(s, group)
    assert err == 0
    coord = w.connect(f"{host}:{port}")
    other_port = broker0.port + 1 if port == broker0.port else broker0.port
    other = w.connect(f"127.0.0.1:{other_port}")

    # malformed group ids and session timeouts
    assert w.find_coordinator_v0(s, "")[0] == 24  # INVALID_GROUP_ID
    assert w.join_group_v1(coord, "")[0] == 24
    assert w.heartbeat_v1(coord, "", 1, "x") == 24
    assert w.offset_commit_v2(coord, "", -1, "", [(topic, 0, 1, "")]) == {(topic, 0): 24}
    assert w.join_group_v1(coord, group, session_timeout=100)[0] == 26  # INVALID_SESSION_TIMEOUT
    assert w.join_group_v1(coord, group, protocol_type="")[0] == 23  # INCONSISTENT_GROUP_PROTOCOL
    listed = group_cli(broker0, "list")
    assert group not in listed.stdout.split(), "a refused join leaves no group behind"  + listed.stdout
    # the wrong shard is not the coordinator
    assert w.join_group_v1(other, group)[0] == 16  # NOT_COORDINATOR
    assert w.heartbeat_v1(other, group, 1, "x") == 16

    err, gen, protocol, leader, member, members = w.join_group_v1(coord, group)
    assert (err, gen, protocol, leader) == (0, 1, "range", member) and len(members) == 1
    assert w.sync_group_v1(coord, group, gen, member, [(member, b"assignment")]) == (0, b"assignment")
    assert w.heartbeat_v1(coord, group, gen, member) == 0
    assert w.heartbeat_v1(coord, group, gen + 5, member) == 22  # ILLEGAL_GENERATION
    assert w.heartbeat_v1(coord, group, gen, "stranger") == 25  # UNKNOWN_MEMBER_ID
    assert w.sync_group_v1(coord, group, gen - 1, member)[0] == 22
    assert w.join_group_v1(coord, group, member_id="stranger")[0] == 25
    assert w.join_group_v1(coord, group, protocols=(("sticky", b""),))[0] == 23

    # commits: wrong generation, unknown member, outside the group, unknown partitions, metadata size
    assert w.offset_commit_v2(coord, group, gen + 1, member, [(topic, 0, 5, "")]) == {(topic, 0): 22}
    assert w.offset_commit_v2(coord, group, gen, "stranger", [(topic, 0, 5, "")]) == {(topic, 0): 25}
    assert w.offset_commit_v2(coord, group, -1, "", [(topic, 0, 5, "")]) == {(topic, 0): 25}
    res = w.offset_commit_v2(coord, group, gen, member,
                             [(topic, 0, 5, "meta"), (topic, 7, 5, ""), ("no-such-topic", 0, 5, ""),
                              (topic, 1, 9, "x" * 5000)])
    assert res == {(topic, 0): 0, (topic, 7): 3, ("no-such-topic", 0): 3, (topic, 1): 12}, res

    # nothing was corrupted: only the valid commit is stored, and it survives a restart
    assert w.offset_fetch_v1(coord, group, topic, [0, 1]) == {0: (5, "meta", 0), 1: (-1, "", 0)}
    for sock in (s, coord, other):
        sock.close()
    assert broker0.stop() == 0, broker0.read_log()
    broker0.start()
    coord = w.connect(f"{host}:{port}")
    assert w.offset_fetch_v1(coord, group, topic, [0, 1]) == {0: (5, "meta", 0), 1: (-1, "", 0)}
    # the restored member heartbeats on in its generation
    assert w.heartbeat_v1(coord, group, gen, member) == 0
    coord.close()


def test_reset_offsets_cli_rewinds_an_idle_group(broker0):
    topic, group = "g-reset", "reset"
    create_topic(broker0.bootstrap, topic, 2)
    sent = [f"x-{i}" for i in range(200)]
    produce(broker0.bootstrap, topic, sent)
    m = Member(broker0.bootstrap, group, topic, "r1")
    try:
        wait_for("all consumed", lambda: len(m.records) >= 200, 30, interval=0.05)
        busy = group_cli(broker0, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert busy.returncode != 0 and "no active members" in busy.stderr, busy
    finally:
        m.close()
    dry = group_cli(broker0, "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert dry.returncode == 0 and "dry run" in dry.stdout, dry
    assert committed_total(broker0.bootstrap, group) == 200
    done = group_cli(broker0, "reset-offsets", group, "--topic", topic, "--shift-by", "-30", "--execute")
    assert done.returncode == 0, done.stderr
    assert committed_total(broker0.bootstrap, group) == 140
    m2 = Member(broker0.bootstrap, group, topic, "r2")
    try:
        wait_for("re-read the rewound records", lambda: len(m2.records) >= 60, 30, interval=0.05)
        time.sleep(0.3)
    finally:
        m2.close()
    assert len(m2.records) == 60
    bad = group_cli(broker0, "reset-offsets", group, "--topic", topic, "--to-datetime", "soon")
    assert bad.returncode != 0 and "'soon'" in bad.stderr, bad
