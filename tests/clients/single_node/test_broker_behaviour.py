"""Broker behaviour that clients rely on: idempotent dedup, long-poll wake-up, acks=0,
graceful shutdown, and both fetch paths (zero-copy and copying)."""
import struct
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from support import wire as w

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


def consume_all(bootstrap, topic, partitions, expected, timeout=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + timeout
    while len(got) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert not m.error(), m.error()
            got.append(m)
    c.close()
    return got


def test_idempotent_retries_get_original_offsets_and_gaps_are_refused(broker):
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("idem", b"seed", partition=0)
    assert p.flush(10) == 0
    s = w.connect(broker.bootstrap)

    def send(values, seq, epoch=0, corr=1):
        s.sendall(w.produce_v3("idem", 0, w.record_batch(values, producer_id=4242, producer_epoch=epoch, base_sequence=seq),
                               correlation_id=corr))
        return w.produce_v3_result(w.read_response(s))

    assert send([b"a", b"b"], 0) == (0, 1)
    assert send([b"a", b"b"], 0) == (0, 1), "a retried batch gets its original offset"
    assert send([b"c"], 2) == (0, 3)
    err, _ = send([b"gap"], 9)
    assert err == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send([b"d"], 0, epoch=1) == (0, 4), "a new epoch starts at sequence 0"
    err, _ = send([b"old"], 1, epoch=0)
    assert err == INVALID_PRODUCER_EPOCH
    values = [m.value() for m in consume_all(broker.bootstrap, "idem", 1, 5)]
    assert values == [b"seed", b"a", b"b", b"c", b"d"], "duplicates and refused batches are not stored"


def test_long_poll_wakes_when_data_arrives(broker):
    Producer({"bootstrap.servers": broker.bootstrap}).list_topics("wake", timeout=10)  # auto-create
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10_000, "fetch.min.bytes": 1})
    c.assign([TopicPartition("wake", 0, 0)])
    c.poll(1.0)  # the first fetch is now parked in the broker for up to 10 s

    def produce_later():
        time.sleep(1.0)
        p = Producer({"bootstrap.servers": broker.bootstrap})
        p.produce("wake", b"now", partition=0)
        p.flush(10)

    t = threading.Thread(target=produce_later)
    start = time.time()
    t.start()
    m = None
    while m is None and time.time() - start < 20:
        m = c.poll(0.2)
    elapsed = time.time() - start
    t.join()
    c.close()
    assert m is not None and m.value() == b"now"
    # Woken by the append, not by the 10 s max wait.
    assert elapsed < 8, f"record arrived after {elapsed:.1f} s"


def test_acks_zero_gets_no_response_but_stores(broker):
    s = w.connect(broker.bootstrap)
    Producer({"bootstrap.servers": broker.bootstrap}).list_topics("acks0", timeout=10)
    s.sendall(w.produce_v3("acks0", 0, w.record_batch([b"fire-and-forget"]), acks=0, correlation_id=1))
    # The next request's response is the first thing to arrive: no response for acks=0.
    s.sendall(w.produce_v3("acks0", 0, w.record_batch([b"acked"]), acks=1, correlation_id=2))
    payload = w.read_response(s)
    (corr,) = struct.unpack_from(">i", payload, 0)
    assert corr == 2
    assert [m.value() for m in consume_all(broker.bootstrap, "acks0", 1, 2)] == [b"fire-and-forget", b"acked"]


@pytest.mark.parametrize("read_cache", ["-1", "0"])
def test_sigterm_flushes_and_restart_serves_everything(make_broker, read_cache):
    b = make_broker(settings={"log.read.cache.bytes": read_cache}).start()
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2})
    values = [f"rec-{i}".encode() * 20 for i in range(20_000)]
    for i, v in enumerate(values):
        p.produce("graceful", v, partition=i % 2)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert b.stop() == 0, "clean exit on SIGTERM"
    log = b.read_log()
    assert "stopping" in log and "panicked" not in log
    b.start()
    got = consume_all(b.bootstrap, "graceful", 2, len(values))
    assert sorted(m.value() for m in got) == sorted(values)


def _deliveries(bootstrap, topic, acks, n=3):
    results = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                  "message.send.max.retries": 0, "enable.idempotence": False})
    for i in range(n):
        p.produce(topic, value=b"m%d" % i, partition=0,
                  on_delivery=lambda err, msg: results.append(err))
    p.flush(15)
    return results


def test_acks_all_needs_min_insync_replicas(make_broker):
    from confluent_kafka.admin import AdminClient, NewTopic
    b = make_broker(shards=1).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("isr2", 1, 1, config={"min.insync.replicas": "2"})])["isr2"].result(timeout=10)
    admin.create_topics([NewTopic("isr1", 1, 1)])["isr1"].result(timeout=10)
    # One replica in sync, two required: acks=all is refused before anything is appended.
    errs = _deliveries(b.bootstrap, "isr2", "all")
    assert len(errs) == 3 and all(e is not None and e.code() == 19 for e in errs), errs  # NOT_ENOUGH_REPLICAS
    assert _deliveries(b.bootstrap, "isr2", "1") == [None] * 3, "acks=1 does not ask for replicas"
    assert _deliveries(b.bootstrap, "isr1", "all") == [None] * 3
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "isr", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("isr2", 0, 0)])
    got = []
    deadline = time.time() + 10
    while len(got) < 3 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"m0", b"m1", b"m2"], "only the acks=1 records were stored"
    with pytest.raises(Exception) as e:
        admin.create_topics([NewTopic("isr0", 1, 1, config={"min.insync.replicas": "0"})])["isr0"].result(timeout=10)
    assert "min.insync.replicas" in str(e.value)


def test_broker_default_min_insync_replicas(make_broker):
    b = make_broker(shards=1, settings={"min.insync.replicas": 2}).start()
    errs = _deliveries(b.bootstrap, "auto-isr", "all", n=1)
    assert errs[0] is not None and errs[0].code() == 19, errs


def test_a_listener_port_in_use_by_another_broker_stops_the_start(make_broker):
    """A second ringlog told to listen on a running one's port must not start: glommio's own
    bind set SO_REUSEPORT, so it used to bind the port as well and the kernel split the
    clients' connections between two unrelated brokers."""
    first = make_broker(shards=1).start()
    p = Producer({"bootstrap.servers": first.bootstrap})
    p.produce("kept", b"before", partition=0)
    assert p.flush(15) == 0

    second = make_broker(shards=1)
    second.port = first.port
    second.start()  # returns at once: the port answers (the first broker)
    try:
        code = second.proc.wait(15)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"a second broker on port {first.port} kept running:\n{second.read_log()}")
    log = second.read_log()
    assert code != 0, f"exit code {code}:\n{log}"
    assert f"127.0.0.1:{first.port}" in log and "in use" in log, log

    # Every connection still reaches the first broker: 20 fresh consumers read its record.
    for i in range(20):
        got = consume_all(first.bootstrap, "kept", 1, 1, timeout=15)
        assert [m.value() for m in got] == [b"before"], f"consumer {i}: {got}"


def test_transparent_huge_pages_are_off_for_the_broker(broker):
    """A fresh heap page must not be a 2 MiB page zeroed inside one fault on a shard's thread
    (3-7 ms on this VM: perf/results/2026-12-06-floor): the broker turns THP off for itself."""
    status = open(f"/proc/{broker.proc.pid}/status").read()
    assert "THP_enabled:\t0" in status, [l for l in status.splitlines() if l.startswith("THP")]
