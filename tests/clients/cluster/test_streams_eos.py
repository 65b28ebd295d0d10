"""Kafka Streams with `processing.guarantee=exactly_once_v2` on a 3-node cluster under broker
kill -9 (issue 45): tests/clients/java's StreamsWordCount (kafka-streams 4.1.1) counts the words
of an input topic — repartitioned by word, counted in a state store with a compacted changelog,
written to an output topic — while each node is killed -9 and restarted in turn, the application
itself is killed -9 and started again, and the words keep arriving. With the record cache off every input word yields one output record, so read
committed a word's outputs must be exactly 1, 2, …, n, where n is how often the input topic
holds the word: nothing counted twice (a transaction replayed after a failure), nothing lost,
nothing read from an aborted transaction.
"""
import collections
import os
import random
import subprocess
import threading
import time

from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, OffsetSpec

from support.kafka import java_client_check
from support.waiting import wait_for
from test_replication import Cluster, create

INPUT, OUTPUT, APP = "words", "word-counts", "wordcount-eos"
WORDS = [f"w{i:02d}" for i in range(40)]


class WordFeeder:
    """Produces words at a steady rate (idempotent, acks=all) until told to stop."""

    def __init__(self, c, seed, per_second=150):
        self.c, self.rng, self.per_second = c, random.Random(seed), per_second
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        p = Producer({"bootstrap.servers": self.c.bootstrap(), "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 120000})
        while not self.stopping.is_set():
            for _ in range(self.per_second // 10):
                p.produce(INPUT, value=self.rng.choice(WORDS).encode())
                self.sent += 1
            p.poll(0)
            time.sleep(0.1)
        assert p.flush(120) == 0

    def finish(self):
        self.stopping.set()
        self.thread.join(150)


def read_all(c, topic, isolation, partitions=3, idle_s=6):
    """(key, value) of every record of `topic`, per partition in offset order."""
    consumer = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": f"check-{time.time()}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    last = time.time()
    while time.time() - last < idle_s:
        m = consumer.poll(0.5)
        if m is None or m.error():
            continue
        got.append((m.key(), m.value()))
        last = time.time()
    consumer.close()
    return got


def committed_outputs(c):
    """Records of the output topic a read_committed consumer can read: the sum of its
    partitions' last stable offsets (ListOffsets latest, read_committed); -1 while some
    partition's leader is unknown."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    wanted = {TopicPartition(OUTPUT, p): OffsetSpec.latest() for p in range(3)}
    try:
        futures = admin.list_offsets(wanted, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10)
        return sum(f.result().offset for f in futures.values())
    except KafkaException:
        return -1


def test_streams_exactly_once_v2_counts_exactly_under_kill_9(tmp_path):
    c = Cluster()
    c.extra = {"transaction.state.log.num.partitions": 5, "transaction.state.log.replication.factor": 3,
               "transaction.state.log.min.isr": 2, "offsets.topic.num.partitions": 5}
    app = None
    try:
        c.start_all()
        create(c, INPUT, partitions=3)
        create(c, OUTPUT, partitions=3)
        seed = int(os.environ.get("RINGLOG_STREAMS_SEED", time.time()))
        print(f"seed {seed} (RINGLOG_STREAMS_SEED)")
        feeder = WordFeeder(c, seed)
        log = open(tmp_path / "streams.log", "w")
        java, *rest = java_client_check()

        def start_app():
            # Its state stores (RocksDB) under the test's temporary directory.
            cmd = [java, f"-Djava.io.tmpdir={tmp_path}", *rest, "streams-wordcount", c.bootstrap(), APP,
                   INPUT, OUTPUT]
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)

        app = start_app()
        counted = lambda: committed_outputs(c)
        wait_for("the application counting", lambda: counted() >= 500, timeout=120)
        for victim in (1, 2, 3, "app", 2):
            before = counted()
            if victim == "app":
                # The application itself, mid-transaction: a new instance (new state directory,
                # restored from the changelog) takes over its tasks and transactional ids.
                app.kill()
                app.wait()
                app = start_app()
            else:
                c.nodes[victim].kill9()
                time.sleep(3)
                c.start(victim)
            wait_for(f"counting after {victim} came back", lambda: counted() >= before + 800, timeout=180)
        feeder.finish()
        words = collections.Counter(v.decode() for _, v in read_all(c, INPUT, "read_uncommitted"))
        assert sum(words.values()) == feeder.sent, f"input holds {sum(words.values())} of {feeder.sent} sent"
        deadline = time.time() + 180
        while True:
            out = read_all(c, OUTPUT, "read_committed")
            last = {k.decode(): int(v) for k, v in out}
            if last == dict(words) or time.time() > deadline:
                break
            time.sleep(2)
        app_alive = app.poll() is None
    finally:
        if app is not None:
            app.terminate()
            try:
                app.wait(30)
            except subprocess.TimeoutExpired:
                app.kill()
        c.stop()
    applog = open(log.name).read()
    assert app_alive, f"the application died:\n{applog[-4000:]}"
    per_word = collections.defaultdict(list)
    for k, v in out:
        per_word[k.decode()].append(int(v))
    for word, n in words.items():
        assert per_word[word] == list(range(1, n + 1)), (
            f"{word}: counted {per_word[word][:50]}… ({len(per_word[word])} outputs), input holds it {n} times")
    assert set(per_word) <= set(words), f"counts of words never sent: {set(per_word) - set(words)}"
    print(f"{sum(words.values())} words counted exactly once; application log tail:\n{applog[-1500:]}")
