#!/usr/bin/env python3
"""Failover time, ringlog vs Apache Kafka, both as 3-node clusters on loopback at their default
settings (broker.session.timeout.ms 9000 for both): an idempotent acks=all producer writes a
steady stream to one partition (replication factor 3, min.insync.replicas=2); the partition
leader's process is killed with SIGKILL, again and again. Failover time = from the kill to the
first acknowledgement received from the new leader (the first one received more than 50 ms after
the kill: the dead process sends nothing). After each kill the node is started again and the
next kill waits until all three replicas are in sync. At the end a fresh consumer reads the
partition: every acknowledged value must be at its offset.

    scripts/bench/failover-bench.sh [KILLS] [OUT_DIR]   (installs what it needs, builds, runs both)

Prints one Markdown row per target and writes OUT_DIR/failover.json.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOPIC = "failover"
RATE = 200  # messages per second


class Target:
    """A 3-node cluster driven through its script: up, kill a node, start it again."""

    def __init__(self, name, directory):
        self.name, self.dir = name, directory

    def run(self, *args):
        env = dict(os.environ)
        if self.name == "ringlog":
            env["RINGLOG_CLUSTER_DIR"] = self.dir
            cmd = [os.path.join(REPO, "scripts", "cluster.sh"), *args]
        else:
            env["KAFKA_CLUSTER_DIR"] = self.dir
            cmd = [os.path.join(REPO, "scripts", "kafka", "kafka-cluster.sh"), *args]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            logs = "".join(f"--- {f} ---\n" + open(os.path.join(self.dir, f), errors="replace").read()[-4000:]
                           for f in sorted(os.listdir(self.dir)) if f.endswith(".log") or f == "kafka.out")
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}\n{logs}")
        return r.stdout

    def up(self):
        if self.name == "ringlog":
            self.run("up", "3", "1")
            return ",".join(f"127.0.0.1:{19000 + 100 * i}" for i in (1, 2, 3))
        return self.run("up", "3").strip().splitlines()[-1]

    def node_of(self, broker_id):
        return broker_id // 1000 if self.name == "ringlog" else broker_id

    def pid(self, node):
        if self.name == "ringlog":
            with open(os.path.join(self.dir, f"node-{node}.pid")) as f:
                return int(f.read())
        return int(self.run("pid", str(node)).strip())

    def restart(self, node):
        if self.name == "ringlog":
            self.run("up", "3", "1")  # starts the nodes that are not running
        else:
            self.run("start", str(node))

    def down(self):
        self.run("down")


def partition_state(bootstrap):
    """(leader broker id, number of in-sync replicas) of partition 0, or None."""
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=5)
        p = md.topics[TOPIC].partitions.get(0)
        if p is None or p.error is not None:
            return None
        return p.leader, len(p.isrs)
    except Exception:
        return None


def wait_for(what, f, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = f()
        if v:
            return v
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


class Writer:
    def __init__(self, bootstrap):
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 0})
        self.acks = []  # (receive time, offset, value)
        self.errors = []
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def on_delivery(self, err, msg):
        if err is None:
            self.acks.append((time.time(), msg.offset(), msg.value()))
        else:
            self.errors.append(str(err))

    def loop(self):
        i = 0
        next_at = time.time()
        while not self.stop:
            self.p.produce(TOPIC, value=f"v{i}".encode(), partition=0, on_delivery=self.on_delivery)
            i += 1
            next_at += 1 / RATE
            while True:
                left = next_at - time.time()
                self.p.poll(max(0, min(left, 0.01)))
                if left <= 0:
                    break

    def finish(self):
        self.stop = True
        self.thread.join()
        self.p.flush(60)


def read_back(bootstrap, end):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-check", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got = {}
    deadline = time.time() + 60
    while len(got) < end and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got[m.offset()] = m.value()
    c.close()
    return got


def bench(name, kills):
    directory = os.path.join(REPO, "target", f"failover-{name}")
    t = Target(name, directory)
    bootstrap = t.up()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                                      config={"min.insync.replicas": "2"})])[TOPIC].result(timeout=30)
        wait_for("3 replicas in sync", lambda: (partition_state(bootstrap) or (0, 0))[1] == 3, 60)
        w = Writer(bootstrap)
        times = []
        try:
            wait_for("acks flowing", lambda: len(w.acks) > RATE, 30)
            for k in range(kills):
                leader, _ = wait_for("3 replicas in sync", lambda: (lambda s: s if s and s[1] == 3 and s[0] >= 0 else None)(
                    partition_state(bootstrap)), 120)
                time.sleep(2)
                node = t.node_of(leader)
                pid = t.pid(node)
                seen = len(w.acks)
                killed = time.time()
                os.kill(pid, signal.SIGKILL)
                first = wait_for("an acknowledgement from the new leader",
                                 lambda: next((a[0] for a in w.acks[seen:] if a[0] > killed + 0.05), None), 120)
                times.append(first - killed)
                print(f"  {name}: kill {k + 1}/{kills} of node {node} (broker {leader}): "
                      f"first acks=all acknowledgement after {first - killed:.2f} s", file=sys.stderr, flush=True)
                # A killed process may take a moment to go (its io_uring is torn down).
                wait_for("the killed process gone", lambda: not os.path.exists(f"/proc/{pid}"), 60)
                t.restart(node)
        finally:
            w.finish()
        end = max(a[1] for a in w.acks) + 1
        got = read_back(bootstrap, end)
        lost = sum(1 for _, off, v in w.acks if got.get(off) != v)
        return {"target": name, "kills": kills, "failoverSeconds": times,
                "medianSeconds": statistics.median(times), "maxSeconds": max(times),
                "acknowledged": len(w.acks), "failedSends": len(w.errors), "lostOrMoved": lost}
    finally:
        t.down()


def main():
    kills = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(REPO, "target", "failover-bench")
    os.makedirs(out_dir, exist_ok=True)
    results = [bench(name, kills) for name in (os.environ.get("FAILOVER_TARGETS") or "ringlog kafka").split()]
    with open(os.path.join(out_dir, "failover.json"), "w") as f:
        json.dump(results, f, indent=2)
    print("| target | kills | failover median (s) | max (s) | acks=all acknowledged | failed sends | lost or moved |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['target']} | {r['kills']} | {r['medianSeconds']:.2f} | {r['maxSeconds']:.2f} | "
              f"{r['acknowledged']} | {r['failedSends']} | {r['lostOrMoved']} |")
    if any(r["lostOrMoved"] for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
