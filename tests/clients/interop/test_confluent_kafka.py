"""confluent-kafka (librdkafka) against a real ringlog node."""
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    fs[name].result(timeout=10)
    md = admin.list_topics(name, timeout=10)
    assert len(md.topics[name].partitions) == partitions


def produce_all(bootstrap, topic, codec, n, idempotent=True):
    delivered = []

    def on_delivery(err, msg):
        assert err is None, err
        delivered.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    p = Producer({
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "enable.idempotence": idempotent,
        "linger.ms": 5,
    })
    sent = []
    for i in range(n):
        key = f"key-{i % 17}".encode() if i % 3 else None
        value = f"{codec}-value-{i}".encode() * (1 + i % 5)
        headers = [("h", f"{i}".encode()), ("codec", codec.encode())]
        ts = 1_700_000_000_000 + i
        p.produce(topic, value=value, key=key, headers=headers, timestamp=ts, on_delivery=on_delivery)
        sent.append((key, value, headers, ts))
        p.poll(0)
    assert p.flush(30) == 0
    assert len(delivered) == n
    return sent, delivered


def consume_assigned(bootstrap, topic, partitions, expected):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + 30
    while len(got) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise KafkaException(m.error())
        got.append(m)
    c.close()
    assert len(got) == expected, f"consumed {len(got)} of {expected}"
    return got


def test_produce_consume_every_codec_with_keys_headers_timestamps(broker):
    topic = "cfk-codecs"
    create_topic(broker.bootstrap, topic, 4)
    all_sent = {}
    total = 0
    for codec in CODECS:
        sent, delivered = produce_all(broker.bootstrap, topic, codec, 300)
        by_value = {value: (key, value, headers, ts) for key, value, headers, ts in sent}
        for part, offset, dkey, dvalue in delivered:
            assert by_value[dvalue][0] == dkey
            all_sent[(part, offset)] = by_value[dvalue]
        total += len(sent)
    got = consume_assigned(broker.bootstrap, topic, 4, total)
    last = {}
    for m in got:
        assert m.offset() > last.get(m.partition(), -1), "offsets increase within a partition"
        last[m.partition()] = m.offset()
        key, value, headers, ts = all_sent[(m.partition(), m.offset())]
        assert m.key() == key and m.value() == value
        assert m.headers() == headers
        assert m.timestamp()[1] == ts
    # keyed records land by murmur2 like the Java client: the same key, the same partition
    by_key = {}
    for (part, _), (key, _, _, _) in all_sent.items():
        if key is not None:
            by_key.setdefault(key, set()).add(part)
    assert all(len(ps) == 1 for ps in by_key.values())


def test_restart_keeps_acknowledged_records(make_broker):
    b = make_broker(settings={"log.flush.interval.messages": 1}).start()
    topic = "cfk-restart"
    create_topic(b.bootstrap, topic, 2)
    sent, _ = produce_all(b.bootstrap, topic, "none", 500, idempotent=False)
    b.kill9()
    b.start()
    got = consume_assigned(b.bootstrap, topic, 2, len(sent))
    assert sorted(m.value() for m in got) == sorted(v for _, v, _, _ in sent)
