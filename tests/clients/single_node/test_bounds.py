"""Bounds of a node under churn (issue 12, item 4): connections that come and go leave nothing
behind.

Every connection waits on its shard's stop signal while it reads; before waiters were removed
when their future was dropped, each closed connection kept its task's memory until shutdown.
"""
import socket
import time
import struct

from support import wire as w

CYCLES = 100_000
WARMUP = 10_000
# Measured over the 90 000 connections after the warm-up: 0 KiB of growth; with the leak (each
# closed connection's waker kept, and with it its finished task's allocation) 7 MiB.
RSS_GROWTH_MAX_KB = 2 << 10


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def api_versions_v0(correlation_id):
    return w.frame(struct.pack(">hhi", 18, 0, correlation_id) + w.string("churn"))


def cycle(port, i):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    # Reset on close: no TIME_WAIT, so 100 000 cycles do not run out of local ports.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.sendall(api_versions_v0(i))
    payload = w.read_response(s)
    assert payload is not None and struct.unpack_from(">i", payload)[0] == i
    s.close()


def test_connect_disconnect_cycles_keep_rss_bounded(make_broker):
    b = make_broker(shards=1).start()
    for i in range(WARMUP):
        cycle(b.port, i)
    before = rss_kb(b.proc.pid)
    for i in range(WARMUP, CYCLES):
        cycle(b.port, i)
    after = rss_kb(b.proc.pid)
    print(f"RSS after {WARMUP} cycles {before} KiB, after {CYCLES} {after} KiB")
    assert after - before < RSS_GROWTH_MAX_KB, f"RSS grew {after - before} KiB over {CYCLES - WARMUP} connections"
    cycle(b.port, 0)  # still serving


MIB = 1 << 20
# queued.max.request.bytes for the budget test; a frame of STALLED_FRAME bytes takes all of
# it (frame buffers are powers of two: 30 MiB is charged 32).
BUDGET = 32 * MIB
STALLED_FRAME = 30 * MIB
STALLED_CONNECTIONS = 16
STALLED_SEND = 12 * MIB
# RSS growth allowed while the stalled connections push their bytes: the one frame the budget
# admits (at most STALLED_SEND of it touched) and the connections' 64 KiB read buffers, with
# room. Without the budget every connection would buffer what it sent: 16 x 12 MiB = 192 MiB.
STALLED_RSS_GROWTH_MAX = 64 * MIB


def push_stalled(ports):
    """Opens STALLED_CONNECTIONS connections spread over `ports`, each announcing a frame of
    STALLED_FRAME bytes and sending up to STALLED_SEND of it (as much as the broker and the
    kernel's buffers take within a few seconds), never the rest. Returns the sockets and the
    bytes sent."""
    socks = []
    for i in range(STALLED_CONNECTIONS):
        s = socket.create_connection(("127.0.0.1", ports[i % len(ports)]), timeout=10)
        s.sendall(struct.pack(">i", STALLED_FRAME))
        s.setblocking(False)
        socks.append([s, 0])
    chunk = b"\x07" * (256 << 10)
    deadline = time.time() + 6
    while time.time() < deadline and any(sent < STALLED_SEND for _, sent in socks):
        progressed = False
        for entry in socks:
            s, sent = entry
            if sent >= STALLED_SEND:
                continue
            try:
                n = s.send(chunk[: STALLED_SEND - sent])
                entry[1] += n
                progressed = True
            except BlockingIOError:
                pass
        if not progressed:
            time.sleep(0.05)
    return [s for s, _ in socks], sum(sent for _, sent in socks)


def test_request_budget_pushes_back_instead_of_buffering(make_broker):
    """`queued.max.request.bytes` bounds what all connections of the node hold in request
    frames: sixteen connections each sending 12 MiB of a 30 MiB request that never completes
    grow the broker's RSS by one frame, not by what they sent; while the budget is spent a
    real producer waits (its requests are not read: TCP pushes back); once the stalled
    connections go, it is served and its record reads back."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = make_broker(shards=2, settings={"queued.max.request.bytes": BUDGET,
                                        "auto.create.topics.enable": "true",
                                        "num.partitions": 1}).start()
    # Create the topic first, while the budget is free.
    warm = Producer({"bootstrap.servers": b.bootstrap, "acks": 1})
    warm.produce("budget", b"first")
    assert warm.flush(30) == 0
    time.sleep(1)
    before = rss_kb(b.proc.pid) * 1024
    socks, sent = push_stalled([b.port, b.port + 1])
    time.sleep(1)
    grown = rss_kb(b.proc.pid) * 1024 - before
    print(f"stalled connections sent {sent >> 20} MiB; broker RSS grew {grown >> 20} MiB")
    assert sent > STALLED_SEND, f"only {sent} bytes sent: the test shows nothing"
    assert grown < STALLED_RSS_GROWTH_MAX, f"RSS grew {grown >> 20} MiB with a {BUDGET >> 20} MiB request budget"

    delivered = []
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "message.timeout.ms": 60_000})
    p.produce("budget", b"after", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    p.poll(3)
    assert delivered == [], f"served while the budget was spent: {delivered}"
    for s in socks:
        s.close()
    assert p.flush(30) == 0, "not served after the stalled connections closed"
    assert delivered == [(None, 1)], delivered

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "budget-check",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("budget", 0, 0)])
    values = []
    deadline = time.time() + 30
    while len(values) < 2 and time.time() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            values.append(m.value())
    c.close()
    assert values == [b"first", b"after"], values
    assert b.proc.poll() is None, "broker died"
