"""Leader epochs on the wire, as Kafka answers them: OffsetForLeaderEpoch (KIP-101/320) and the
`CurrentLeaderEpoch` fencing of Fetch and ListOffsets. A single node leads every partition at
leader epoch 0, so epoch 1 is one this broker does not know yet and -1 means "not checked"."""
import struct

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from support import wire as w

NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 3
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75


def setup_topic(broker, topic, records):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(records):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(10) == 0


def offset_for_leader_epoch_v3(s, topic, partition, current_epoch, epoch):
    """-> (error, leader epoch, end offset)"""
    body = struct.pack(">i", -1) + w.array([w.string(topic) + w.array([struct.pack(">iii", partition, current_epoch, epoch)])])
    r = w.Reader(w.call(s, 23, 3, body))
    _throttle = r.take(">i")
    assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
    error, p, leader_epoch, end_offset = r.take(">hiiq")
    assert p == partition
    return error, leader_epoch, end_offset


def fetch_v11(s, topic, partition, offset, current_epoch):
    """-> (error, high watermark, record bytes)"""
    part = struct.pack(">iiqqi", partition, current_epoch, offset, -1, 1 << 20)
    body = struct.pack(">iiiibii", -1, 0, 1, 1 << 20, 0, 0, -1)
    body += w.array([w.string(topic) + w.array([part])]) + w.array([]) + w.string("")
    r = w.Reader(w.call(s, 1, 11, body))
    _throttle, top_error, _session = r.take(">ihi")
    assert top_error == NONE
    assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
    p, error, hw, _lso, _start = r.take(">ihqqq")
    assert p == partition
    aborted = r.take(">i")
    for _ in range(max(aborted, 0)):
        r.take(">qq")
    _preferred = r.take(">i")
    return error, hw, r.bytes()


def list_offsets_v5(s, topic, partition, current_epoch, timestamp=-1):
    """-> (error, offset, leader epoch)"""
    body = struct.pack(">ib", -1, 0) + w.array([w.string(topic) + w.array([struct.pack(">iiq", partition, current_epoch, timestamp)])])
    r = w.Reader(w.call(s, 2, 5, body))
    _throttle = r.take(">i")
    assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
    p, error, _ts, offset, leader_epoch = r.take(">ihqqi")
    assert p == partition
    return error, offset, leader_epoch


def test_offset_for_leader_epoch_answers_like_kafka(make_broker):
    broker = make_broker(shards=1).start()
    setup_topic(broker, "epochs", 5)
    s = w.connect(broker.bootstrap)
    # The latest epoch ends at the log end offset.
    assert offset_for_leader_epoch_v3(s, "epochs", 0, -1, 0) == (NONE, 0, 5)
    assert offset_for_leader_epoch_v3(s, "epochs", 0, 0, 0) == (NONE, 0, 5)
    # An epoch newer than any in the log: UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET, no error.
    assert offset_for_leader_epoch_v3(s, "epochs", 0, -1, 3) == (NONE, -1, -1)
    # The client believes in a leader epoch this broker does not know yet.
    assert offset_for_leader_epoch_v3(s, "epochs", 0, 1, 0)[0] == UNKNOWN_LEADER_EPOCH
    assert offset_for_leader_epoch_v3(s, "missing", 0, -1, 0)[0] == UNKNOWN_TOPIC_OR_PARTITION
    assert offset_for_leader_epoch_v3(s, "epochs", 7, -1, 0)[0] == UNKNOWN_TOPIC_OR_PARTITION
    s.close()


def test_fetch_and_list_offsets_check_the_current_leader_epoch(make_broker):
    broker = make_broker(shards=1).start()
    setup_topic(broker, "fenced", 3)
    s = w.connect(broker.bootstrap)
    error, hw, records = fetch_v11(s, "fenced", 0, 0, 0)
    assert (error, hw) == (NONE, 3) and len(records) > 0
    assert fetch_v11(s, "fenced", 0, 0, -1)[0] == NONE
    error, hw, records = fetch_v11(s, "fenced", 0, 0, 1)
    assert error == UNKNOWN_LEADER_EPOCH and records == b""
    assert list_offsets_v5(s, "fenced", 0, 0) == (NONE, 3, 0)
    assert list_offsets_v5(s, "fenced", 0, 1)[0] == UNKNOWN_LEADER_EPOCH
    assert list_offsets_v5(s, "fenced", 0, -1)[0] == NONE
    s.close()
