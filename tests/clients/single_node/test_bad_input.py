"""Bad input against the running broker: each case gets Kafka's error code or a closed
connection, and afterwards normal produce/consume still works and stored data is intact."""
import struct

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from support import wire as w

UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40


def kafka_code(excinfo):
    """The Kafka error code of a failed admin future (librdkafka keeps Kafka's numbers)."""
    return excinfo.value.args[0].code()


def healthy(bootstrap, topic="health", n=50):
    """Produce n records and read back everything in the topic; returns the values."""
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=f"ok-{i}".encode(), partition=0)
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    while True:
        m = c.poll(2)
        if m is None:
            break
        assert not m.error(), m.error()
        got.append(m.value())
    c.close()
    return got


@pytest.fixture
def seeded(broker):
    assert healthy(broker.bootstrap) == [f"ok-{i}".encode() for i in range(50)]
    return broker


def after(broker, before=50):
    got = healthy(broker.bootstrap)
    assert got[:before] == [f"ok-{i}".encode() for i in range(50)], "earlier records intact"
    assert len(got) == before + 50
    assert "panicked" not in broker.read_log()


def test_truncated_frame_closes_only_that_connection(seeded):
    s = w.connect(seeded.bootstrap)
    s.sendall(struct.pack(">i", 100) + b"\x00\x12\x00")  # promises 100 bytes, sends 3
    s.close()
    s = w.connect(seeded.bootstrap)
    s.sendall(struct.pack(">i", 4) + b"\x00\x12\x00\x00")  # too short for a request header
    assert w.closed_by_broker(s)
    after(seeded)


def test_oversized_and_negative_frames_close_the_connection(seeded):
    for size in [200 * 1024 * 1024, -5, 0]:
        s = w.connect(seeded.bootstrap)
        s.sendall(struct.pack(">i", size) + b"\x00" * 16)
        assert w.closed_by_broker(s), size
    after(seeded)


def test_request_larger_than_socket_request_max_bytes(make_broker):
    b = make_broker(settings={"socket.request.max.bytes": 100_000}).start()
    healthy(b.bootstrap)
    s = w.connect(b.bootstrap)
    s.sendall(w.produce_v3("health", 0, w.record_batch([b"x" * 200_000])))
    assert w.closed_by_broker(s)
    b.wait_for_log("socket.request.max.bytes")
    after(b)


def test_unknown_api_key_and_version(seeded):
    s = w.connect(seeded.bootstrap)
    s.sendall(w.frame(struct.pack(">hhi", 999, 0, 1) + w.string("x")))
    assert w.closed_by_broker(s)
    s = w.connect(seeded.bootstrap)
    s.sendall(w.frame(struct.pack(">hhi", 1, 99, 1) + w.string("x")))  # Fetch v99
    assert w.closed_by_broker(s)
    # ApiVersions of an unknown version: v0 answer with UNSUPPORTED_VERSION (35) and the list
    s = w.connect(seeded.bootstrap)
    s.sendall(w.frame(struct.pack(">hhi", 18, 99, 42) + w.string("x")))
    payload = w.read_response(s)
    corr, err = struct.unpack_from(">ih", payload, 0)
    assert (corr, err) == (42, 35)
    after(seeded)


def test_corrupt_crc_gets_corrupt_message_and_stores_nothing(seeded):
    batch = bytearray(w.record_batch([b"evil"]))
    batch[-1] ^= 0xFF
    s = w.connect(seeded.bootstrap)
    s.sendall(w.produce_v3("health", 0, bytes(batch)))
    assert w.produce_v3_error_code(w.read_response(s)) == CORRUPT_MESSAGE
    # the same connection keeps working: a valid batch is accepted
    s.sendall(w.produce_v3("health", 0, w.record_batch([b"good"]), correlation_id=8))
    assert w.produce_v3_error_code(w.read_response(s)) == 0
    got = healthy(seeded.bootstrap)
    assert b"evil" not in got and b"good" in got


def test_old_message_formats_are_refused(seeded):
    s = w.connect(seeded.bootstrap)
    for magic in (0, 1):
        s.sendall(w.produce_v3("health", 0, w.record_batch([b"old"], magic=magic)))
        assert w.produce_v3_error_code(w.read_response(s)) == UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert b"old" not in healthy(seeded.bootstrap, n=0)


def test_garbage_request_body_closes_the_connection(seeded):
    s = w.connect(seeded.bootstrap)
    s.sendall(w.frame(struct.pack(">hhi", 0, 3, 1) + w.string("x") + b"\xff" * 7))
    assert w.closed_by_broker(s)
    after(seeded)


def test_unknown_topics_and_partitions(seeded):
    s = w.connect(seeded.bootstrap)
    s.sendall(w.produce_v3("health", 7, w.record_batch([b"nowhere"])))
    assert w.produce_v3_error_code(w.read_response(s)) == UNKNOWN_TOPIC_OR_PARTITION
    s.sendall(w.produce_v3("no-such-topic", 0, w.record_batch([b"nowhere"])))
    assert w.produce_v3_error_code(w.read_response(s)) == UNKNOWN_TOPIC_OR_PARTITION


def test_invalid_topic_names_and_partition_counts(seeded):
    admin = AdminClient({"bootstrap.servers": seeded.bootstrap})
    cases = {
        "bad name!": (1, INVALID_TOPIC_EXCEPTION),
        "x" * 250: (1, INVALID_TOPIC_EXCEPTION),
        "zero-parts": (0, INVALID_PARTITIONS),
        "too-many": (100_000, INVALID_PARTITIONS),
    }
    for name, (parts, code) in cases.items():
        fs = admin.create_topics([NewTopic(name, num_partitions=parts, replication_factor=1)])
        with pytest.raises(Exception) as e:
            fs[name].result(timeout=10)
        assert kafka_code(e) == code, (name, str(e.value))
    fs = admin.create_topics([NewTopic("rf3", num_partitions=1, replication_factor=3)])
    with pytest.raises(Exception) as e:
        fs["rf3"].result(timeout=10)
    assert kafka_code(e) == INVALID_REPLICATION_FACTOR, str(e.value)
    assert "larger than the 1 live node" in str(e.value), str(e.value)
    fs = admin.create_topics([NewTopic("rf0", num_partitions=1, replication_factor=0)])
    with pytest.raises(Exception) as e:
        fs["rf0"].result(timeout=10)
    assert kafka_code(e) == INVALID_REPLICATION_FACTOR, str(e.value)
    fs = admin.create_partitions([NewPartitions("health", 1)])
    with pytest.raises(Exception) as e:
        fs["health"].result(timeout=10)
    assert kafka_code(e) == INVALID_PARTITIONS, str(e.value)
    fs = admin.create_topics([NewTopic("dup", num_partitions=1, replication_factor=1)])
    fs["dup"].result(timeout=10)
    fs = admin.create_topics([NewTopic("dup", num_partitions=1, replication_factor=1)])
    with pytest.raises(Exception) as e:
        fs["dup"].result(timeout=10)
    assert kafka_code(e) == TOPIC_ALREADY_EXISTS, str(e.value)
    after(seeded)


def test_topic_configs_out_of_kafkas_bounds_are_refused(seeded):
    """Refused at CreateTopics with INVALID_CONFIG naming the config, as Kafka does, rather than
    accepted and then leaving the partitions offline (segment.bytes above 2 GiB) or misread
    (segment.ms=-1 as a 1 ms roll period)."""
    admin = AdminClient({"bootstrap.servers": seeded.bootstrap})
    cases = {
        "cfg-segment-ms": {"segment.ms": "-1"},
        "cfg-segment-bytes": {"segment.bytes": "3000000000"},
        "cfg-flush-messages": {"flush.messages": "0"},
        "cfg-retention-ms": {"retention.ms": "-7"},
        "cfg-not-a-number": {"flush.ms": "soon"},
        "cfg-unknown": {"no.such.config": "1"},
    }
    for name, config in cases.items():
        fs = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1, config=config)])
        with pytest.raises(Exception) as e:
            fs[name].result(timeout=10)
        assert kafka_code(e) == INVALID_CONFIG, (name, str(e.value))
        assert list(config)[0] in str(e.value), (name, str(e.value))
    # Kafka's unlimited values are accepted, and the topic takes records.
    ok = {"retention.ms": "-1", "retention.bytes": "-1", "segment.ms": "1", "index.interval.bytes": "0"}
    admin.create_topics([NewTopic("cfg-ok", num_partitions=1, replication_factor=1, config=ok)])["cfg-ok"].result(10)
    p = Producer({"bootstrap.servers": seeded.bootstrap})
    errors = []
    p.produce("cfg-ok", value=b"v", on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(10) == 0 and errors == [None], errors
    after(seeded)
