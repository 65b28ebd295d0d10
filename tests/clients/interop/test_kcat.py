"""kcat (Debian's kcat 1.7 on librdkafka 2.0) against a real ringlog node.

kcat -P produces keyed records with -H headers once per codec (-z), into a topic that the
broker auto-creates (num.partitions=3); kcat -C -e -o beginning -f reads everything back and
every field is checked. kcat -L (text and JSON) must list the topic and both shards as brokers.
"""
import json
import shutil
import subprocess
import time

import pytest
from support.batches import stored_batches

KCAT = shutil.which("kcat")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 3
PER_CODEC = 120
UNKEYED = 30
FMT = "%p\t%o\t%K\t%k\t%S\t%s\t%h\t%T\n"


def kcat(*args, stdin=None, timeout=30):
    assert KCAT, "kcat not found: scripts/install-deps.sh installs it (apt-get install kcat)"
    r = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout)
    assert r.returncode == 0, f"kcat {' '.join(args)} exited {r.returncode}:\n{r.stderr.decode(errors='replace')}"
    return r.stdout.decode()


def value_of(codec, i):
    return f"{codec}-value-{i}-" + "x" * (i % 40)


def test_produce_consume_every_codec_and_metadata(make_broker):
    b = make_broker(settings={"num.partitions": PARTITIONS}).start()
    topic = "kcat-codecs"
    expected = []  # (key or None, value, headers string, codec, seq)
    t0 = int(time.time() * 1000)
    for n, codec in enumerate(CODECS):
        lines = "".join(f"key-{i % 11}:{value_of(codec, i)}\n" for i in range(PER_CODEC))
        idem = "false" if codec == "none" else "true"
        kcat("-P", "-b", b.bootstrap, "-t", topic, "-K", ":", "-z", codec,
             "-H", f"codec={codec}", "-H", "client=kcat", "-H", f"run={n}",
             "-X", f"enable.idempotence={idem}", "-X", "linger.ms=5", stdin=lines.encode())
        for i in range(PER_CODEC):
            expected.append((f"key-{i % 11}", value_of(codec, i), f"codec={codec},client=kcat,run={n}", codec, i))
    # unkeyed records to an explicit partition
    lines = "".join(f"{value_of('unkeyed', i)}\n" for i in range(UNKEYED))
    kcat("-P", "-b", b.bootstrap, "-t", topic, "-p", "1", "-z", "lz4", "-H", "unkeyed=yes", stdin=lines.encode())
    for i in range(UNKEYED):
        expected.append((None, value_of("unkeyed", i), "unkeyed=yes", "unkeyed", i))
    t1 = int(time.time() * 1000)

    out = kcat("-C", "-b", b.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", FMT)
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == len(expected), f"consumed {len(rows)} of {len(expected)}:\n{b.read_log()}"

    by_content = {(k, v, h): (codec, seq) for k, v, h, codec, seq in expected}
    assert len(by_content) == len(expected)
    seen = set()
    per_part = {}
    for row in rows:
        assert len(row) == 8, row
        part, offset, klen, key, vlen, value, headers, ts = row
        part, offset, klen, vlen, ts = int(part), int(offset), int(klen), int(vlen), int(ts)
        if klen == -1:
            assert key == "", row
            key = None
        else:
            assert klen == len(key.encode()), row
        assert vlen == len(value.encode()), row
        assert (key, value, headers) in by_content, f"unexpected record {row}"
        assert (key, value, headers) not in seen, f"duplicate record {row}"
        seen.add((key, value, headers))
        assert t0 - 1000 <= ts <= t1 + 1000, f"timestamp {ts} outside [{t0}, {t1}]: {row}"
        per_part.setdefault(part, []).append((offset, key, by_content[(key, value, headers)]))
    assert seen == set(by_content)

    assert set(per_part) == set(range(PARTITIONS)), "records spread over every partition"
    key_part = {}
    for part, recs in per_part.items():
        recs.sort()
        # offsets 0..n-1 with no gaps, each partition's records in produce order per run
        assert [o for o, _, _ in recs] == list(range(len(recs))), f"partition {part} offsets"
        last = {}
        for _, key, (codec, seq) in recs:
            assert seq > last.get(codec, -1), f"partition {part}: {codec} record {seq} out of order"
            last[codec] = seq
            if key is not None:
                key_part.setdefault(key, set()).add(part)
            if codec == "unkeyed":
                assert part == 1, "kcat -p 1 records land in partition 1"
    assert all(len(ps) == 1 for ps in key_part.values()), key_part

    # consuming one partition from an explicit offset
    out = kcat("-C", "-b", b.bootstrap, "-t", topic, "-p", "1", "-o", "5", "-e", "-q", "-f", "%o\n")
    assert [int(x) for x in out.split()] == list(range(5, len(per_part[1])))

    # kcat -L: both shards as brokers, the topic with its partitions
    port = b.port
    text = kcat("-L", "-b", b.bootstrap)
    assert " 2 brokers:" in text, text
    assert f"broker 0 at 127.0.0.1:{port}" in text, text
    assert f"broker 1 at 127.0.0.1:{port + 1}" in text, text
    assert f'topic "{topic}" with {PARTITIONS} partitions:' in text, text

    md = json.loads(kcat("-L", "-J", "-b", b.bootstrap))
    assert sorted((br["id"], br["name"]) for br in md["brokers"]) == [
        (0, f"127.0.0.1:{port}"), (1, f"127.0.0.1:{port + 1}")]
    [t] = [t for t in md["topics"] if t["topic"] == topic]
    assert "error" not in t, t
    parts = sorted(t["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in parts] == list(range(PARTITIONS))
    for p in parts:
        assert p["leader"] in (0, 1), p
        assert [r["id"] for r in p["replicas"]] == [p["leader"]], p

    # what the broker stored: every codec really used (librdkafka enables lz4 because the
    # broker advertises FindCoordinator)
    assert b.stop() == 0, b.read_log()
    batches = stored_batches(b.data_dir, topic)
    assert set(CODECS) <= {x["codec"] for x in batches}, batches
    assert all(x["magic"] == 2 for x in batches), batches
    assert sum(x["records"] for x in batches) == len(expected)


def test_lz4_batches_are_compressed(broker):
    topic = "kcat-lz4"
    lines = "".join(f"key-{i % 5}:{value_of('lz4', i)}\n" for i in range(50))
    kcat("-P", "-b", broker.bootstrap, "-t", topic, "-K", ":", "-z", "lz4", stdin=lines.encode())
    out = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k:%s\n")
    assert sorted(out.splitlines()) == sorted(lines.splitlines())
    assert broker.stop() == 0, broker.read_log()
    batches = stored_batches(broker.data_dir, topic)
    assert sum(x["records"] for x in batches) == 50
    # librdkafka compresses; a batch that lz4 would not shrink (a lone small record, as the
    # first one often is) it sends uncompressed.
    assert "lz4" in {x["codec"] for x in batches}, batches
    assert all(x["codec"] == "lz4" or x["records"] == 1 for x in batches), batches
