"""Transactions in a 3-node cluster under kill -9 (issue 45): a transactional producer commits
and aborts transactions of records spread over two partitions (RF 3, min.insync.replicas 2)
while the node coordinating its transactional id and the partitions' leaders are killed -9 and
restarted. Judged by a read_committed reader afterwards, Jepsen-style: every transaction whose
commit was acknowledged is read whole, exactly once, in order; no record of an aborted
transaction is read (G1a); a transaction whose outcome the producer could not tell is read
whole or not at all; no record is read twice.
"""
import os
import random
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING

from support.waiting import wait_for
from test_replication import Cluster, create

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


def read_committed(c, partitions=2, idle_s=5):
    consumer = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": f"check-{time.time()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    last = time.time()
    while time.time() - last < idle_s:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            continue
        got[m.partition()].append(m.value())
        last = time.time()
    consumer.close()
    return got


def test_transactions_survive_kill_9_of_coordinators_and_leaders():
    c = Cluster()
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
            c.nodes[victim].kill9()
            time.sleep(3)
            c.start(victim)
            wait_for(f"commits after node {victim} came back",
                     lambda: len(w.committed) >= before + 3, timeout=90)
        w.finish()
        got = read_committed(c)
    finally:
        c.stop()

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
