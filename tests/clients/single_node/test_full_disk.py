"""A full disk (issue 12, item 4): data and the broker's own log output on one small file system,
filled by producers. The broker must not die (its log lines cannot be written either), every
acknowledged record must be readable at its offset, produce gets an error instead of an
acknowledgement, and a topic of 10 partitions takes records on a disk of a few hundred MB
(before preallocation steps grew with the segment, ten 64 MiB reservations took the disk).
Then space is freed (a ballast file the test put there first is removed): writes resume on
every partition without a restart, and every record acknowledged before and after is served at
its offset.

Needs root (mount -o loop) and mkfs.ext4; scripts/test.sh runs as root here.
"""
import os
import shutil
import subprocess
import tempfile
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker import REPO

FS_MB = 300
BALLAST_MB = 48
VALUE = 8000
PARTITIONS = 10


@pytest.fixture
def small_fs():
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root and mkfs.ext4")
    work = tempfile.mkdtemp(prefix="full-disk-", dir=os.path.join(REPO, "target"))
    image, mnt = os.path.join(work, "fs.img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    with open(image, "wb") as f:
        f.truncate(FS_MB << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", image], check=True)
    subprocess.run(["mount", "-o", "loop", image, mnt], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], check=False)
        shutil.rmtree(work, ignore_errors=True)


def free_mb(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / (1 << 20)


def recorder(acked, failed):
    """A delivery callback filling `acked` {(partition, offset): value} and `failed`."""
    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed.append(err)
    return on_delivery


def log_tail(b):
    """The broker's warnings and errors and what it said about reopening logs, last 40."""
    with open(b.log_path, "rb") as f:
        lines = f.read().decode(errors="replace").splitlines()
    keep = [l for l in lines if "append failed" not in l and "DEBUG" not in l]
    return "\n".join(keep[-40:])


def read_all(bootstrap, part, want_count, group):
    """Every record of partition `part` from offset 0, until `want_count` are read or 60 s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    c.assign([TopicPartition("fill", part, 0)])
    got = {}
    end = time.time() + 60
    while len(got) < want_count and time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got[m.offset()] = m.value()
    c.close()
    return got


def check_acked(bootstrap, acked, group):
    for part in range(PARTITIONS):
        want = sorted((o, v) for (pp, o), v in acked.items() if pp == part)
        if not want:
            continue
        got = read_all(bootstrap, part, want[-1][0] + 1, f"{group}-{part}")
        for o, v in want:
            assert got.get(o) == v, f"partition {part} offset {o}: acknowledged value not served"


def test_a_full_disk_refuses_writes_keeps_reads_and_the_broker(make_broker, small_fs):
    data = os.path.join(small_fs, "data")
    os.mkdir(data)
    ballast = os.path.join(small_fs, "ballast")
    with open(ballast, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, BALLAST_MB << 20)
    # Broker log output on the same file system (Broker writes it into the data dir), at
    # debug level so that it has plenty to write when the disk is full.
    b = make_broker(shards=1, data_dir=data)
    b.env = {"RUST_LOG": "debug"}
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("fill", PARTITIONS, 1)])["fill"].result(timeout=10)

    acked, failed = {}, []
    on_delivery = recorder(acked, failed)

    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 5,
                  "message.timeout.ms": 10_000, "retries": 0, "enable.idempotence": False})
    i = 0
    deadline = time.time() + 120
    while time.time() < deadline and len(failed) < 200:
        p.produce("fill", value=b"%09d" % i + b"v" * (VALUE - 9), partition=i % PARTITIONS,
                  on_delivery=on_delivery)
        i += 1
        if i % 200 == 0:
            p.poll(0)
            if p.flush(15) != 0 or free_mb(small_fs) < 1 and failed:
                break
    p.flush(30)
    assert b.proc.poll() is None, f"broker exited with {b.proc.returncode}"
    assert free_mb(small_fs) < 16, f"the disk did not fill: {free_mb(small_fs):.0f} MB free"
    assert failed, "no produce was refused on a full disk"
    assert len(acked) * VALUE > (FS_MB // 2) << 20, f"only {len(acked)} records of {VALUE} B acknowledged on a {FS_MB} MB disk"
    codes = {e.code() for e in failed}
    print(f"{len(acked)} acknowledged, {len(failed)} refused (codes {codes}), {free_mb(small_fs):.1f} MB free")

    # Every acknowledged record is served at its offset while the disk is still full.
    check_acked(b.bootstrap, acked, "full")
    assert b.proc.poll() is None, "broker died while serving reads on a full disk"

    # Space returns: writes resume on every partition (the failed logs are reopened; the
    # producer retries KAFKA_STORAGE_ERROR until then), nothing acknowledged is lost.
    os.remove(ballast)
    assert free_mb(small_fs) >= BALLAST_MB - 1
    later, later_failed = {}, []
    on_later = recorder(later, later_failed)

    p2 = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 5,
                   "message.timeout.ms": 60_000, "retry.backoff.ms": 500,
                   "enable.idempotence": False})
    resumed = 20 * PARTITIONS
    for j in range(resumed):
        p2.produce("fill", value=b"later-%09d" % j + b"w" * 1000, partition=j % PARTITIONS,
                   on_delivery=on_later)
    assert p2.flush(90) == 0, "records still unacknowledged 90 s after space returned"
    assert not later_failed, f"writes did not resume: {later_failed[:3]}\n{log_tail(b)}"
    assert len(later) == resumed
    assert {pp for pp, _ in later} == set(range(PARTITIONS))
    print(f"after freeing {BALLAST_MB} MB: {len(later)} more acknowledged")
    check_acked(b.bootstrap, {**acked, **later}, "resumed")
    assert b.proc.poll() is None, "broker died after space returned"
