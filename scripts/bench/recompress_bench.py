#!/usr/bin/env python3
"""Broker-side recompression (topic `compression.type`), ringlog vs Apache Kafka 4.1.1, one
single-node broker each on loopback, one run.

Contract, the same for both: one topic of PARTITIONS partitions, replication factor 1, acks=1,
each broker at its default flush settings (no fsync per message), the producer (confluent-kafka,
linger.ms 5) sending **uncompressed** batches of VALUE_BYTES-byte text-like records (about 4:1
compressible). The topic's `compression.type` is the case: `producer` (stored as sent, the
baseline: no recompression) or `zstd` / `lz4` / `gzip` at each broker's default level (ringlog's
and Kafka's defaults are the same: zstd 3, lz4 9, gzip 6), so the broker decompresses nothing and
compresses every batch.

Per target and round (targets alternating), per case, two steps:
- `rate`: RATE_MB MB/s of payload for DURATION s — broker CPU-s per GB of payload and the
  produce latency (send to delivery report) p50/p99/p99.9;
- `max`: as fast as one producer process sends for DURATION s — payload MB/s acknowledged and
  CPU-s/GB.
Broker CPU: utime + stime of the broker process over the step. Nothing is pinned: the 2 cores
are shared by the broker and the producer, as they are for both targets.

    scripts/bench/recompress-bench.sh [OUT_DIR]      (default target/recompress-bench)

Env: CASES ("producer zstd lz4 gzip"), RATE_MB (20), VALUE_BYTES (1024), DURATION (15),
PARTITIONS (4), ROUNDS (2), TARGETS ("ringlog kafka"). Writes OUT_DIR/recompress.json and
OUT_DIR/recompress.md (medians over rounds) and prints the table.
"""
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reassign_bench import log, percentiles  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


CASES = os.environ.get("CASES", "producer zstd lz4 gzip").split()
RATE_MB = env_int("RATE_MB", 20)
VALUE_BYTES = env_int("VALUE_BYTES", 1024)
DURATION = env_int("DURATION", 15)
PARTITIONS = env_int("PARTITIONS", 4)
ROUNDS = env_int("ROUNDS", 2)
TARGETS = os.environ.get("TARGETS", "ringlog kafka").split()
RINGLOG_PORT = 39300
KAFKA_PORT = 39392
WORDS = ("order customer amount currency status shipped pending region warehouse item price "
         "quantity discount total invoice created updated account payment method").split()


def values(n):
    """n text-like values of VALUE_BYTES (words from a small vocabulary and digits: JSON-ish)."""
    rnd = random.Random(7)
    out = []
    for _ in range(n):
        s = []
        size = 0
        while size < VALUE_BYTES:
            w = f'"{rnd.choice(WORDS)}":{rnd.randint(0, 99999)},'
            s.append(w)
            size += len(w)
        out.append("".join(s)[:VALUE_BYTES].encode())
    return out


class Broker:
    """`settings`: broker properties beyond the defaults, by Kafka's names (both brokers)."""

    def __init__(self, name, out_dir, settings=None):
        self.name = name
        self.settings = dict(settings or {})
        self.dir = os.path.join(out_dir, f"data-{name}")
        self.proc = None
        self.pid = None

    def start(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        if self.name == "ringlog":
            binary = os.environ.get("RINGLOG_BIN", os.path.join(REPO, "target", "release", "ringlog"))
            self.log = open(os.path.join(self.dir, "broker.log"), "wb")
            sets = [a for k, v in self.settings.items() for a in ("--set", f"{k}={v}")]
            self.proc = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(self.dir, "data"), "--shards", "1",
                                          "--listen", f"127.0.0.1:{RINGLOG_PORT}", *sets],
                                         stdout=self.log, stderr=self.log)
            self.pid = self.proc.pid
            self.bootstrap = f"127.0.0.1:{RINGLOG_PORT}"
        else:
            env = dict(os.environ, KAFKA_DATA_DIR=self.dir, KAFKA_PORT=str(KAFKA_PORT),
                       KAFKA_CONTROLLER_PORT=str(KAFKA_PORT + 1),
                       KAFKA_EXTRA_PROPS="\n".join(f"{k}={v}" for k, v in self.settings.items()))
            r = subprocess.run([os.path.join(REPO, "scripts", "kafka", "kafka-start.sh")], env=env,
                               capture_output=True, text=True, timeout=180)
            if r.returncode != 0:
                raise RuntimeError(f"kafka-start.sh: {r.stdout}{r.stderr}")
            self.pid = int(open(os.path.join(self.dir, "kafka.pid")).read().strip())
            self.bootstrap = f"127.0.0.1:{KAFKA_PORT}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.time() + 60
        while True:
            try:
                admin.list_topics(timeout=5)
                return self
            except Exception:  # noqa: BLE001 - not up yet
                if time.time() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self):
        if self.name == "ringlog":
            self.proc.terminate()
            self.proc.wait(60)
        else:
            subprocess.run([os.path.join(REPO, "scripts", "kafka", "kafka-stop.sh")],
                           env=dict(os.environ, KAFKA_DATA_DIR=self.dir), capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)

    def cpu_seconds(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap, topic, rate_mb, duration, out):
    """Sends for `duration` s (at rate_mb MB/s, or as fast as it can when 0); puts
    (acknowledged payload bytes, latencies in s, errors) on `out`."""
    vals = values(512)
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "compression.type": "none",
                  "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
    lat, acked, errors = [], [0], [0]

    def done(err, m, sent):
        if err:
            errors[0] += 1
        else:
            acked[0] += len(m.value())
            lat.append(time.monotonic() - sent)
    start = time.monotonic()
    i = 0
    per_record = VALUE_BYTES / (rate_mb * 1e6) if rate_mb else 0
    while True:
        now = time.monotonic()
        if now - start >= duration:
            break
        if per_record:
            due = start + i * per_record
            if due > now:
                p.poll(min(due - now, 0.005))
                continue
        try:
            sent = time.monotonic()
            p.produce(topic, vals[i % len(vals)], partition=i % PARTITIONS,
                      on_delivery=lambda err, m, sent=sent: done(err, m, sent))
            i += 1
        except BufferError:
            p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(60)
    out.put((acked[0], time.monotonic() - start, lat, errors[0]))


def run_case(broker, case, step):
    topic = f"r-{case}-{step}-{time.time_ns()}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1,
                                  config={"compression.type": case})])[topic].result(30)
    time.sleep(1)
    # A short untimed warm-up: connections, metadata, the JIT on Kafka's side.
    q = multiprocessing.Queue()
    w = multiprocessing.Process(target=produce, args=(broker.bootstrap, topic, 5, 2, q))
    w.start()
    q.get(timeout=120)
    w.join()
    q = multiprocessing.Queue()
    cpu0 = broker.cpu_seconds()
    w = multiprocessing.Process(target=produce, args=(broker.bootstrap, topic, RATE_MB if step == "rate" else 0,
                                                      DURATION, q))
    w.start()
    acked, elapsed, lat, errors = q.get(timeout=DURATION + 180)
    w.join()
    cpu = broker.cpu_seconds() - cpu0
    row = {"mb_s": acked / elapsed / 1e6, "cpu_s_per_gb": cpu / (acked / 1e9) if acked else None,
           "errors": errors}
    if step == "rate":
        row.update({k: v for k, v in (percentiles(lat) or {}).items() if k in ("p50", "p99", "p99.9")})
    return row


def median(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main():
    out_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "target", "recompress-bench"))
    os.makedirs(out_dir, exist_ok=True)
    results = []
    for rnd in range(ROUNDS):
        for name in (TARGETS if rnd % 2 == 0 else list(reversed(TARGETS))):
            broker = Broker(name, out_dir).start()
            try:
                for case in CASES:
                    for step in ("rate", "max"):
                        row = run_case(broker, case, step)
                        row.update({"target": name, "round": rnd, "case": case, "step": step})
                        log(json.dumps(row))
                        results.append(row)
            finally:
                broker.stop()
    with open(os.path.join(out_dir, "recompress.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = [f"Broker recompression of uncompressed batches, {VALUE_BYTES}-byte records, {PARTITIONS} partitions, "
             f"acks=1, RF 1, medians of {ROUNDS} rounds", "",
             "| topic compression.type | target | MB/s at max | CPU-s/GB at max | CPU-s/GB at "
             f"{RATE_MB} MB/s | p50 / p99 / p99.9 ms at {RATE_MB} MB/s |",
             "|---|---|---|---|---|---|"]
    for case in CASES:
        for name in TARGETS:
            mx = [r for r in results if r["target"] == name and r["case"] == case and r["step"] == "max"]
            rt = [r for r in results if r["target"] == name and r["case"] == case and r["step"] == "rate"]
            fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
            lines.append(f"| {case} | {name} | {fmt(median(mx, 'mb_s'))} | {fmt(median(mx, 'cpu_s_per_gb'))} | "
                         f"{fmt(median(rt, 'cpu_s_per_gb'))} | {fmt(median(rt, 'p50'))} / {fmt(median(rt, 'p99'))} / "
                         f"{fmt(median(rt, 'p99.9'))} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "recompress.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
