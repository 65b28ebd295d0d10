"""Just enough of Kafka's wire format, by hand, to send requests real clients never send:
truncated, oversized, unknown, corrupt. Used only by the bad-input tests."""
import socket
import struct
import time


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):
    return uvarint((n << 1) ^ (n >> 63))  # zigzag


def record_batch(values, magic=2, ts=1_700_000_000_000, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                 attributes=0):
    """An uncompressed RecordBatch v2 with null keys (magic other than 2 only changes the byte;
    `attributes` 0x10 marks a transactional batch)."""
    records = bytearray()
    for i, v in enumerate(values):
        body = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        records += varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", attributes, len(values) - 1, ts, ts, producer_id, producer_epoch, base_sequence,
                            len(values)) + bytes(records)
    crc = crc32c(after_crc)
    head = struct.pack(">ib", 0, magic) + struct.pack(">I", crc)
    batch = head + after_crc
    return struct.pack(">qi", 0, len(batch)) + batch


def string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def produce_v3(topic, partition, records, acks=1, correlation_id=7):
    header = struct.pack(">hhi", 0, 3, correlation_id) + string("bad-input-test")
    body = struct.pack(">hhi", -1, acks, 10_000)
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
    body += struct.pack(">i", partition) + struct.pack(">i", len(records)) + records
    return frame(header + body)


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def connect(bootstrap):
    host, port = bootstrap.split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    return s


def read_response(s):
    """The response payload, or None if the broker closed the connection."""
    size = recv_exact(s, 4)
    if size is None:
        return None
    (n,) = struct.unpack(">i", size)
    return recv_exact(s, n)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except (ConnectionResetError, socket.timeout):
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def produce_v3_result(payload):
    """(error code, base offset) of the single partition of a Produce v3 response."""
    off = 4 + 4
    (name_len,) = struct.unpack_from(">h", payload, off)
    off += 2 + name_len + 4
    _index, error, base = struct.unpack_from(">ihq", payload, off)
    return error, base


def produce_v3_error_code(payload):
    """Error code of the single partition of a Produce v3 response."""
    # correlation id, topics array (1), topic name, partitions array (1), index, error code
    off = 4
    (n_topics,) = struct.unpack_from(">i", payload, off)
    off += 4
    (name_len,) = struct.unpack_from(">h", payload, off)
    off += 2 + name_len
    off += 4  # partitions array length
    _index, error = struct.unpack_from(">ih", payload, off)
    return error


def closed_by_broker(s, wait=5):
    s.settimeout(wait)
    deadline = time.time() + wait
    while time.time() < deadline:
        try:
            if s.recv(1) == b"":
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
    return False


# --- group protocol requests at fixed, non-flexible versions (for the group error tests) ---

def bytes_field(b):
    return struct.pack(">i", len(b)) + b


def array(items):
    return struct.pack(">i", len(items)) + b"".join(items)


def request(api_key, version, body, correlation_id=11):
    """One framed request with header v1."""
    return frame(struct.pack(">hhi", api_key, version, correlation_id) + string("group-wire-test") + body)


def response_body(payload, correlation_id=11):
    """The response body after the correlation id (header v0), which must be `correlation_id`."""
    (cid,) = struct.unpack_from(">i", payload, 0)
    assert cid == correlation_id
    return payload[4:]


def call(s, api_key, version, body, correlation_id=11):
    """Sends one request with header v1 and returns the response body after the correlation id."""
    s.sendall(request(api_key, version, body, correlation_id))
    payload = read_response(s)
    assert payload is not None, f"broker closed the connection on api {api_key} v{version}"
    return response_body(payload, correlation_id)


class Reader:
    def __init__(self, data):
        self.data, self.off = data, 0

    def take(self, fmt):
        vals = struct.unpack_from(fmt, self.data, self.off)
        self.off += struct.calcsize(fmt)
        return vals if len(vals) > 1 else vals[0]

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        v = self.data[self.off:self.off + n].decode()
        self.off += n
        return v

    def bytes(self):
        n = self.take(">i")
        v = self.data[self.off:self.off + max(n, 0)]
        self.off += max(n, 0)
        return v


def find_coordinator_v0(s, group):
    r = Reader(call(s, 10, 0, string(group)))
    return r.take(">h"), r.take(">i"), r.string(), r.take(">i")


def join_group_v1(s, group, member_id="", session_timeout=10_000, protocol_type="consumer",
                  protocols=(("range", b"\x00\x00\x00\x00\x00\x00\x00\x00"),)):
    """(error, generation, protocol, leader, member id, members) — v1 has no MEMBER_ID_REQUIRED step."""
    body = string(group) + struct.pack(">ii", session_timeout, 30_000) + string(member_id)
    body += string(protocol_type) + array([string(n) + bytes_field(m) for n, m in protocols])
    r = Reader(call(s, 11, 1, body))
    error, generation = r.take(">h"), r.take(">i")
    protocol, leader, member = r.string(), r.string(), r.string()
    members = [(r.string(), r.bytes()) for _ in range(r.take(">i"))]
    return error, generation, protocol, leader, member, members


def sync_group_v1(s, group, generation, member_id, assignments=()):
    body = string(group) + struct.pack(">i", generation) + string(member_id)
    body += array([string(m) + bytes_field(a) for m, a in assignments])
    r = Reader(call(s, 14, 1, body))
    _throttle, error = r.take(">i"), r.take(">h")
    return error, r.bytes()


def heartbeat_v1(s, group, generation, member_id):
    r = Reader(call(s, 12, 1, string(group) + struct.pack(">i", generation) + string(member_id)))
    _throttle = r.take(">i")
    return r.take(">h")


def offset_commit_v2(s, group, generation, member_id, offsets):
    """offsets: [(topic, partition, offset, metadata)] -> {(topic, partition): error}"""
    topics = {}
    for t, p, o, m in offsets:
        topics.setdefault(t, []).append(struct.pack(">iq", p, o) + string(m))
    body = string(group) + struct.pack(">i", generation) + string(member_id) + struct.pack(">q", -1)
    body += array([string(t) + array(ps) for t, ps in topics.items()])
    r = Reader(call(s, 8, 2, body))
    out = {}
    for _ in range(r.take(">i")):
        t = r.string()
        for _ in range(r.take(">i")):
            p, e = r.take(">ih")
            out[(t, p)] = e
    return out


def offset_fetch_v1_body(group, topic, partitions):
    return string(group) + array([string(topic) + array([struct.pack(">i", p) for p in partitions])])


def offset_fetch_v1(s, group, topic, partitions):
    """{partition: (offset, metadata, error)}"""
    return parse_offset_fetch_v1(call(s, 9, 1, offset_fetch_v1_body(group, topic, partitions)))


def parse_offset_fetch_v1(body):
    """An OffsetFetch v1 response body: {partition: (offset, metadata, error)}"""
    r = Reader(body)
    out = {}
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            p, o = r.take(">iq")
            m = r.string()
            out[p] = (o, m, r.take(">h"))
    return out


TRANSACTIONAL = 0x10


def find_transaction_coordinator(s, transactional_id):
    """FindCoordinator v1 with key type 1: (error, node id, host, port)."""
    r = Reader(call(s, 10, 1, string(transactional_id) + struct.pack(">b", 1)))
    r.take(">i")  # throttle
    error = r.take(">h")
    r.string()  # error message
    return error, r.take(">i"), r.string(), r.take(">i")


def init_producer_id_v0(s, transactional_id, timeout_ms=60_000):
    """InitProducerId v0: (error, producer id, epoch)."""
    r = Reader(call(s, 22, 0, string(transactional_id) + struct.pack(">i", timeout_ms)))
    r.take(">i")  # throttle
    return r.take(">h"), r.take(">q"), r.take(">h")


def produce_v3_transactional(topic, partition, records, transactional_id, acks=-1, correlation_id=7):
    """Produce v3 naming `transactional_id` (the field clients set for transactional batches)."""
    header = struct.pack(">hhi", 0, 3, correlation_id) + string("txn-wire-test")
    body = string(transactional_id) + struct.pack(">hi", acks, 10_000)
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
    body += struct.pack(">i", partition) + struct.pack(">i", len(records)) + records
    return frame(header + body)


def api_versions(bootstrap):
    """ApiVersions v0: {api key: (min, max)} as the broker advertises them."""
    s = connect(bootstrap)
    try:
        r = Reader(call(s, 18, 0, b""))
    finally:
        s.close()
    assert r.take(">h") == 0
    out = {}
    for _ in range(r.take(">i")):
        key, lo, hi = r.take(">hhh")
        out[key] = (lo, hi)
    return out


# --- WriteTxnMarkers (flexible versions: compact arrays and strings, tagged fields) ---

def read_uvarint(r):
    shift = n = 0
    while True:
        b = r.take(">B")
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7


def read_varint(r):
    n = read_uvarint(r)
    return (n >> 1) ^ -(n & 1)  # zigzag


def write_txn_markers(s, producer_id, producer_epoch, commit, topic, partitions, version=2,
                      transaction_version=2, coordinator_epoch=0, correlation_id=13):
    """WriteTxnMarkers v1 or v2 (v2: the marker's transaction version, KIP-1228) with one
    marker: {partition: error code}."""
    name = topic.encode()
    topics = uvarint(2) + uvarint(len(name) + 1) + name + uvarint(len(partitions) + 1)
    topics += b"".join(struct.pack(">i", p) for p in partitions) + uvarint(0)
    marker = struct.pack(">qhb", producer_id, producer_epoch, 1 if commit else 0) + topics
    marker += struct.pack(">i", coordinator_epoch)
    if version >= 2:
        marker += struct.pack(">b", transaction_version)
    body = uvarint(2) + marker + uvarint(0) + uvarint(0)
    header = struct.pack(">hhi", 27, version, correlation_id) + string("marker-wire-test") + uvarint(0)
    s.sendall(frame(header + body))
    payload = read_response(s)
    assert payload is not None, f"broker closed the connection on WriteTxnMarkers v{version}"
    r = Reader(payload)
    assert r.take(">i") == correlation_id
    read_uvarint(r)  # response header tagged fields
    out = {}
    for _ in range(read_uvarint(r) - 1):
        r.take(">q")
        for _ in range(read_uvarint(r) - 1):
            name_length = read_uvarint(r) - 1
            r.off += name_length  # the topic name
            for _ in range(read_uvarint(r) - 1):
                p, error = r.take(">ih")
                out[p] = error
                read_uvarint(r)
            read_uvarint(r)
        read_uvarint(r)
    return out
