"""kafka-python (pure-Python client) against a real ringlog node.

Admin create_topics, an (idempotent, the kafka-python 3 default) producer per codec with keyed
and unkeyed records, null values, headers and explicit timestamps, then a group-less consumer
that assigns every partition and reads everything back from offset 0.
"""
import time
import warnings

import pytest
from support.batches import assert_idempotent_batches

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with importlib.resources.read_text (deprecated)
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

# Codecs kafka-python can use here: gzip is built in; the others need optional pip packages
# (lz4, python-snappy, zstandard; see scripts/install-deps.sh). A missing one is an error, not
# a silent skip, so that CI notices.
CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
HAVE = {None: True, "gzip": True, "snappy": kafka.codec.has_snappy(),
        "lz4": kafka.codec.has_lz4(), "zstd": kafka.codec.has_zstd()}

PARTITIONS = 3
PER_CODEC = 200
BASE_TS = 1_700_000_000_000


def test_codec_packages_installed():
    missing = [c for c, ok in HAVE.items() if not ok]
    assert not missing, f"kafka-python codec packages missing for {missing}: pip install lz4 python-snappy zstandard"


def create_topic(bootstrap, name, partitions):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        resp = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                   timeout_ms=10_000)
        [t] = resp["topics"]
        assert (t["name"], t["error_code"], t["num_partitions"]) == (name, 0, partitions), t
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                timeout_ms=10_000)
        [d] = admin.describe_topics([name])
        assert d["name"] == name and d["error_code"] == 0, d
        parts = sorted(d["partitions"], key=lambda p: p["partition_index"])
        assert [p["partition_index"] for p in parts] == list(range(partitions)), parts
        # every partition is led by one of the node's two shards (broker ids 0 and 1)
        assert all(p["error_code"] == 0 and p["leader_id"] in (0, 1) for p in parts), parts
    finally:
        admin.close()


def record(codec, i):
    name = codec or "none"
    key = f"key-{i % 13}".encode() if i % 3 else None  # every third record is unkeyed
    # some keyed records with a null value (kafka-python refuses a null key with a null value)
    value = None if i % 50 == 49 and key is not None else (f"{name}-value-{i}-" * (1 + i % 7)).encode()
    headers = [("h", str(i).encode()), ("codec", name.encode())]
    if i % 10 == 0:
        headers.append(("empty", b""))
    ts = BASE_TS + 1000 * i + CODECS.index(codec)
    return key, value, headers, ts


def produce(bootstrap, topic, codec):
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                      enable_idempotence=True, acks="all", request_timeout_ms=10_000)
    try:
        sent = [record(codec, i) for i in range(PER_CODEC)]
        futures = [p.send(topic, value=v, key=k, headers=h, timestamp_ms=ts) for k, v, h, ts in sent]
        p.flush(timeout=30)
        out = {}
        for (k, v, h, ts), f in zip(sent, futures):
            md = f.get(timeout=10)
            assert md.topic == topic and 0 <= md.partition < PARTITIONS
            assert md.offset >= 0
            assert md.timestamp == ts, (md.timestamp, ts)  # CreateTime: the broker echoes -1, client uses ours
            assert (md.partition, md.offset) not in out, f"offset handed out twice: {md}"
            out[(md.partition, md.offset)] = (k, v, h, ts)
        return out
    finally:
        p.close(timeout=10)


def consume_all(bootstrap, topic, expected):
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="none", request_timeout_ms=15_000, fetch_max_wait_ms=200)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        # ListOffsets: earliest is 0, latest is the number of records acknowledged per partition.
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}
        per_part = {tp: sum(1 for (p, _) in expected if p == tp.partition) for tp in tps}
        assert c.end_offsets(tps) == per_part
        for tp in tps:
            c.seek(tp, 0)
        got = []
        deadline = time.time() + 30
        while len(got) < len(expected) and time.time() < deadline:
            for _tp, msgs in c.poll(timeout_ms=500).items():
                got.extend(msgs)
        assert len(got) == len(expected), f"consumed {len(got)} of {len(expected)}"
        # nothing more arrives
        assert not c.poll(timeout_ms=500)
        return got
    finally:
        c.close(autocommit=False)


def test_produce_consume_every_codec_with_keys_headers_timestamps(broker):
    topic = "kpy-codecs"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    expected = {}
    for codec in CODECS:
        if not HAVE[codec]:
            continue
        expected.update(produce(broker.bootstrap, topic, codec))
    assert len(expected) == PER_CODEC * sum(HAVE.values())

    got = consume_all(broker.bootstrap, topic, expected)
    next_offset = {}
    for m in got:
        assert m.topic == topic
        # per partition: in order, no gaps (no transactions, no compaction), starting at 0
        assert m.offset == next_offset.get(m.partition, 0), (m.partition, m.offset)
        next_offset[m.partition] = m.offset + 1
        key, value, headers, ts = expected[(m.partition, m.offset)]
        assert m.key == key, (m.partition, m.offset)
        assert m.value == value, (m.partition, m.offset)
        assert list(m.headers) == headers, (m.partition, m.offset)
        assert m.timestamp == ts and m.timestamp_type == 0, (m.partition, m.offset, m.timestamp, m.timestamp_type)
    # produce order is kept within a partition: per codec, the sequence numbers increase
    for part in range(PARTITIONS):
        seq = [(expected[(part, o)][2][1][1], int(expected[(part, o)][2][0][1]))
               for o in range(next_offset.get(part, 0))]
        for codec in {c for c, _ in seq}:
            nums = [n for c, n in seq if c == codec]
            assert nums == sorted(nums), f"partition {part} codec {codec} out of order"
    # keyed records: one key, one partition; data spread over all partitions
    by_key = {}
    for (part, _), (key, _, _, _) in expected.items():
        if key is not None:
            by_key.setdefault(key, set()).add(part)
    assert all(len(ps) == 1 for ps in by_key.values()), by_key
    assert set(next_offset) == set(range(PARTITIONS))

    # what the broker stored: every codec really used (kafka-python compressed as asked), v2
    # batches from the idempotent producer, as many records as acknowledged
    assert broker.stop() == 0, broker.read_log()
    assert_idempotent_batches(broker.data_dir, topic, {c or "none" for c in CODECS if HAVE[c]}, len(expected))
