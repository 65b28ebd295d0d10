"""Log compaction (`cleanup.policy=compact`), checked against Apache Kafka 4.1.1 on the same
input: the same records survive at the same offsets; the cleaned segments are read by Kafka's
own DumpLogSegments; unkeyed records are refused; `__consumer_offsets` is compacted and a
restart loads the latest commits from the cleaned log."""
import glob
import os
import re
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker import REPO, Broker, free_port_block
from support.kafka import ApacheKafka, kafka_tool
from support.metrics import metric

TOPIC = "compared"
KEYS = 100
RECORDS = 3000
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
}


def the_input():
    """(key, value) in order: RECORDS records over KEYS keys, every 37th a tombstone."""
    out = []
    for i in range(RECORDS):
        key = f"k{(i * 7) % KEYS}".encode()
        out.append((key, None if i % 37 == 0 else f"v{i}".encode()))
    return out


def produce_all(bootstrap, records, compression):
    # Idempotence keeps the batches in order across retries: without it a batch retried after
    # a timeout can land after later ones, and the survivors of compaction depend on order.
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.num.messages": 50,
                  "compression.type": compression, "enable.idempotence": True})
    for key, value in records:
        p.produce(TOPIC, key=key, value=value, partition=0)
        p.poll(0)
    assert p.flush(60) == 0


def read_all(bootstrap, until_offset):
    """[(offset, key, value)] of partition 0 from the start up to `until_offset` (excluded)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        out = []
        deadline = time.time() + 60
        while time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    break
                raise KafkaException(m.error())
            if m.offset() >= until_offset:
                break
            out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def survivors_expected(records):
    """What a full cleaning of `records` (offsets 0..) keeps: each key's latest record,
    tombstones included (they stay delete.retention.ms once cleaned)."""
    latest = {}
    for offset, (key, value) in enumerate(records):
        latest[key] = (offset, key, value)
    return sorted(latest.values())


def wait_cleaned(bootstrap, marker_offset, want, timeout=120):
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        got = read_all(bootstrap, marker_offset)
        if len(got) == len(want):
            return got
        time.sleep(1)
    raise AssertionError(f"{bootstrap}: not cleaned within {timeout} s: {len(got or [])} records "
                         f"below the marker, {len(want)} expected")


def produce_then_roll(bootstrap, records, compression):
    """All records, then (after segment.ms) one more that rolls the segment: everything before
    it is cleanable. Returns the marker's offset."""
    produce_all(bootstrap, records, compression)
    time.sleep(1.5)
    p = Producer({"bootstrap.servers": bootstrap})
    offsets = []
    p.produce(TOPIC, key=b"marker", value=b"m", partition=0,
              on_delivery=lambda err, m: offsets.append(m.offset()))
    assert p.flush(30) == 0
    return offsets[0]


def create_topic(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1,
                                  config=COMPACTED)])[TOPIC].result(60)


@pytest.mark.parametrize("compression", ["lz4"])
def test_the_same_records_survive_as_in_apache_kafka(compression):
    records = the_input()
    want = survivors_expected(records)
    kafka = ApacheKafka("log.cleaner.backoff.ms=200")
    ringlog = Broker(shards=1, settings={"log.cleaner.backoff.ms": "200"})
    try:
        kafka.start()
        ringlog.start()
        results = {}
        for name, bootstrap in [("kafka", kafka.bootstrap), ("ringlog", ringlog.bootstrap)]:
            create_topic(bootstrap)
            marker = produce_then_roll(bootstrap, records, compression)
            assert marker == RECORDS, f"{name}: marker at {marker}"
            results[name] = wait_cleaned(bootstrap, marker, want)
            assert results[name] == want, f"{name} keeps other records than a full cleaning would"
        assert results["ringlog"] == results["kafka"], "ringlog and Kafka keep different records"
        tombstones = [r for r in want if r[2] is None]
        assert tombstones, "the input ends some keys with a tombstone"

        # Kafka's own DumpLogSegments reads ringlog's cleaned segment.
        seg = os.path.join(ringlog.data_dir, f"{TOPIC}-0", "00000000000000000000.log")
        r = kafka_tool("kafka.tools.DumpLogSegments", "--files", seg, "--deep-iteration",
                       "--print-data-log")
        assert r.returncode == 0, r.stderr
        batches = [l for l in r.stdout.splitlines() if l.startswith("baseOffset:")]
        assert batches and all("isvalid: true" in l for l in batches), r.stdout[:3000]
        dumped = [int(m.group(1)) for m in re.finditer(r"\| offset: (\d+)", r.stdout)]
        assert dumped == [o for o, _, _ in want if o < RECORDS][:len(dumped)] and dumped, \
            f"DumpLogSegments offsets {dumped[:20]}..."
        assert "compresscodec: lz4" in r.stdout
    finally:
        ringlog.cleanup()
        kafka.stop()


def test_unkeyed_records_are_refused_by_a_compacted_topic(broker):
    create_topic(broker.bootstrap)
    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(TOPIC, value=b"no key", on_delivery=lambda err, m: errors.append(err))
    p.flush(30)
    # (In one batch with it, a keyed record would be refused too: a batch is taken whole.)
    p.produce(TOPIC, key=b"k", value=b"keyed", on_delivery=lambda err, m: errors.append(err))
    p.flush(30)
    assert errors[0] is not None and errors[0].name() == "INVALID_RECORD", errors
    assert errors[1] is None, errors
    got = read_all(broker.bootstrap, 10)
    assert [(k, v) for _, k, v in got] == [(b"k", b"keyed")]


def control_batches(data_dir, topic):
    """How many control batches (transaction markers) DumpLogSegments finds in the partition's
    sealed segments (the active one is preallocated: complete on disk only once closed), by
    producer id; None when a segment went (a cleaning swapped it) while it was read."""
    found = {}
    for seg in sorted(glob.glob(os.path.join(data_dir, f"{topic}-0", "*.log")))[:-1]:
        r = kafka_tool("kafka.tools.DumpLogSegments", "--files", seg)
        if r.returncode != 0 and not os.path.exists(seg):
            return None
        assert r.returncode == 0, r.stderr
        for line in r.stdout.splitlines():
            if line.startswith("baseOffset:") and "isControl: true" in line:
                pid = int(re.search(r"producerId: (-?\d+)", line).group(1))
                found[pid] = found.get(pid, 0) + 1
    return found


def test_transaction_markers_go_once_their_data_is_gone_and_later_transactions_still_read(make_broker):
    """Kafka's rules for markers in a compacted topic: a committed transaction's value is
    superseded and an aborted one's dropped by a first cleaning, which keeps their markers; a
    later cleaning (`delete.retention.ms` 0) removes both markers — the ABORT's `.txnindex`
    entry with it. The same producer's next transaction is then read by read_committed
    consumers (an entry left without its marker would have them skip it), before and after
    kill -9."""
    b = make_broker(shards=1, settings={"log.cleaner.backoff.ms": "200"}).start()
    topic = "txn-compacted"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  config={**COMPACTED, "delete.retention.ms": "0"})])[topic].result(60)
    txn = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "compacted"})
    txn.init_transactions(30)
    plain = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})

    def in_txn(key, value, commit):
        txn.begin_transaction()
        txn.produce(topic, key=key, value=value, partition=0)
        txn.flush(30)
        (txn.commit_transaction if commit else txn.abort_transaction)(30)

    def put(key, value):
        plain.produce(topic, key=key, value=value, partition=0)
        assert plain.flush(30) == 0

    def values(isolation):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"r-{time.time()}",
                      "isolation.level": isolation, "enable.auto.commit": False,
                      "enable.partition.eof": True})
        c.assign([TopicPartition(topic, 0, 0)])
        out, deadline = [], time.time() + 30
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    break
                continue
            out.append(m.value())
        c.close()
        return out

    in_txn(b"a", b"a-committed", commit=True)
    in_txn(b"b", b"b-aborted", commit=False)
    put(b"a", b"a-plain")

    def markers():
        while (found := control_batches(b.data_dir, topic)) is None:
            time.sleep(0.2)
        return found

    # Each roll (after segment.ms) seals the segment before it; the cleaner (backoff 200 ms)
    # cleans what is sealed. The first cleaning takes the data and keeps the markers.
    time.sleep(1.2)
    put(b"roll", b"r0")
    deadline = time.time() + 30
    while b"a-committed" in values("read_uncommitted"):
        assert time.time() < deadline, "the first cleaning did not happen"
        time.sleep(0.5)
    assert b"b-aborted" not in values("read_uncommitted")
    first = markers()
    assert len(first) == 1 and list(first.values()) == [2], f"a marker went with its data: {first}"
    # Later cleanings (the markers in the cleaned part, delete.retention.ms 0) take them.
    rolls, deadline = 1, time.time() + 90
    while markers():
        assert time.time() < deadline, f"markers still there after {rolls} rolls: {b.read_log()[-3000:]}"
        time.sleep(1.2)
        put(b"roll", b"r%d" % rolls)
        rolls += 1
        time.sleep(1)
    in_txn(b"c", b"c-committed", commit=True)
    want = [b"a-plain", b"r%d" % (rolls - 1), b"c-committed"]
    got = values("read_committed")
    assert [v for v in got if v in want] == want and b"b-aborted" not in got, got
    b.kill9()
    b.start()
    got = values("read_committed")
    assert [v for v in got if v in want] == want and b"b-aborted" not in got, got


def test_consumer_offsets_are_compacted_and_a_restart_loads_the_latest_commits():
    commits = 3000
    metrics_port = free_port_block(1)
    b = Broker(shards=1, settings={
        "log.cleaner.backoff.ms": "200",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.segment.bytes": "65536",
        "metrics.listen": f"127.0.0.1:{metrics_port}",
    }).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("tracked", num_partitions=4, replication_factor=1)])["tracked"].result(30)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "committer",
                      "enable.auto.commit": False})
        last = {}
        for i in range(commits):
            p = i % 4
            last[p] = i
            c.commit(offsets=[TopicPartition("tracked", p, i)], asynchronous=False)
        c.close()
        part = {"topic": "__consumer_offsets", "partition": "0"}
        assert metric(metrics_port, "ringlog_partition_log_end_offset", **part) >= commits
        # Segments roll at 64 KiB; the cleaner keeps each key's latest record of the sealed
        # ones. The active segment (at most 64 KiB) is never cleaned, as in Kafka.
        deadline = time.time() + 60
        while time.time() < deadline and metric(metrics_port, "ringlog_log_cleanings_total", shard="0") == 0:
            time.sleep(0.5)
        assert "log cleaned log=" in b.read_log() and "__consumer_offsets-0" in b.read_log(), b.read_log()
        before = metric(metrics_port, "ringlog_log_cleaner_bytes_before_total", shard="0")
        after = metric(metrics_port, "ringlog_log_cleaner_bytes_after_total", shard="0")
        assert before > 100_000 and after < before / 20, (before, after)
        size = metric(metrics_port, "ringlog_partition_size_bytes", **part)
        assert size < 65536 + 10_000, f"{size} bytes left of {commits} commits"

        b.stop()
        b.start()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "committer"})
        committed = c.committed([TopicPartition("tracked", p) for p in range(4)], timeout=30)
        c.close()
        assert {tp.partition: tp.offset for tp in committed} == last
    finally:
        b.cleanup()


def test_kill9_while_cleaning_keeps_every_keys_latest_acknowledged_value():
    """A producer writes keyed records over 50 keys to a compacted topic with small segments,
    the cleaner busy all along, while the broker is killed with SIGKILL at random moments and
    restarted. Then the whole log is read: no value at an acknowledged offset changed, no value
    appears twice, and every key's latest acknowledged record is there — or a later record of
    the same key that superseded it. The seed is printed; RINGLOG_CHAOS_SEED=N replays it."""
    import random
    import threading

    seed = int(os.environ.get("RINGLOG_CHAOS_SEED", str(int(time.time()))))
    print(f"compaction chaos seed {seed}")
    rng = random.Random(seed)
    b = Broker(shards=1, settings={"log.cleaner.backoff.ms": "50"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1, config={
            "cleanup.policy": "compact", "segment.bytes": "16384",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
            # Replaced segments removed at once: kills land in their removal too.
            "file.delete.delay.ms": "0"})])[TOPIC].result(30)
        acked = {}  # offset -> (key, value)
        produced = {}  # value -> key
        stop = threading.Event()

        def produce():
            p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "acks": 1,
                          "message.timeout.ms": 60000, "enable.idempotence": False,
                          "reconnect.backoff.max.ms": 200, "log_level": 0})

            def delivered(err, m):
                if err is None:
                    acked[m.offset()] = (m.key(), m.value())

            seq = 0
            while not stop.is_set():
                key = f"k{rng.randrange(50)}".encode()
                value = f"{key.decode()}:{seq}".encode()
                produced[value] = key
                try:
                    p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=delivered)
                except BufferError:
                    p.poll(0.1)
                    continue
                seq += 1
                p.poll(0)
                if seq % 200 == 0:
                    time.sleep(0.02)
            p.flush(60)

        t = threading.Thread(target=produce)
        t.start()
        kills = int(os.environ.get("RINGLOG_COMPACTION_KILLS", "5"))
        for _ in range(kills):
            time.sleep(rng.uniform(0.5, 3.0))
            b.kill9()
            b.start()
        time.sleep(2)
        stop.set()
        t.join(120)
        assert not t.is_alive(), "the producer did not finish"
        time.sleep(1)

        got = read_all(b.bootstrap, 10**12)
        assert "log cleaned" in b.read_log(), "the cleaner never ran"
        # Nothing reads the replaced segments any more: their files go.
        folder = os.path.join(b.data_dir, f"{TOPIC}-0")
        deadline = time.time() + 15
        while any(f.endswith(".deleted") for f in os.listdir(folder)):
            assert time.time() < deadline, f"replaced segments left: {sorted(os.listdir(folder))}"
            time.sleep(0.1)
        assert len(got) < len(acked), f"nothing was compacted: {len(got)} records, {len(acked)} acknowledged"
        values = [v for _, _, v in got]
        assert len(values) == len(set(values)), "a value appears twice"
        latest_read = {}
        for offset, key, value in got:
            assert produced.get(value) == key, f"offset {offset}: {key}={value} was never produced"
            if offset in acked:
                assert acked[offset] == (key, value), f"offset {offset} changed: {acked[offset]} -> {value}"
            latest_read[key] = max(latest_read.get(key, -1), offset)
        latest_acked = {}
        for offset, (key, _) in acked.items():
            latest_acked[key] = max(latest_acked.get(key, -1), offset)
        at = {offset: (key, value) for offset, key, value in got}
        for key, offset in latest_acked.items():
            if offset in at:
                continue
            assert latest_read.get(key, -1) > offset, \
                f"key {key}: its latest acknowledged record (offset {offset}) is gone (seed {seed})"
    finally:
        b.cleanup()
