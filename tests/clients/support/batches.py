"""The record batches that ringlog stored for a topic: their headers, records and aborted
transaction index.

Each partition folder `<data dir>/<topic>-<partition>/` holds the producers' RecordBatch v2
bytes verbatim (docs/format.md), so the headers show what a client really sent: which
compression codec (a client may silently fall back to none), whether it was idempotent.
Read them after Broker.stop(): the active segment is complete on disk only once closed.
"""
import os
import re
import struct

import cramjam

from support.wire import Reader, read_varint

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
HEADER = 61  # RecordBatch v2 header bytes up to and including the record count


def _partition_files(data_dir, topic, suffix):
    """(partition, file name, bytes) of each `suffix` file of `topic`'s partition folders."""
    pattern = re.compile(re.escape(topic) + r"-(\d+)")
    for name in sorted(os.listdir(data_dir)):
        m = pattern.fullmatch(name)
        if not m:
            continue
        folder = os.path.join(data_dir, name)
        for f in sorted(f for f in os.listdir(folder) if f.endswith(suffix)):
            with open(os.path.join(folder, f), "rb") as fh:
                yield int(m.group(1)), f"{name}/{f}", fh.read()


def _batches(data_dir, topic):
    """(partition, batch bytes) of every stored batch, in each partition's offset order."""
    for partition, where, data in _partition_files(data_dir, topic, ".log"):
        pos = 0
        while pos + HEADER <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, pos)
            assert HEADER - 12 <= length <= len(data) - pos - 12, f"{where}: bad batch length {length} at {pos}"
            yield partition, data[pos:pos + 12 + length]
            pos += 12 + length
        assert pos == len(data), f"{where}: {len(data) - pos} bytes after the last batch"


def _header(b):
    """The fields of a stored batch's header (RecordBatch v2) the functions below return."""
    base_offset, _, leader_epoch = struct.unpack_from(">qii", b, 0)
    attrs, last_delta = struct.unpack_from(">hi", b, 21)
    producer_id, producer_epoch = struct.unpack_from(">qh", b, 43)
    (records,) = struct.unpack_from(">i", b, 57)
    return {"base_offset": base_offset, "last_offset": base_offset + last_delta, "leader_epoch": leader_epoch,
            "magic": b[16], "attributes": attrs, "codec": CODECS.get(attrs & 7, attrs & 7),
            "producer_id": producer_id, "producer_epoch": producer_epoch, "records": records}


def stored_batches(data_dir, topic):
    """[{partition, base_offset, magic, codec, producer_id, records}] for every stored batch."""
    out = []
    for partition, b in _batches(data_dir, topic):
        h = _header(b)
        out.append({"partition": partition, **{k: h[k] for k in
                                              ("base_offset", "magic", "codec", "producer_id", "records")}})
    return out


def assert_idempotent_batches(data_dir, topic, codecs, records):
    """What an idempotent producer sending in every codec of `codecs` left: v2 batches with a
    producer id, exactly those codecs really used, `records` records in all."""
    batches = stored_batches(data_dir, topic)
    assert {b["codec"] for b in batches} == set(codecs), batches
    assert all(b["magic"] == 2 and b["producer_id"] >= 0 for b in batches), batches
    assert sum(b["records"] for b in batches) == records


def codecs_used(data_dir, topic):
    return {b["codec"] for b in stored_batches(data_dir, topic)}


def _decompress(codec, body):
    if codec == "none":
        return body
    if codec == "snappy":
        if body.startswith(b"\x82SNAPPY\x00"):  # xerial framing (the Java client's)
            out, i = b"", 16
            while i < len(body):
                (n,) = struct.unpack_from(">i", body, i)
                out += bytes(cramjam.snappy.decompress_raw(body[i + 4:i + 4 + n]))
                i += 4 + n
            return out
        return bytes(cramjam.snappy.decompress_raw(body))
    return bytes(getattr(cramjam, codec).decompress(body))


def stored_records(data_dir, topic):
    """Every stored batch of `topic` with its records, in each partition's offset order:
    [{partition, base_offset, last_offset, leader_epoch, producer_id, producer_epoch,
    transactional, control ("COMMIT" / "ABORT" for a marker, else None), values}]."""
    out = []
    for partition, b in _batches(data_dir, topic):
        h = _header(b)
        r = Reader(_decompress(h["codec"], b[HEADER:]))
        keys, values = [], []
        for _ in range(h["records"]):
            size = read_varint(r)
            end = r.off + size
            r.take(">b")  # attributes
            read_varint(r)  # timestamp delta
            read_varint(r)  # offset delta
            klen = read_varint(r)
            keys.append(r.data[r.off:r.off + klen] if klen >= 0 else None)
            r.off += max(klen, 0)
            vlen = read_varint(r)
            values.append(r.data[r.off:r.off + vlen] if vlen >= 0 else None)
            r.off = end
        control = None
        if h["attributes"] & 0x20:
            kind = struct.unpack(">hh", keys[0][:4])[1] if keys and keys[0] else None
            control = {0: "ABORT", 1: "COMMIT"}.get(kind, f"control type {kind}")
        out.append({"partition": partition, "transactional": bool(h["attributes"] & 0x10),
                    "control": control, "values": [] if control else values,
                    **{k: h[k] for k in ("base_offset", "last_offset", "leader_epoch", "producer_id",
                                         "producer_epoch")}})
    return out


def aborted_index(data_dir, topic):
    """The `.txnindex` entries of `topic`'s partitions: [(partition, producer id, first
    offset, last offset)] (docs/format.md: 34-byte entries)."""
    out = []
    for partition, _, data in _partition_files(data_dir, topic, ".txnindex"):
        for i in range(0, len(data) - 33, 34):
            _, pid, first, last, _ = struct.unpack_from(">hqqqq", data, i)
            out.append((partition, pid, first, last))
    return out
