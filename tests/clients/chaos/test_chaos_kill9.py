"""The acknowledgement is a promise, checked under fire: producers (confluent-kafka and the Java
client, idempotence on and off, trickles and bursts) and a consumer run against a broker with
small segments (rolls happen) while it is killed with SIGKILL at random moments and restarted,
RINGLOG_CHAOS_KILLS times (default 50). A Jepsen-style checker reads the whole log after every
restart and checks:
  - every acknowledged (partition, offset, value) is in the log at exactly that offset;
  - no offset ever changes value (each read is compared with every earlier one);
  - no record the consumer saw ever vanishes (the high watermark is the written end);
  - idempotent producers' values appear exactly once (their state survives the crashes).
The seed of the kill schedule is printed; RINGLOG_CHAOS_SEED=N replays a schedule.
"""
import os
import random
import subprocess
import sys
import time
from collections import Counter

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.kafka import java_client_check

HERE = os.path.dirname(os.path.abspath(__file__))
TOPIC = "chaos"
PARTITIONS = 4
KILLS = int(os.environ.get("RINGLOG_CHAOS_KILLS", "50"))
# Producers stop on their own after this long, whatever happens to the test.
PRODUCER_SECONDS = 600


def read_lines(path, tag):
    """Complete `tag partition offset value` lines of a client's output file."""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if line.endswith("\n") and len(parts) == 4 and parts[0] == tag:
                out.append((int(parts[1]), int(parts[2]), parts[3]))
    return out


def read_log(bootstrap):
    """{(partition, offset): value} of every record below each partition's high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-checker", "enable.auto.commit": False,
                  "enable.partition.eof": True, "log_level": 0})
    try:
        ends = {}
        for p in range(PARTITIONS):
            _low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=20)
            ends[p] = high
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS) if ends[p] > 0])
        log, done = {}, {p for p in ends if ends[p] == 0}
        deadline = time.time() + 120
        while len(done) < PARTITIONS:
            assert time.time() < deadline, f"reading the log timed out at {len(log)} records"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    done.add(m.partition())
                    continue
                raise AssertionError(f"reading the log: {m.error()}")
            if m.offset() < ends[m.partition()]:
                log[(m.partition(), m.offset())] = m.value().decode()
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        for p, end in ends.items():
            have = sum(1 for (q, _o) in log if q == p)
            assert have == end, f"partition {p}: {have} records below the high watermark {end}"
        return log
    finally:
        c.close()


class Checker:
    def __init__(self, files, consumer_file):
        self.files, self.consumer_file = files, consumer_file
        self.seen_log = {}
        self.checks = 0

    def check(self, bootstrap, when):
        # Acknowledgements first: everything acknowledged before the read must be in it.
        acked = [a for f in self.files.values() for a in read_lines(f, "ACK")]
        seen = read_lines(self.consumer_file, "SEEN")
        log = read_log(bootstrap)
        lost = [(p, o, v) for p, o, v in acked if (p, o) not in log]
        changed = [(p, o, v, log[(p, o)]) for p, o, v in acked if (p, o) in log and log[(p, o)] != v]
        assert not lost, f"{when}: {len(lost)} of {len(acked)} acknowledged records lost, e.g. {lost[:5]}"
        assert not changed, f"{when}: acknowledged offsets changed value, e.g. {changed[:5]}"
        moved = [(k, v, log.get(k)) for k, v in self.seen_log.items() if log.get(k) != v]
        assert not moved, f"{when}: offsets read earlier changed or vanished, e.g. {moved[:5]}"
        vanished = [(p, o, v, log.get((p, o))) for p, o, v in seen if log.get((p, o)) != v]
        assert not vanished, f"{when}: records the consumer saw are gone or changed, e.g. {vanished[:5]}"
        self.seen_log = log
        self.checks += 1
        return len(acked), len(seen), log


def test_acknowledged_records_survive_kill_9(make_broker):
    seed = int(os.environ.get("RINGLOG_CHAOS_SEED", random.randrange(1 << 30)))
    print(f"chaos seed {seed} (RINGLOG_CHAOS_SEED={seed} replays the kill schedule)")
    rng = random.Random(seed)
    broker = make_broker(shards=2).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"segment.bytes": "8192", "index.interval.bytes": "512"}
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1,
                                  config=configs)])[TOPIC].result(timeout=20)
    del admin
    java = java_client_check()
    chaos = [sys.executable, os.path.join(HERE, "chaos_clients.py")]
    commands = {
        "ck-idem": chaos + ["produce", broker.bootstrap, TOPIC, "ck-idem", "1", str(PRODUCER_SECONDS)],
        "ck-plain": chaos + ["produce", broker.bootstrap, TOPIC, "ck-plain", "0", str(PRODUCER_SECONDS)],
        "java-idem": java + ["chaos-produce", broker.bootstrap, TOPIC, "java-idem", "true", str(PRODUCER_SECONDS)],
        "java-plain": java + ["chaos-produce", broker.bootstrap, TOPIC, "java-plain", "false", str(PRODUCER_SECONDS)],
    }
    outdir = os.path.join(broker.data_dir, "chaos-clients")
    os.makedirs(outdir)
    files, procs = {}, {}
    consumer_file = os.path.join(outdir, "consumer.out")
    try:
        for name, cmd in commands.items():
            files[name] = os.path.join(outdir, f"{name}.out")
            with open(files[name], "w") as out, open(files[name] + ".err", "w") as err:
                procs[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err)
        with open(consumer_file, "w") as out, open(consumer_file + ".err", "w") as err:
            procs["consumer"] = subprocess.Popen(chaos + ["consume", broker.bootstrap, TOPIC, str(PARTITIONS)],
                                                 stdout=out, stderr=err)
        checker = Checker(files, consumer_file)
        # Let every producer get going (the JVM takes a few seconds).
        deadline = time.time() + 60
        while not all(read_lines(f, "ACK") for f in files.values()):
            assert time.time() < deadline, "producers did not start: " + ", ".join(
                f"{n}: {open(f + '.err').read()[-500:]}" for n, f in files.items() if not read_lines(f, "ACK"))
            for name, p in procs.items():
                assert p.poll() is None, f"{name} exited {p.returncode}"
            time.sleep(0.2)
        for i in range(KILLS):
            time.sleep(rng.uniform(0.05, 0.7))
            broker.kill9()
            broker.start()
            acked, seen, log = checker.check(broker.bootstrap, f"after kill {i + 1} (seed {seed})")
            for name, p in procs.items():
                assert p.poll() is None, f"{name} exited {p.returncode} after kill {i + 1}"
        for name in commands:
            procs[name].stdin.close()  # the producers flush and exit
        for name in commands:
            assert procs[name].wait(90) == 0, f"{name}: {open(files[name] + '.err').read()[-2000:]}"
        time.sleep(1)  # the consumer catches up with the last records
        procs["consumer"].terminate()
        procs["consumer"].wait(30)
        acked, seen, log = checker.check(broker.bootstrap, f"at the end (seed {seed})")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    per_producer = Counter(v.rsplit("-", 1)[0] for _p, _o, v in
                           (a for f in files.values() for a in read_lines(f, "ACK")))
    for name in commands:
        assert per_producer[name] >= 200, f"{name} got only {per_producer[name]} acknowledgements: {per_producer}"
    counts = Counter(log.values())
    for name in ("ck-idem", "java-idem"):
        dups = {v: n for v, n in counts.items() if n > 1 and v.rsplit("-", 1)[0] == name}
        assert not dups, f"idempotent producer {name} duplicated (seed {seed}): {list(dups.items())[:5]}"
    segments = [f for p in range(PARTITIONS) for f in os.listdir(os.path.join(broker.data_dir, f"{TOPIC}-{p}"))
                if f.endswith(".log")]
    assert len(segments) > PARTITIONS, f"no segment rolled: {segments}"
    print(f"{KILLS} kills, {checker.checks} checks, {acked} acknowledged, {seen} seen by the consumer, "
          f"{len(log)} records in the log, {len(segments)} segments; per producer {dict(per_producer)}")
