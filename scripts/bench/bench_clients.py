#!/usr/bin/env python3
"""Produce N records of SIZE bytes with kcat (librdkafka) and consume them back, against a
bootstrap address, and produce the same file into librdkafka's in-process mock cluster (the
client's own ceiling). Prints one machine-readable line per phase with MB/s and the CPU
seconds per GB of the broker (from /proc/PID/stat) and of the client. Used by
scripts/bench/bench-broker.sh."""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

KCAT_PRODUCE = ["-X", "linger.ms=5", "-X", "batch.size=1000000", "-X", "queue.buffering.max.kbytes=1048576",
                "-X", "acks=1", "-X", "enable.idempotence=false"]
KCAT_CONSUME = ["-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760"]


def proc_cpu_seconds(pid):
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd, pid, stdin=None, stdout=subprocess.DEVNULL):
    b0, c0, t0 = proc_cpu_seconds(pid), children_cpu(), time.time()
    r = subprocess.run(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=600)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {r.stderr.decode()[-2000:]}")
    return time.time() - t0, proc_cpu_seconds(pid) - b0, children_cpu() - c0, r


def line(phase, target, n, size, secs, broker, client):
    gb = n * size / 1e9
    print(f"clients_{phase} target={target} records={n} size={size} MBps={gb * 1000 / secs:.1f} "
          f"broker_cpu_s_per_GB={broker / gb:.2f} client_cpu_s_per_GB={client / gb:.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    a = ap.parse_args()
    with tempfile.NamedTemporaryFile(dir=os.path.dirname(os.path.abspath(__file__)) + "/../../target", suffix=".records") as f:
        row = os.urandom(a.size // 2).hex()[: a.size - 1].encode() + b"\n"
        for _ in range(a.records):
            f.write(row)
        f.flush()
        topic = f"bench-{int(time.time())}"
        subprocess.run(["target/release/ringlog", "topic", "--bootstrap-server", a.bootstrap, "create", topic,
                        "--partitions", "2"], check=True, capture_output=True)
        with open(f.name, "rb") as src:
            secs, b, c, _ = timed(["kcat", "-b", a.bootstrap, "-P", "-t", topic, *KCAT_PRODUCE], a.broker_pid, stdin=src)
        line("produce", "ringlog", a.records, a.size, secs, b, c)
        secs, b, c, r = timed(["kcat", "-b", a.bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-q", "-f", "%o\n",
                               *KCAT_CONSUME], a.broker_pid, stdout=subprocess.PIPE)
        got = r.stdout.count(b"\n")
        if got != a.records:
            sys.exit(f"consumed {got} of {a.records} records")
        line("consume", "ringlog", a.records, a.size, secs, b, c)
        with open(f.name, "rb") as src:
            secs, b, c, _ = timed(["kcat", "-b", "127.0.0.1:1", "-X", "test.mock.num.brokers=2", "-P", "-t", topic, *KCAT_PRODUCE], None, stdin=src)
        line("produce", "librdkafka-mock", a.records, a.size, secs, 0.0, c)


if __name__ == "__main__":
    main()
