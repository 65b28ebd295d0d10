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


def varint(n):
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def record_batch(values, magic=2, ts=1_700_000_000_000, producer_id=-1, producer_epoch=-1, base_sequence=-1):
    """An uncompressed RecordBatch v2 with null keys (magic other than 2 only changes the byte)."""
    records = bytearray()
    for i, v in enumerate(values):
        body = b"\x00" + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        records += varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, ts, ts, producer_id, producer_epoch, base_sequence,
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
