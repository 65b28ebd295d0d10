"""Bounds of a node under churn (issue 12, item 4): connections that come and go leave nothing
behind.

Every connection waits on its shard's stop signal while it reads; before waiters were removed
when their future was dropped, each closed connection kept its task's memory until shutdown.
"""
import socket
import struct

import kafka_wire as w

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
