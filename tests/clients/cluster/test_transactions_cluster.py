"""Transactions in a 3-node cluster under faults (issue 45): a transactional producer commits
and aborts transactions of records spread over two partitions (RF 3, min.insync.replicas 2)
while the node coordinating its transactional id and the partitions' leaders are killed -9 and
restarted, paused past their lease, or cut off by the network. Judged by a read_committed
reader afterwards, Jepsen-style: every transaction whose commit was acknowledged is read whole,
exactly once, in order; no record of an aborted transaction is read (G1a); a transaction whose
outcome the producer could not tell is read whole or not at all; no record is read twice; in
both partitions the transactions appear in commit order, so their write order has no cycle.
"""
import os
import random
import signal
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING

from support.broker import REPO
from support.kafka import kafka_libs
from support.waiting import wait_for
from test_replication import SESSION_MS, Cluster, NetNodes, create

TOPIC = "txns"
TID = "jepsen-txn"
RECORDS_PER_TXN = 6


class TxnWriter:
    """Runs transactions until told to stop; remembers each one's outcome."""

    def __init__(self, c, seed):
        self.c = c
        self.rng = random.Random(seed)
        self.committed, self.aborted, self.unknown = [], [], []
        self.errors = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def producer(self):
        while not self.stopping.is_set():
            p = Producer({"bootstrap.servers": self.c.bootstrap(), "transactional.id": TID,
                          "transaction.timeout.ms": 20000, "message.timeout.ms": 15000,
                          "socket.timeout.ms": 5000})
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                self.errors.append(f"init: {e}")
                time.sleep(0.5)
        return None

    def run(self):
        p = self.producer()
        n = 0
        while p is not None and not self.stopping.is_set():
            n += 1
            values = [b"t%05d-%d" % (n, k) for k in range(RECORDS_PER_TXN)]
            commit = self.rng.random() < 0.75
            try:
                p.begin_transaction()
                for k, v in enumerate(values):
                    p.produce(TOPIC, value=v, partition=k % 2)
                if commit:
                    p.commit_transaction(30)
                    self.committed.append(values)
                else:
                    # Delivered first: librdkafka may send EndTxn(abort) before the
                    # AddPartitionsToTxn it is still retrying (its issue #4849), which any
                    # broker answers INVALID_TXN_STATE.
                    p.flush(30)
                    p.abort_transaction(30)
                    self.aborted.append(values)
            except KafkaException as e:
                err = e.args[0]
                self.errors.append(f"txn {n}: {err}")
                if commit:
                    self.unknown.append(values)
                else:
                    self.aborted.append(values)  # never asked to commit: must not be read
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(30)
                        continue
                    except KafkaException as e2:
                        self.errors.append(f"abort {n}: {e2}")
                p = self.producer()

    def finish(self):
        self.stopping.set()
        self.thread.join(120)


def read_committed(c, topic=TOPIC, partitions=2, idle_s=5, offsets=None):
    consumer = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": f"check-{time.time()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    last = time.time()
    while time.time() - last < idle_s:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            continue
        got[m.partition()].append(m.value())
        if offsets is not None:
            offsets.setdefault(m.value(), []).append((m.partition(), m.offset()))
        last = time.time()
    consumer.close()
    return got


@pytest.mark.parametrize("fault", ["kill9", "pause", "cut"])
def test_transactions_survive_kill_9_and_pauses_of_coordinators_and_leaders(fault):
    """`kill9`: each node killed -9 and restarted in turn. `pause`: each node stopped (SIGSTOP)
    past its lease, so that its partitions and coordinators move while it sleeps, then resumed
    — a zombie leader and coordinator that must not take back what the others decided. `cut`:
    the nodes in their own network namespaces, each node's link taken down past its lease (it
    runs on, cut off from its peers, etcd and the client) and brought back, in turn."""
    net = NetNodes() if fault == "cut" else None
    c = Cluster(net)
    c.extra = {"transaction.state.log.num.partitions": 5, "transaction.state.log.replication.factor": 3,
               "transaction.state.log.min.isr": 2}
    try:
        c.start_all()
        create(c, TOPIC, partitions=2)
        seed = int(os.environ.get("RINGLOG_TXN_SEED", time.time()))
        print(f"seed {seed} (RINGLOG_TXN_SEED)")
        w = TxnWriter(c, seed=seed)
        wait_for("transactions flowing", lambda: len(w.committed) >= 5, timeout=60)
        for victim in (1, 2, 3, 1):
            before = len(w.committed)
            if fault == "kill9":
                c.nodes[victim].kill9()
                time.sleep(3)
                c.start(victim)
            elif fault == "pause":
                c.nodes[victim].proc.send_signal(signal.SIGSTOP)
                time.sleep(2 * SESSION_MS / 1000 + 1)
                c.nodes[victim].proc.send_signal(signal.SIGCONT)
            else:
                c.net.cut(victim)
                time.sleep(2 * SESSION_MS / 1000 + 1)
                c.net.cut(victim, up=True)
            wait_for(f"commits after node {victim} came back",
                     lambda: len(w.committed) >= before + 3, timeout=90)
        w.finish()
        got = read_committed(c)
    finally:
        c.stop()
        if net:
            net.remove()

    seen = [v for vs in got.values() for v in vs]
    assert len(seen) == len(set(seen)), "a record read twice"
    seen = set(seen)
    for values in w.aborted:
        assert not seen & set(values), f"aborted transaction read: {values}"
    for values in w.committed:
        assert set(values) <= seen, f"committed transaction lost: {set(values) - seen}"
    for values in w.unknown:
        present = set(values) & seen
        assert not present or present == set(values), f"transaction read in part: {sorted(present)}"
    assert not [e for e in w.errors if "INVALID_TXN_STATE" in e], w.errors
    # In each partition, transactions appear in the order they were committed.
    for p, vs in got.items():
        order = [int(v[1:6]) for v in vs]
        assert order == sorted(order), f"partition {p} out of order"
    print(f"{len(w.committed)} committed, {len(w.aborted)} aborted, {len(w.unknown)} unknown; "
          f"errors: {w.errors[:10]}")


def start_copier(c, partition, libs):
    """Kafka's own TransactionalMessageCopier (kafka-tools 4.1.1) copying one input partition
    in transactions of 750, with random aborts (Kafka's transactions_test.py)."""
    cmd = (f"source {REPO}/scripts/kafka/kafka-common.sh; kafka_tool "
           f"org.apache.kafka.tools.TransactionalMessageCopier --broker-list {c.bootstrap()} "
           f"--input-topic copier-in --input-partition {partition} --output-topic copier-out "
           f"--consumer-group copier-{partition} --transactional-id copier-{partition} "
           f"--transaction-size 750 --transaction-timeout 30000 --enable-random-aborts "
           f"--use-group-metadata")
    return subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, KAFKA_LIBS=libs))


def copied_all(proc):
    """Whether the copier reported nothing left to copy (its last JSON progress line)."""
    return proc.poll() is not None and proc.returncode == 0


def test_transactional_message_copier_copies_exactly_once_under_kill_9():
    """Kafka's transactions_test.py scenario: 100 000 records in two input partitions copied by
    two TransactionalMessageCopier processes (transactions of ~750, random aborts) while every
    node is killed -9 in turn; a copier that dies is started again (it resumes from its group's
    committed offsets). The output, read committed, is the input exactly: no record lost, none
    twice, none of an aborted transaction."""
    libs = kafka_libs()
    c = Cluster()
    c.extra = {"transaction.state.log.num.partitions": 5, "transaction.state.log.replication.factor": 3,
               "transaction.state.log.min.isr": 2}
    total = 100_000
    copiers = {}
    outputs = []
    try:
        c.start_all()
        create(c, "copier-in", partitions=2)
        create(c, "copier-out", partitions=2)
        p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5})
        for i in range(total):
            p.produce("copier-in", value=b"%d" % i, partition=i % 2)
            if i % 10_000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        copiers = {part: start_copier(c, part, libs) for part in (0, 1)}
        started, kills = time.time(), []
        deadline = time.time() + 300
        victims = [1, 2, 3]
        while time.time() < deadline:
            for part, proc in list(copiers.items()):
                if proc.poll() is not None:
                    out = proc.stdout.read()
                    outputs.append(out[-2000:])
                    if proc.returncode == 0:
                        del copiers[part]
                    else:
                        copiers[part] = start_copier(c, part, libs)
            if not copiers:
                break
            if victims:
                time.sleep(1.5)
                v = victims.pop(0)
                kills.append((round(time.time() - started, 1), v))
                c.nodes[v].kill9()
                time.sleep(2)
                c.start(v)
            else:
                time.sleep(1)
        assert not copiers, "copiers did not finish within 300 s:\n" + "\n".join(outputs)
        print(f"copied in {time.time() - started:.1f} s; killed (s, node): {kills}; "
              f"copier restarts: {len(outputs) - 2}")
        print("\n".join(o[-600:] for o in outputs))
        at = {}
        got = read_committed(c, topic="copier-out", idle_s=8, offsets=at)
    finally:
        for proc in copiers.values():
            proc.kill()
        c.stop()
    values = [v for vs in got.values() for v in vs]
    twice = sorted((where, v) for v, where in at.items() if len(where) > 1)
    assert len(values) == len(set(values)), (
        f"{len(values) - len(set(values))} records copied twice; (partition, offset) of each copy, "
        f"first ones: {twice[:5]} … last: {twice[-3:]}")
    missing = set(b"%d" % i for i in range(total)) - set(values)
    assert not missing, f"{len(missing)} records lost, e.g. {sorted(missing)[:5]}"
    assert len(values) == total, f"{len(values)} records in the output, {total} in the input"
