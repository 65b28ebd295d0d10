"""The read path never lets one consumer hold up a shard (issue 12, item 1).

A consumer that stops reading its socket (its receive buffer tiny and full, many large fetches
pipelined) on one partition, while on the same shard another consumer reads cold data from
sealed segments (read cache off: every byte from the device) and a producer appends to a topic
that rolls a segment every few hundred kilobytes. Before the read cache, fetches went out with
sendfile on glommio's single blocking thread, which waited (up to 30 s) for the stalled
socket, and every other cold fetch and every roll waited behind it.

Judged on progress: the cold consumer reads everything and the producer's acknowledgements all
arrive within a bound far below the old 30 s stall; then the stalled consumer, once it reads,
gets complete, correct responses.
"""
import socket
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as w

VALUE = 10_000
# Generous for a noisy 2-core machine; the stall this guards against lasted 30 s per fetch.
PROGRESS_DEADLINE_S = 20


def fetch_v4(topic, partition, offset, correlation_id, max_bytes=10 << 20):
    """A Fetch v4 request for one partition (no long poll)."""
    header = struct.pack(">hhi", 1, 4, correlation_id) + w.string("stalled-consumer")
    body = struct.pack(">iiiib", -1, 0, 1, 50 << 20, 0)
    body += struct.pack(">i", 1) + w.string(topic) + struct.pack(">i", 1)
    body += struct.pack(">iqi", partition, offset, max_bytes)
    return w.frame(header + body)


def produce(bootstrap, topic, count, tag):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    for i in range(count):
        p.produce(topic, value=tag + b"%08d" % i + b"x" * (VALUE - len(tag) - 8), partition=0)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def test_a_stalled_consumer_delays_only_itself(make_broker):
    b = make_broker(shards=1, settings={"log.read.cache.bytes": "0"}).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    small = {"segment.bytes": str(4 << 20)}
    futures = admin.create_topics([NewTopic("stuck", 1, 1, config=small),
                                   NewTopic("cold", 1, 1, config=small),
                                   NewTopic("rolling", 1, 1, config={"segment.bytes": str(256 << 10)})])
    for f in futures.values():
        f.result(timeout=10)
    produce(b.bootstrap, "stuck", 3000, b"s")
    produce(b.bootstrap, "cold", 6000, b"c")

    # The stalled consumer: a 4 KiB receive buffer, 16 fetches (a 4 MiB segment each) pipelined,
    # nothing read.
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", b.port))
    for i in range(16):
        stalled.sendall(fetch_v4("stuck", 0, 0, correlation_id=100 + i))
    time.sleep(1)
    stalled.setblocking(False)
    queued = len(stalled.recv(1 << 20, socket.MSG_PEEK))
    stalled.setblocking(True)
    assert 0 < queued < 1 << 20, f"the stalled consumer's buffer holds {queued} bytes"

    start = time.time()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cold-reader",
                  "enable.auto.commit": False, "fetch.max.bytes": 8 << 20})
    c.assign([TopicPartition("cold", 0, OFFSET_BEGINNING)])
    seen = 0
    while seen < 6000 and time.time() - start < PROGRESS_DEADLINE_S:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        assert m.offset() == seen and m.value()[:9] == b"c%08d" % seen
        seen += 1
    c.close()
    cold_s = time.time() - start
    assert seen == 6000, f"cold consumer read {seen} of 6000 records in {cold_s:.1f} s"

    start = time.time()
    produce(b.bootstrap, "rolling", 1000, b"r")  # ~10 MB: about 40 rolls
    produce_s = time.time() - start
    assert produce_s < PROGRESS_DEADLINE_S, f"1000 acknowledgements took {produce_s:.1f} s"

    # The stalled consumer still gets every response, complete and in order.
    stalled.settimeout(30)
    for i in range(16):
        payload = w.read_response(stalled)
        assert payload is not None, f"stalled consumer's connection closed at response {i}:\n{b.read_log()}"
        (cid,) = struct.unpack_from(">i", payload, 0)
        assert cid == 100 + i
        assert len(payload) > 3 << 20, f"response {i}: {len(payload)} bytes (a 4 MiB segment expected)"
    stalled.close()
    print(f"cold read of 60 MB: {cold_s:.1f} s; 1000 acks with rolls: {produce_s:.1f} s")
