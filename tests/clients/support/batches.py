"""The record-batch headers that ringlog stored for a topic.

Each partition folder `<data dir>/<topic>-<partition>/` holds the producers' RecordBatch v2
bytes verbatim (docs/format.md), so the headers show what a client really sent: which
compression codec (a client may silently fall back to none), whether it was idempotent.
Read them after Broker.stop(): the active segment is complete on disk only once closed.
"""
import os
import re
import struct

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
HEADER = 61  # RecordBatch v2 header bytes up to and including the record count


def stored_batches(data_dir, topic):
    """[{partition, base_offset, magic, codec, producer_id, records}] for every stored batch."""
    out = []
    pattern = re.compile(re.escape(topic) + r"-(\d+)")
    for name in sorted(os.listdir(data_dir)):
        m = pattern.fullmatch(name)
        if not m:
            continue
        folder = os.path.join(data_dir, name)
        for seg in sorted(f for f in os.listdir(folder) if f.endswith(".log")):
            with open(os.path.join(folder, seg), "rb") as f:
                data = f.read()
            pos = 0
            while pos + HEADER <= len(data):
                base_offset, length = struct.unpack_from(">qi", data, pos)
                assert HEADER - 12 <= length <= len(data) - pos - 12, f"{name}/{seg}: bad batch length {length} at {pos}"
                (attrs,) = struct.unpack_from(">h", data, pos + 21)
                (producer_id,) = struct.unpack_from(">q", data, pos + 43)
                (records,) = struct.unpack_from(">i", data, pos + 57)
                out.append({"partition": int(m.group(1)), "base_offset": base_offset, "magic": data[pos + 16],
                            "codec": CODECS.get(attrs & 7, attrs & 7), "producer_id": producer_id,
                            "records": records})
                pos += 12 + length
            assert pos == len(data), f"{name}/{seg}: {len(data) - pos} bytes after the last batch"
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
