#!/usr/bin/env python3
"""Transactional produce, ringlog vs Apache Kafka 4.1.1, both as 3-node clusters on loopback
(scripts/cluster.sh, scripts/kafka/kafka-cluster.sh), one run.

Contract, the same for both: topic `txn` (PARTITIONS partitions) with replication factor 3 and
min.insync.replicas=2, acks=all, each broker at its default flush settings (no fsync per
message), `__transaction_state` replicated 3 times with min.isr 2 (both brokers' defaults).
Each side runs the transaction protocol its defaults and the client negotiate: ringlog
transaction version 0/1 (it finalizes no `transaction.version`), Kafka 4.1.1 whatever it
finalizes with librdkafka (the JSON records nothing of it; see the results' README).

Per target and round (targets alternating), per rate (RATES, transactions per second):
- `txn`: one confluent-kafka transactional producer (linger.ms 5) runs a transaction of
  TXN_RECORDS records of VALUE_BYTES every 1/rate s for DURATION s: begin, produce (round robin
  over the partitions), commit. Commit latency = commit_transaction()'s call to its return (the
  records are flushed in it, then EndTxn and the coordinator's prepare write);
- `plain`: the same records from an idempotent acks=all producer, flush() in place of the commit
  (the same workload without transactions: its "commit" is the flush);
- before the clock starts, one untimed unit of the same kind (connections, metadata, producer
  id set up);
- a read_committed consumer (own process) stamps each record's arrival; end-to-end latency =
  arrival - the send time in the record's value;
- broker CPU: utime + stime of the three broker processes over the step, per GB of payload.

    scripts/bench/txn-bench.sh [OUT_DIR]      (default target/txn-bench)

Env: RATES ("20 100"), TXN_RECORDS (100), VALUE_BYTES (100), DURATION (20), PARTITIONS (6),
ROUNDS (2), TXN_TARGETS ("ringlog kafka"). Writes OUT_DIR/txn.json and OUT_DIR/txn.md (medians
over rounds) and prints the table. Nothing is pinned: 2 cores are shared by every process.
"""
import json
import multiprocessing
import os
import statistics
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_END
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reassign_bench import Target, log, percentiles, wait_for  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOPIC = "txn"


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


RATES = [int(r) for r in os.environ.get("RATES", "20 100").split()]
RECORDS = env_int("TXN_RECORDS", 100)
VALUE_BYTES = env_int("VALUE_BYTES", 100)
DURATION = env_int("DURATION", 20)
PARTITIONS = env_int("PARTITIONS", 6)
ROUNDS = env_int("ROUNDS", 2)
TARGETS = os.environ.get("TXN_TARGETS", "ringlog kafka").split()


def broker_pids(t):
    if t.name == "ringlog":
        files = [os.path.join(t.dir, f"node-{i}.pid") for i in (1, 2, 3)]
    else:
        files = [os.path.join(t.dir, f"broker-{i}", "kafka.pid") for i in (1, 2, 3)]
    return [int(open(f).read().strip()) for f in files]


def cpu_seconds(pids):
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (after the comm field)
    return total / tick


def consume(bootstrap, stop, out):
    """A read_committed consumer from the end of every partition: each record's end-to-end
    latency (arrival - its send time), until `stop`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-bench-{time.time()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10})
    c.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in range(PARTITIONS)])
    lat = []
    while not stop.is_set():
        m = c.poll(0.05)
        if m is not None and m.error() is None:
            lat.append(time.time() - float(m.value()[:20]))
    c.close()
    out.put(lat)


def value():
    return (b"%.6f" % time.time()).ljust(20) + b"x" * max(0, VALUE_BYTES - 20)


def run_step(bootstrap, mode, rate, pids):
    stop = multiprocessing.Event()
    out = multiprocessing.Queue()
    reader = multiprocessing.Process(target=consume, args=(bootstrap, stop, out))
    reader.start()
    time.sleep(3)  # the reader assigned at the end
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"}
    if mode == "txn":
        p = Producer({**conf, "transactional.id": f"txn-bench-{time.time()}"})
        p.init_transactions(30)
    else:
        p = Producer({**conf, "enable.idempotence": True})
    # One untimed unit first: connections, metadata, the producer id and (txn) the first
    # AddPartitionsToTxn are set up outside the measurement.
    if mode == "txn":
        p.begin_transaction()
    for i in range(PARTITIONS):
        p.produce(TOPIC, value=value(), partition=i)
    if mode == "txn":
        p.commit_transaction(30)
    else:
        assert p.flush(30) == 0
    commits, behind = [], 0
    cpu0 = cpu_seconds(pids)
    start = time.time()
    n = 0
    while True:
        due = start + n / rate
        if due - start >= DURATION:
            break
        now = time.time()
        if now < due:
            time.sleep(due - now)
        elif now - due > 1 / rate:
            behind += 1
        if mode == "txn":
            p.begin_transaction()
        for i in range(RECORDS):
            p.produce(TOPIC, value=value(), partition=(n * RECORDS + i) % PARTITIONS)
        t0 = time.time()
        if mode == "txn":
            p.commit_transaction(30)
        else:
            assert p.flush(30) == 0
        commits.append(time.time() - t0)
        n += 1
    elapsed = time.time() - start
    cpu = cpu_seconds(pids) - cpu0
    time.sleep(2)
    stop.set()
    e2e = out.get(timeout=60)
    reader.join(30)
    payload_gb = n * RECORDS * VALUE_BYTES / 1e9
    return {
        "mode": mode, "rate": rate, "transactions": n, "per_s": n / elapsed, "late": behind,
        "commit_ms": percentiles(commits),
        "e2e_ms": percentiles(e2e), "records_read": len(e2e),
        "records_sent": n * RECORDS, "cpu_s": cpu, "cpu_s_per_gb": cpu / payload_gb,
    }


def run_target(name, rnd):
    t = Target(name)
    t.dir = os.path.join(REPO, "target", f"txn-{name}")
    log(f"{name} round {rnd}: up")
    bootstrap = t.up()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
        wait_for("topic leaders", lambda: all(
            p.leader >= 0 for p in admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.values()), 60)
        pids = broker_pids(t)
        # A first transaction creates __transaction_state and warms both sides up.
        warm = Producer({"bootstrap.servers": bootstrap, "transactional.id": "warm-up"})
        warm.init_transactions(120)
        warm.begin_transaction()
        warm.produce(TOPIC, value=value())
        warm.commit_transaction(60)
        steps = []
        for rate in RATES:
            for mode in ("txn", "plain"):
                log(f"{name} round {rnd}: {mode} at {rate}/s")
                steps.append(run_step(bootstrap, mode, rate, pids))
        return steps
    finally:
        t.down()


def median(rows, path):
    vals = []
    for r in rows:
        v = r
        for k in path:
            v = v[k]
        vals.append(v)
    return statistics.median(vals)


def report(results):
    lines = ["| target | rate (txn/s) | mode | achieved/s | commit p50 | commit p99.9 | e2e p50 | e2e p99.9 | broker CPU-s/GB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in TARGETS:
        for rate in RATES:
            for mode in ("txn", "plain"):
                rows = [s for rnd in results[name] for s in rnd if s["rate"] == rate and s["mode"] == mode]
                if not rows:
                    continue
                lines.append(
                    f"| {name} | {rate} | {mode} | {median(rows, ['per_s']):.1f} "
                    f"| {median(rows, ['commit_ms', 'p50']):.1f} ms | {median(rows, ['commit_ms', 'p99.9']):.1f} ms "
                    f"| {median(rows, ['e2e_ms', 'p50']):.1f} ms | {median(rows, ['e2e_ms', 'p99.9']):.1f} ms "
                    f"| {median(rows, ['cpu_s_per_gb']):.0f} |")
    return "\n".join(lines)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "target", "txn-bench")
    os.makedirs(out_dir, exist_ok=True)
    results = {name: [] for name in TARGETS}
    for rnd in range(ROUNDS):
        for name in TARGETS:
            results[name].append(run_target(name, rnd))
    table = report(results)
    settings = {"RATES": RATES, "TXN_RECORDS": RECORDS, "VALUE_BYTES": VALUE_BYTES,
                "DURATION": DURATION, "PARTITIONS": PARTITIONS, "ROUNDS": ROUNDS}
    with open(os.path.join(out_dir, "txn.json"), "w") as f:
        json.dump({"settings": settings, "results": results}, f, indent=1)
    with open(os.path.join(out_dir, "txn.md"), "w") as f:
        f.write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
