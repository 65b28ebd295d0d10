"""Metadata as Kafka's clients send it: all-topics requests from librdkafka (whose v9+ request
carries bytes after the body, librdkafka issue #5049), regex subscriptions built on them,
Metadata v0, and trailing bytes after other requests, which Kafka ignores for every API."""
import struct
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from support import wire as w


def create_topics(bootstrap, names, partitions=2):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names])
    for n in names:
        fs[n].result(timeout=10)


def test_admin_list_topics_lists_every_topic(broker):
    names = ["listed-a", "listed-b", "listed-c"]
    create_topics(broker.bootstrap, names)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    for n in names:
        assert n in md.topics, f"{n} missing from {sorted(md.topics)}"
        assert len(md.topics[n].partitions) == 2
    assert "closing connection" not in broker.read_log()


def test_regex_subscription_receives_records(broker):
    create_topics(broker.bootstrap, ["orders-eu", "orders-us", "payments"])
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
    expected = set()
    for topic in ["orders-eu", "orders-us", "payments"]:
        for i in range(20):
            v = f"{topic}-{i}".encode()
            p.produce(topic, value=v)
            if topic.startswith("orders-"):
                expected.add(v)
    assert p.flush(30) == 0
    c = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "regex-group",
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
    })
    c.subscribe(["^orders-.*"])
    got, topics = set(), set()
    deadline = time.time() + 60
    while got != expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise KafkaException(m.error())
        got.add(m.value())
        topics.add(m.topic())
    c.close()
    assert got == expected, f"received {len(got)} of {len(expected)}"
    assert topics == {"orders-eu", "orders-us"}


def metadata_request(version, body, correlation_id=5):
    """A Metadata request frame; header v2 (with an empty tag buffer) for v9+."""
    header = struct.pack(">hhi", 3, version, correlation_id) + w.string("metadata-test")
    if version >= 9:
        header += b"\x00"
    return w.frame(header + body)


def topic_names_v0(payload):
    """Topic names of a Metadata v0 response."""
    r = w.Reader(payload)
    r.take(">i")  # correlation id
    for _ in range(r.take(">i")):  # brokers: node id, host, port
        r.take(">i")
        r.string()
        r.take(">i")
    names = []
    for _ in range(r.take(">i")):
        error = r.take(">h")
        names.append((r.string(), error))
        for _ in range(r.take(">i")):  # partitions: error, index, leader, replicas, isr
            r.take(">hii")
            for _ in range(2):
                for _ in range(r.take(">i")):
                    r.take(">i")
    return names


def test_metadata_v0_empty_topic_list_means_all_topics(broker):
    create_topics(broker.bootstrap, ["v0-a", "v0-b"])
    s = w.connect(broker.bootstrap)
    s.sendall(metadata_request(0, struct.pack(">i", 0)))
    payload = w.read_response(s)
    assert payload is not None, "broker closed the connection on Metadata v0"
    names = dict(topic_names_v0(payload))
    assert names.get("v0-a") == 0 and names.get("v0-b") == 0, names
    # One topic by name, on the same connection.
    s.sendall(metadata_request(0, struct.pack(">i", 1) + w.string("v0-a"), correlation_id=6))
    payload = w.read_response(s)
    assert [n for n, _ in topic_names_v0(payload)] == ["v0-a"]
    s.close()


def test_librdkafka_all_topics_metadata_with_trailing_bytes(broker):
    """librdkafka's v12 all-topics request: a 4-byte placeholder where the 1-byte null count
    belongs, so three bytes follow the body. Kafka ignores them and answers with every topic."""
    create_topics(broker.bootstrap, ["placeholder-a"])
    s = w.connect(broker.bootstrap)
    body = b"\x00\x00\x00\x00" + b"\x01\x00\x00"
    s.sendall(metadata_request(12, body))
    payload = w.read_response(s)
    assert payload is not None, f"broker closed the connection:\n{broker.read_log()}"
    assert b"placeholder-a" in payload
    # The connection stays usable.
    s.sendall(metadata_request(12, b"\x00\x01\x00\x00", correlation_id=9))
    payload = w.read_response(s)
    assert payload is not None and struct.unpack_from(">i", payload)[0] == 9
    s.close()


def test_trailing_bytes_after_other_requests_are_ignored(broker):
    """Kafka ignores bytes after any request body; a produce with junk after it is appended
    once and answered, and the connection stays open."""
    create_topics(broker.bootstrap, ["trailing"], partitions=1)
    s = w.connect(broker.bootstrap)
    # ApiVersions v0 with junk after its empty body.
    s.sendall(w.frame(struct.pack(">hhi", 18, 0, 3) + w.string("t") + b"junk"))
    payload = w.read_response(s)
    assert payload is not None and struct.unpack_from(">ih", payload) == (3, 0)
    # Produce v3 with junk after the body.
    frame = w.produce_v3("trailing", 0, w.record_batch([b"one", b"two"]))
    junk = b"\xff" * 9
    frame = struct.pack(">i", len(frame) - 4 + len(junk)) + frame[4:] + junk
    s.sendall(frame)
    payload = w.read_response(s)
    assert payload is not None, f"broker closed the connection:\n{broker.read_log()}"
    assert w.produce_v3_result(payload) == (0, 0)
    s.sendall(w.produce_v3("trailing", 0, w.record_batch([b"three"]), correlation_id=8))
    assert w.produce_v3_result(w.read_response(s)) == (0, 2), "the first produce was appended once"
    s.close()
