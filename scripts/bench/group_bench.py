#!/usr/bin/env python3
"""Consumer group rebalances, ringlog vs Apache Kafka 4.1.1, classic vs consumer protocol
(KIP-848), one single-node broker each on loopback, one run.

Contract, the same for every run: a PARTITIONS-partition topic (RF 1) fed RATE records/s spread
evenly over its partitions; MEMBERS librdkafka consumers (own processes,
scripts/bench/group_bench_member.py) in one group; sessions SESSION_MS (classic: the clients'
session.timeout.ms; consumer protocol: the broker's group.consumer.session.timeout.ms, set the
same on both brokers), heartbeats 1 s; classic uses librdkafka's default (eager) assignors,
the consumer protocol the broker's default (uniform). Per target, protocol and round (in
alternation):
- once every partition is consumed and STEADY s have passed, a new member joins. `absorb`: from
  its subscribe() to its first record. `pause`: per partition, the longest gap between two
  batches read in [join - 1 s, join + absorb + 5 s]; the table shows the longest and the median
  over partitions (a stop-the-world rebalance pauses every partition, an incremental one only
  those that move);
- STEADY s later a member is killed -9. `recover`: from the kill until every partition it owned
  is read again by another member; `pause` as above over [kill - 1 s, kill + recover + 5 s].

Protocol `upgrade` measures online migration (KIP-848, `group.consumer.migration.policy`
bidirectional, both brokers' default): the MEMBERS start classic, the member that joins uses the
consumer protocol (its join converts the group; the classic members rejoin it, eagerly giving
up their partitions, and the coordinator's assignor places everyone), and the killed member is a
classic member of the consumer group.

    scripts/bench/group-bench.sh [OUT_DIR]      (default target/group-bench)

Env: MEMBERS (20), PARTITIONS (40), RATE (2000), SESSION_MS (6000), STEADY (10), ROUNDS (2),
TARGETS ("ringlog kafka"), PROTOCOLS ("classic consumer upgrade"). Writes OUT_DIR/groups.json and
OUT_DIR/groups.md.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reassign_bench import log  # noqa: E402
from recompress_bench import Broker  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


MEMBERS = env_int("MEMBERS", 20)
PARTITIONS = env_int("PARTITIONS", 40)
RATE = env_int("RATE", 2000)
SESSION_MS = env_int("SESSION_MS", 6000)
STEADY = env_int("STEADY", 10)
ROUNDS = env_int("ROUNDS", 2)
TARGETS = os.environ.get("TARGETS", "ringlog kafka").split()
PROTOCOLS = os.environ.get("PROTOCOLS", "classic consumer upgrade").split()

SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.min.session.timeout.ms": min(SESSION_MS, 45000),
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 1000,
}


def produce(bootstrap, topic, stop):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    start, i = time.monotonic(), 0
    while not stop.is_set():
        due = start + i / RATE
        now = time.monotonic()
        if due > now:
            p.poll(min(due - now, 0.005))
            continue
        try:
            p.produce(topic, b"x" * 100, partition=i % PARTITIONS)
            i += 1
        except BufferError:
            p.poll(0.01)
    p.flush(10)


class Group:
    def __init__(self, bootstrap, group, topic, out_dir):
        self.args = [bootstrap, group, topic]
        self.dir = out_dir
        self.procs = {}

    def start(self, name, protocol):
        out = os.path.join(self.dir, f"{name}.log")
        self.procs[name] = subprocess.Popen([sys.executable, os.path.join(HERE, "group_bench_member.py"),
                                             *self.args, protocol, str(SESSION_MS), out],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def events(self, name):
        path = os.path.join(self.dir, f"{name}.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]

    def owned(self, name):
        held = set()
        for e in self.events(name):
            if e["ev"] == "assign":
                held |= set(e["partitions"])
            elif e["ev"] in ("revoke", "lost"):
                held -= set(e["partitions"])
        return held

    def reads(self):
        """partition -> sorted times a batch of it was read (by anyone)."""
        out = {}
        for name in self.procs:
            for e in self.events(name):
                if e["ev"] == "got":
                    for p in e["partitions"]:
                        out.setdefault(p, []).append(e["t"])
        return {p: sorted(ts) for p, ts in out.items()}

    def kill(self, name):
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(10)


def wait(what, cond, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def pauses(reads, start, end):
    """Per partition, the longest gap between reads in [start, end] (the window's edges count)."""
    out = []
    for p in range(PARTITIONS):
        ts = [start] + [t for t in reads.get(p, []) if start <= t <= end] + [end]
        out.append(max(b - a for a, b in zip(ts, ts[1:])))
    return out


def run(target, protocol, out_dir):
    settings = dict(SETTINGS)
    broker = Broker(target, out_dir, settings).start()
    work = os.path.join(out_dir, f"members-{target}-{protocol}")
    os.makedirs(work, exist_ok=True)
    for f in os.listdir(work):
        os.remove(os.path.join(work, f))
    stop = threading.Event()
    group = Group(broker.bootstrap, "bench-group", "bench-groups", work)
    # `upgrade`: classic members, then a consumer-protocol member joins
    first, joining = ("classic", "consumer") if protocol == "upgrade" else (protocol, protocol)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("bench-groups", PARTITIONS, 1)])["bench-groups"].result(60)
        producer = threading.Thread(target=produce, args=(broker.bootstrap, "bench-groups", stop), daemon=True)
        producer.start()
        for i in range(MEMBERS):
            group.start(f"m{i}", first)
            time.sleep(0.1)
        wait("every partition read", lambda: len(group.reads()) == PARTITIONS
             and all(group.owned(f"m{i}") for i in range(MEMBERS)), 120)
        time.sleep(STEADY)
        # a member joins
        group.start("new", joining)
        wait("the new member's first record", lambda: any(e["ev"] == "got" for e in group.events("new")), 120)
        evs = group.events("new")
        subscribed = next(e["t"] for e in evs if e["ev"] == "subscribed")
        first = next(e["t"] for e in evs if e["ev"] == "got")
        absorb = first - subscribed
        time.sleep(5)
        join = pauses(group.reads(), subscribed - 1, first + 5)
        time.sleep(STEADY)
        # a member dies
        victim = "m0"
        lost = group.owned(victim)
        killed_at = time.time()
        group.kill(victim)

        def resumed():
            reads = group.reads()
            return all(any(t > killed_at for t in reads.get(p, [])) for p in lost)
        wait("the killed member's partitions read again", resumed, 120)
        reads = group.reads()
        recover = max(min(t for t in reads[p] if t > killed_at) for p in lost) - killed_at if lost else 0.0
        time.sleep(5)
        kill = pauses(group.reads(), killed_at - 1, killed_at + recover + 5)
    finally:
        stop.set()
        group.stop()
        broker.stop()
    return {"target": target, "protocol": protocol, "absorb_s": absorb,
            "join_pause_max_s": max(join), "join_pause_median_s": statistics.median(join),
            "recover_s": recover, "kill_pause_max_s": max(kill), "kill_pause_median_s": statistics.median(kill),
            "victim_partitions": len(lost)}


def main():
    out_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/group-bench")
    os.makedirs(out_dir, exist_ok=True)
    results = []
    for r in range(ROUNDS):
        for protocol in PROTOCOLS:
            for target in TARGETS:
                log(f"round {r + 1}: {target} {protocol}")
                res = run(target, protocol, out_dir)
                res["round"] = r + 1
                log(json.dumps(res))
                results.append(res)
    with open(os.path.join(out_dir, "groups.json"), "w") as f:
        json.dump(results, f, indent=1)
    keys = ["absorb_s", "join_pause_max_s", "join_pause_median_s", "recover_s", "kill_pause_max_s",
            "kill_pause_median_s"]
    rows = [f"| broker | protocol | {' | '.join(keys)} |", "|---|---|" + "---|" * len(keys)]
    for protocol in PROTOCOLS:
        for target in TARGETS:
            runs = [x for x in results if x["target"] == target and x["protocol"] == protocol]
            cells = [f"{statistics.median(x[k] for x in runs):.2f}" for k in keys]
            rows.append(f"| {target} | {protocol} | {' | '.join(cells)} |")
    table = "\n".join(rows)
    header = (f"{MEMBERS} members, {PARTITIONS} partitions, {RATE} records/s, sessions {SESSION_MS} ms, "
              f"medians of {ROUNDS} rounds (seconds)\n\n")
    with open(os.path.join(out_dir, "groups.md"), "w") as f:
        f.write(header + table + "\n")
    print(header + table)


if __name__ == "__main__":
    main()
