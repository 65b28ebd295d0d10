#!/usr/bin/env python3
"""Client quotas against a flooding tenant, ringlog vs Apache Kafka 4.1.1, one single-node
broker each on loopback (the same brokers as recompress_bench.py), one run.

Contract, the same for both: acks=1, replication factor 1, each broker at its default flush
settings; client id `flooder` has `producer_byte_rate` QUOTA_MB MB/s (set with Kafka's
kafka-configs on both). Per target and round (targets alternating):
- `alone`: the tenant (client id `tenant`, no quota) produces TENANT_RATE records/s of
  VALUE_BYTES to its own topic for DURATION s; its publish latency (send to delivery report) is
  taken over [WARMUP, DURATION);
- `flooded`: the same, while the flooder (own process) tries to send 10 × QUOTA_MB MB/s to its
  own topic; the flooder's acknowledged rate over [WARMUP, DURATION) is compared with its quota
  (the first seconds go at once on both brokers: a quota's rate is measured over at least 10 s).

Nothing is pinned: the 2 cores are shared by the broker, the tenant and the flooder, as they
are for both targets.

    scripts/bench/quota-bench.sh [OUT_DIR]      (default target/quota-bench)

Env: QUOTA_MB (2), TENANT_RATE (2000), VALUE_BYTES (1024), DURATION (40), WARMUP (15),
ROUNDS (2), TARGETS ("ringlog kafka"). Writes OUT_DIR/quota.json and OUT_DIR/quota.md.
"""
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reassign_bench import log, percentiles  # noqa: E402
from recompress_bench import Broker  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


QUOTA = env_int("QUOTA_MB", 2) * 1_000_000
TENANT_RATE = env_int("TENANT_RATE", 2000)
VALUE_BYTES = env_int("VALUE_BYTES", 1024)
DURATION = env_int("DURATION", 40)
WARMUP = env_int("WARMUP", 15)
ROUNDS = env_int("ROUNDS", 2)
TARGETS = os.environ.get("TARGETS", "ringlog kafka").split()


def send(bootstrap, topic, client_id, rate_bytes, out):
    """Sends VALUE_BYTES records at `rate_bytes` B/s for DURATION s; puts (acks as
    (seconds since start, bytes, latency s)) on `out`."""
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 1,
                  "compression.type": "none"})
    value = b"v" * VALUE_BYTES
    acks = []
    start = time.monotonic()
    per = VALUE_BYTES / rate_bytes
    i = 0

    def done(err, m, sent):
        if not err:
            now = time.monotonic()
            acks.append((now - start, len(m.value()), now - sent))
    while True:
        now = time.monotonic()
        if now - start >= DURATION:
            break
        due = start + i * per
        if due > now:
            p.poll(min(due - now, 0.002))
            continue
        try:
            sent = time.monotonic()
            p.produce(topic, value, on_delivery=lambda err, m, sent=sent: done(err, m, sent))
            i += 1
        except BufferError:
            p.poll(0.001)
        if i % 200 == 0:
            p.poll(0)
    p.flush(30)
    out.put(acks)


def set_quota(bootstrap):
    cmd = (f"source {REPO}/scripts/kafka/kafka-common.sh; kafka_tool kafka.admin.ConfigCommand "
           f"--bootstrap-server {bootstrap} --alter --entity-type clients --entity-name flooder "
           f"--add-config producer_byte_rate={QUOTA}")
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"kafka-configs: {r.stdout}{r.stderr}")


def step(broker, flooded):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    suffix = time.time_ns()
    topics = [f"tenant-{suffix}", f"flood-{suffix}"]
    for f in admin.create_topics([NewTopic(t, num_partitions=4, replication_factor=1) for t in topics]).values():
        f.result(30)
    time.sleep(1)
    qt, qf = multiprocessing.Queue(), multiprocessing.Queue()
    procs = [multiprocessing.Process(target=send, args=(broker.bootstrap, topics[0], "tenant",
                                                        TENANT_RATE * VALUE_BYTES, qt))]
    if flooded:
        procs.append(multiprocessing.Process(target=send, args=(broker.bootstrap, topics[1], "flooder",
                                                                10 * QUOTA, qf)))
    for p in procs:
        p.start()
    tenant = qt.get(timeout=DURATION + 120)
    flood = qf.get(timeout=DURATION + 120) if flooded else []
    for p in procs:
        p.join()
    lat = [lt for t, _, lt in tenant if WARMUP <= t < DURATION]
    row = {k: v for k, v in (percentiles(lat) or {}).items() if k in ("p50", "p99", "p99.9")}
    row["tenant_records_s"] = len(lat) / (DURATION - WARMUP)
    if flooded:
        row["flooder_of_quota"] = sum(n for t, n, _ in flood if WARMUP <= t < DURATION) / (DURATION - WARMUP) / QUOTA
    return row


def main():
    out_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "target", "quota-bench"))
    os.makedirs(out_dir, exist_ok=True)
    results = []
    for rnd in range(ROUNDS):
        for name in (TARGETS if rnd % 2 == 0 else list(reversed(TARGETS))):
            broker = Broker(name, out_dir).start()
            try:
                set_quota(broker.bootstrap)
                time.sleep(2)
                for flooded in (False, True):
                    row = step(broker, flooded)
                    row.update({"target": name, "round": rnd, "step": "flooded" if flooded else "alone"})
                    log(json.dumps(row))
                    results.append(row)
            finally:
                broker.stop()
    with open(os.path.join(out_dir, "quota.json"), "w") as f:
        json.dump(results, f, indent=1)

    def med(name, stepname, key):
        v = [r[key] for r in results if r["target"] == name and r["step"] == stepname and r.get(key) is not None]
        return statistics.median(v) if v else None
    lines = [f"Tenant at {TENANT_RATE} records/s of {VALUE_BYTES} B; flooder at 10 x its producer_byte_rate "
             f"({QUOTA / 1e6:.0f} MB/s); acks=1, RF 1; over [{WARMUP}, {DURATION}) s; medians of {ROUNDS} rounds", "",
             "| target | tenant p50 / p99 / p99.9 ms alone | flooded | p99.9 change | flooder / quota |",
             "|---|---|---|---|---|"]
    for name in TARGETS:
        a = [med(name, "alone", k) for k in ("p50", "p99", "p99.9")]
        f = [med(name, "flooded", k) for k in ("p50", "p99", "p99.9")]
        fq = med(name, "flooded", "flooder_of_quota")
        change = (f[2] / a[2] - 1) * 100 if a[2] and f[2] else None
        fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        lines.append(f"| {name} | {' / '.join(map(fmt, a))} | {' / '.join(map(fmt, f))} | "
                     f"{'-' if change is None else f'{change:+.0f} %'} | {'-' if fq is None else f'{fq:.2f}'} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "quota.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
