"""Replication under faults, judged like Jepsen: etcd and three ringlog nodes on loopback, topics
with replication factor 3 and min.insync.replicas=2, an idempotent librdkafka producer with
acks=all writing unique values while the partition leader's node is killed -9 again and again
(RINGLOG_FAILOVERS, 10 by default; scripts/soak/failover-soak.sh runs 200), paused past its lease, or
two followers die. After the faults heal a fresh consumer reads every partition up to its high
watermark, and the checker asks: is every acknowledged value at exactly the offset it was
acknowledged at, no offset holding two values, no value twice? The replicas' stored batches must
be identical (offsets and CRCs) below the high watermark on every node."""
import collections
import concurrent.futures
import os
import shutil
import signal
import struct
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support import wire
from support.broker import Broker, free_port_block
from support.etcd import Etcd
from support.kafka import GO_MODULE, java_client_check
from support.metrics import metric
from support.waiting import wait_for

SESSION_MS = 3000
FAILOVERS = int(os.environ.get("RINGLOG_FAILOVERS", "10"))


class Cluster:
    def __init__(self, net=None):
        self.net = net
        self.etcd = Etcd(host=net.subnet + ".1") if net else Etcd()
        self.nodes = {}
        self.dirs = {}
        self.all = []
        # Each node's Prometheus endpoint (loopback clusters only), kept across restarts.
        self.metrics_ports = {}
        # Broker settings every node starts with beyond the ones below.
        self.extra = {}

    def start(self, node_id):
        make = (lambda **kw: NetBroker(self.net, node_id, **kw)) if self.net else Broker
        settings = {
            "node.id": node_id, "metadata.store": "etcd", "metadata.etcd.endpoints": self.etcd.endpoint,
            "cluster.id": "repl", "broker.session.timeout.ms": SESSION_MS,
            "replica.lag.time.max.ms": 5000, "group.initial.rebalance.delay.ms": 0,
            "log.cleaner.backoff.ms": 200, **self.extra}
        if not self.net:
            port = self.metrics_ports.setdefault(node_id, free_port_block(1))
            settings["metrics.listen"] = f"127.0.0.1:{port}"
        b = make(shards=1, data_dir=self.dirs.get(node_id), settings=settings)
        if node_id not in self.dirs:
            self.dirs[node_id] = b.data_dir
            self.all.append(b)  # the first owns (and removes) the data dir
        self.nodes[node_id] = b.start()
        return b

    def start_all(self):
        """Nodes 1-3, once each lists all three brokers (a topic needs them for its replicas)."""
        for n in (1, 2, 3):
            self.start(n)
        for b in self.nodes.values():
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            wait_for("three brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=15)

    def bootstrap(self):
        return ",".join(b.bootstrap for b in self.nodes.values() if b.proc.poll() is None)

    def partitions(self, topic, via=None):
        """{partition: (leader node, [isr nodes])} as a live node reports it (node `via`: one
        that was not just paused or cut off, whose own view may be stale for a moment)."""
        # Nodes learn a new topic within their poll of etcd (25 ms): ask again for a moment.
        deadline = time.time() + 5
        while True:
            bootstrap = self.nodes[via].bootstrap if via else self.bootstrap()
            try:
                md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
            except KafkaException:
                # The request went to a paused node that never answers: ask again.
                md = None
            t = md.topics.get(topic) if md else None
            # librdkafka may send the request to any broker it learnt of, such as the paused or
            # cut-off node whose view is stale: only `via`'s answer counts (-1: the bootstrap).
            answered_by_via = md and (not via or md.orig_broker_id == -1
                                      or md.orig_broker_id // 1000 == via)
            if t is not None and t.error is None and answered_by_via:
                break
            if time.time() > deadline:
                return {}
            time.sleep(0.1)
        return {p.id: (p.leader // 1000 if p.leader >= 0 else -1, sorted(r // 1000 for r in p.isrs))
                for p in t.partitions.values()}

    def fetch_requests(self, node_id):
        """Fetch requests node `node_id` (one shard) answered so far (its Prometheus endpoint)."""
        return metric(self.metrics_ports[node_id], "ringlog_requests_total", default=0,
                      shard="0", request="Fetch")

    def assert_no_request_loop(self, seconds=3, most_per_second=200):
        """With no client producing or consuming, each node answers only its followers' long
        polls (replica.fetch.wait.max.ms, 500 ms: a few a second). The wedged-node fault of
        2026-12-05 was a follower and a leader trading ~33 000 empty fetches a second."""
        live = [n for n, b in self.nodes.items() if b.proc.poll() is None]
        before = {n: self.fetch_requests(n) for n in live}
        time.sleep(seconds)
        rates = {n: (self.fetch_requests(n) - before[n]) / seconds for n in live}
        assert max(rates.values()) < most_per_second, f"Fetch requests a second on each node, idle: {rates}"

    def stop(self):
        for b in self.nodes.values():
            if b.proc.poll() is None:
                b.proc.send_signal(signal.SIGCONT)  # a test that failed while one was paused
            b.stop()
        for b in self.all:
            b.cleanup()
        self.etcd.stop()


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.stop()


def create(c, topic, partitions=2):
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[topic].result(timeout=15)
    wait_for("every replica in sync", lambda: in_sync(c.partitions(topic), partitions), timeout=15)


def fresh_watermarks(c, topic, partition):
    """The partition's (low, high) watermarks from its leader through a new consumer, or None
    while no leader is known. A new client each time: librdkafka keeps a partition it was once
    told has no leader (LEADER_NOT_AVAILABLE from a node that has not applied an election yet)
    in its metadata cache and answers _UNKNOWN_PARTITION from there without asking again."""
    consumer = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": "watermarks"})
    try:
        w = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    except KafkaException as e:
        if e.args[0].code() in (KafkaError._UNKNOWN_PARTITION, KafkaError.LEADER_NOT_AVAILABLE):
            return None
        raise
    finally:
        consumer.close()
    return w


def in_sync(partitions, count):
    """Whether all `count` partitions are listed, each with its three replicas in sync."""
    return len(partitions) == count and all(len(isr) == 3 for _, isr in partitions.values())


class Writer:
    """Unique values, acks=all, idempotent; every acknowledgement recorded with its offset."""

    def __init__(self, c, topic, partitions, **config):
        self.topic, self.partitions = topic, partitions
        self.acked = {}      # value -> (partition, offset)
        self.ack_times = []  # (time, partition)
        self.failed = []
        self.sent = 0
        self.stop = threading.Event()
        self.producer = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 2,
                                  "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000,
                                  **config})
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def on_ack(self, err, msg):
        if err is not None:
            self.failed.append(str(err))
            return
        self.acked[msg.value()] = (msg.partition(), msg.offset())
        self.ack_times.append((time.time(), msg.partition()))

    def run(self):
        while not self.stop.is_set():
            v = f"v{self.sent}".encode()
            try:
                self.producer.produce(self.topic, value=v, partition=self.sent % self.partitions,
                                      on_delivery=self.on_ack)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def first_ack_after(self, t, partition):
        return next((at for at, p in list(self.ack_times) if at > t and p == partition), None)

    def finish(self):
        self.stop.set()
        self.thread.join()
        assert self.producer.flush(120) == 0, "every send answered"


def read_all(c, topic, partitions, acked=()):
    """{partition: [(offset, value)]} from offset 0 up to each high watermark. With `acked`
    ((partition, offset) of every acknowledgement), first waits up to 30 s for each high
    watermark to pass the last acknowledged offset: a leader just elected (the preferred
    replica taking leadership back) learns the high watermark only as its followers fetch, so
    a read at once could end below acknowledged records. Records really lost never get there:
    the read then ends where the log does and the checker reports them."""
    client_log = ClientLog()
    consumer = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": f"check-{time.time()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "debug": "metadata,topic,fetch"}, logger=client_log)
    last_acked = {}
    for p, o in acked:
        last_acked[p] = max(last_acked.get(p, -1), o)
    out = {}
    for p in range(partitions):
        settle = time.time() + 30
        high = None
        # Leadership may still move (the preferred replica takes it back): ask again.
        while True:
            try:
                marks = fresh_watermarks(c, topic, p)
                if marks is not None:  # None: no leader known yet
                    high = marks[1]
            except KafkaException as e:
                if time.time() > settle:
                    raise AssertionError(f"partition {p}: {e}; the consumer's metadata: "
                                         f"{describe_metadata(consumer, topic)}") from e
            if high is not None and (high > last_acked.get(p, -1) or time.time() > settle):
                break
            assert time.time() < settle + 30, f"partition {p}: no high watermark in 60 s"
            time.sleep(0.2)
        consumer.assign([TopicPartition(topic, p, 0)])
        got = []
        errors = []
        deadline = time.time() + 60
        while (not got or got[-1][0] < high - 1) and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error():
                errors.append(str(m.error()))
            elif m is not None:
                got.append((m.offset(), m.value()))
        if not got or got[-1][0] < high - 1:
            # The checker will call the rest lost: say what the consumer and the nodes saw.
            print(f"partition {p}: read {len(got)} records, last offset "
                  f"{got[-1][0] if got else None}, high watermark {high}; consumer errors "
                  f"{errors[-20:]}; metadata {describe_metadata(consumer, topic)}")
            print(f"librdkafka's log:\n{client_log}")
            for n, d in c.dirs.items():
                folder = os.path.join(d, f"{topic}-{p}")
                files = sorted((f, os.path.getsize(os.path.join(folder, f)))
                               for f in os.listdir(folder)) if os.path.isdir(folder) else None
                print(f"node {n}: {folder}: {files}\nlog tail:\n{c.nodes[n].read_log()[-3000:]}")
                print(f"node {n}: threads:\n{thread_stacks(c.nodes[n].proc)}")
        out[p] = got
    consumer.close()
    return out


def thread_stacks(proc):
    """Each thread's name, state and kernel wait, and (with gdb) its stack: whether a node that
    does not answer is blocked, spinning or waiting (failure diagnostics)."""
    if proc.poll() is not None:
        return "exited"
    out = []
    for tid in sorted(os.listdir(f"/proc/{proc.pid}/task")):
        try:
            with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{proc.pid}/task/{tid}/wchan") as f:
                wchan = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out.append(f"{tid} {name} state {fields[0]} utime {fields[11]} stime {fields[12]} wchan {wchan}")
    if shutil.which("ss"):
        sockets = subprocess.run(["ss", "-tnpmi"], capture_output=True, text=True).stdout
        mine = sockets.split("\n")
        keep = [l + "\n" + (mine[i + 1] if i + 1 < len(mine) else "")
                for i, l in enumerate(mine) if f"pid={proc.pid}," in l]
        out.append("sockets:\n" + "\n".join(keep))
        # Whose the peers are: every TCP socket on the machine with its process.
        out.append("all sockets:\n" + subprocess.run(["ss", "-tnp"], capture_output=True, text=True).stdout)
    if shutil.which("gdb"):
        try:
            bt = subprocess.run(["gdb", "-p", str(proc.pid), "-batch", "-ex", "set print frame-arguments none",
                                 "-ex", "thread apply all bt 25"],
                                capture_output=True, text=True, timeout=120).stdout
            out.append(bt[-60000:])
        except subprocess.TimeoutExpired:
            out.append("gdb timed out")
    return "\n".join(out)


class ClientLog:
    """A logging.Logger stand-in for librdkafka's log lines: keeps the first 300 (metadata and
    leader updates come first) and the last 200 (a stuck fetch repeats itself)."""

    def __init__(self):
        self.first = []
        self.last = collections.deque(maxlen=200)
        self.dropped = 0

    def log(self, level, fmt, *args):
        line = f"{time.time():.3f} " + (fmt % args if args else fmt)
        if len(self.first) < 300:
            self.first.append(line)
        else:
            if len(self.last) == self.last.maxlen:
                self.dropped += 1
            self.last.append(line)

    def __str__(self):
        return "\n".join(self.first + [f"... {self.dropped} lines left out ..."] + list(self.last))


def describe_metadata(client, topic):
    """What `client`'s librdkafka learns of `topic` and the cluster now (failure diagnostics)."""
    try:
        md = client.list_topics(topic, timeout=5)
    except KafkaException as e:
        return f"no metadata: {e}"
    t = md.topics.get(topic)
    parts = None if t is None else {p.id: (p.leader, p.isrs, str(p.error)) for p in t.partitions.values()}
    return (f"answered by {md.orig_broker_id}, controller {md.controller_id}, brokers "
            f"{sorted(md.brokers)}, topic error {None if t is None else t.error}, partitions {parts}")


class ClientProducers:
    """The Java client's and franz-go's idempotent acks=all producers, as processes
    (`chaos-produce`), each printing "ACK partition offset value" per acknowledgement."""

    def __init__(self, c, topic, outdir):
        go_module = GO_MODULE
        go_bin = os.path.join(go_module, "bin", "clientcheck")
        r = subprocess.run(["go", "build", "-mod=readonly", "-o", go_bin, "."], cwd=go_module,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"go build failed:\n{r.stdout}\n{r.stderr}"
        commands = {
            "java-idem": java_client_check() + ["chaos-produce", c.bootstrap(), topic, "java-idem", "true", "600"],
            "go-idem": [go_bin, "chaos-produce", c.bootstrap(), topic, "go-idem", "600"],
        }
        self.files, self.procs = {}, {}
        for name, cmd in commands.items():
            self.files[name] = os.path.join(outdir, f"{name}.out")
            with open(self.files[name], "w") as out, open(self.files[name] + ".err", "w") as err:
                self.procs[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err)

    def acks(self):
        out = {}
        for f in self.files.values():
            with open(f) as lines:
                for line in lines:
                    parts = line.split()
                    if len(parts) == 4 and parts[0] == "ACK":
                        out[parts[3].encode()] = (int(parts[1]), int(parts[2]))
        return out

    def wait_started(self):
        wait_for("the Java and franz-go producers acknowledged", lambda: all(
            any(v.startswith(n.encode()) for v in self.acks()) for n in self.files), timeout=90)

    def finish(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.stdin.close()
        for name, p in self.procs.items():
            try:
                code = p.wait(120)
            except subprocess.TimeoutExpired:
                p.kill()
                code = "killed after 120 s"
            assert code == 0, f"{name} exited {code}: {open(self.files[name] + '.err').read()[-2000:]}"


def check(writer, read, more_acks=None):
    """The Jepsen-style verdict: no lost, moved or duplicated acknowledged write."""
    at = {}
    dups = []
    for p, records in read.items():
        offsets = [o for o, _ in records]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets repeat or go back"
        for o, v in records:
            if v in at:
                dups.append((v, at[v], (p, o)))
            at[v] = (p, o)
    acked = dict(writer.acked)
    acked.update(more_acks or {})
    lost = {v: where for v, where in acked.items() if at.get(v) != where}
    assert not dups, f"{len(dups)} values stored twice, e.g. {dups[:3]}"
    assert not lost, f"{len(lost)} acknowledged values lost or moved, e.g. {list(lost.items())[:3]}"
    return len(at)


def stored(data_dir, topic, partition):
    """[(base offset, last offset delta, crc)] of the batches in one replica's segment files."""
    folder = os.path.join(data_dir, f"{topic}-{partition}")
    out = []
    for seg in sorted(f for f in os.listdir(folder) if f.endswith(".log")):
        with open(os.path.join(folder, seg), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            if length <= 0:
                break
            (crc,) = struct.unpack_from(">I", data, pos + 17)
            (delta,) = struct.unpack_from(">i", data, pos + 23)
            out.append((base, delta, crc))
            pos += 12 + length
    return out


def judge(c, w, topic, partitions):
    """After the faults healed: a fresh consumer reads everything back for the checker, then
    every node stops and the replicas are compared."""
    if not c.net:
        c.assert_no_request_loop()
    read = read_all(c, topic, partitions, w.acked.values())
    check(w, read)
    check_replicas_identical(c, topic, read)


def wait_rejoined(c, topic, old, what):
    """Until `old` (paused or cut off, whose own view may be stale) is in partition 0's ISR
    again, as another node reports it."""
    other = next(n for n in (1, 2, 3) if n != old)
    wait_for(what, lambda: len(c.partitions(topic, via=other).get(0, (-1, []))[1]) == 3, timeout=60)


def check_replicas_identical(c, topic, read):
    for b in c.nodes.values():
        b.stop()
    for p, records in read.items():
        hw = records[-1][0] + 1 if records else 0
        copies = {n: [x for x in stored(d, topic, p) if x[0] + x[1] < hw] for n, d in c.dirs.items()}
        first = next(iter(copies.values()))
        for n, batches in copies.items():
            assert batches == first, f"partition {p}: node {n}'s batches below {hw} differ"
        assert first and first[-1][0] + first[-1][1] == hw - 1, f"partition {p}: replicas end below {hw}"
        # Each replica checkpointed its high watermark when it stopped: never above the
        # committed end, and the leader's is exactly it.
        marks = {n: checkpointed_hw(d, topic, p) for n, d in c.dirs.items()}
        assert max(marks.values()) == hw and all(m <= hw for m in marks.values()), (p, hw, marks)


def checkpointed_hw(data_dir, topic, partition):
    with open(os.path.join(data_dir, f"{topic}-{partition}", "high-watermark-checkpoint")) as f:
        lines = f.read().split()
    assert lines[:2] == ["0", "1"], lines
    return int(lines[2])


def test_killing_the_leader_again_and_again_loses_no_acknowledged_write(cluster):
    c = cluster
    c.start_all()
    create(c, "jepsen")
    w = Writer(c, "jepsen", 2)
    clients = ClientProducers(c, "jepsen", c.dirs[1])
    times = []
    try:
        clients.wait_started()
        for i in range(FAILOVERS):
            wait_for("acks flowing", lambda: len(w.acked) > 100 * (i + 1), timeout=60)
            leader, _ = c.partitions("jepsen")[i % 2]
            killed_at = time.time()
            c.nodes[leader].kill9()
            wait_for(f"failover {i}: a new leader for partition {i % 2}",
                     lambda: w.first_ack_after(killed_at + 0.05, i % 2), timeout=SESSION_MS / 1000 + 20)
            times.append(w.first_ack_after(killed_at + 0.05, i % 2) - killed_at)
            c.start(leader)
            wait_for(f"failover {i}: node {leader} back in every ISR",
                     lambda: in_sync(c.partitions("jepsen"), 2), timeout=60)
    finally:
        w.finish()
        clients.finish()
    c.assert_no_request_loop()
    others = clients.acks()
    times.sort()
    print(f"{FAILOVERS} failovers; kill to first acks=all ack on the new leader: "
          f"median {times[len(times) // 2]:.2f} s, max {times[-1]:.2f} s (lease {SESSION_MS} ms)")
    assert times[-1] < SESSION_MS / 1000 + 5
    # A killed node's listener refuses connections: its lease is revoked (liveness.rs) well
    # before etcd would expire it.
    assert times[len(times) // 2] < SESSION_MS / 1000, "failover waited for the lease to expire"
    read = read_all(c, "jepsen", 2, list(w.acked.values()) + list(others.values()))
    assert check(w, read, others) >= len(w.acked) + len(others)
    per = {n: sum(1 for v in others if v.startswith(n.encode())) for n in ("java-idem", "go-idem")}
    print(f"acknowledged: librdkafka {len(w.acked)}, Java client {per['java-idem']}, franz-go {per['go-idem']}")
    assert min(per.values()) >= 200, per
    check_replicas_identical(c, "jepsen", read)


def test_a_leader_paused_past_its_lease_is_fenced_and_follows(cluster):
    c = cluster
    c.start_all()
    create(c, "zombie", partitions=1)
    # A paused broker keeps its connections open: librdkafka gives up on what it sent there
    # after socket.timeout.ms (60 s by default) and sends it again to the new leader.
    w = Writer(c, "zombie", 1, **{"socket.timeout.ms": 3000, "request.timeout.ms": 3000})
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 200, timeout=30)
        old, _ = c.partitions("zombie")[0]
        c.nodes[old].proc.send_signal(signal.SIGSTOP)
        paused = time.time()
        other = next(n for n in (1, 2, 3) if n != old)
        wait_for("a new leader while the old one sleeps",
                 lambda: c.partitions("zombie", via=other).get(0, (old,))[0] not in (old, -1),
                 timeout=30)
        wait_for("acks on the new leader", lambda: w.first_ack_after(paused + 0.05, 0), timeout=30)
        # A client with stale metadata still writes to the paused leader: its produce waits in
        # the socket and is read the moment the node resumes, before it hears of the new leader.
        # The node's lease is gone and its followers left: it refuses (an acks=1 write it took
        # would be truncated when it follows, as in Kafka).
        stale = wire.connect(c.nodes[old].bootstrap)
        stale.sendall(wire.produce_v3("zombie", 0, wire.record_batch([b"to-the-zombie"]), acks=1))
        c.nodes[old].proc.send_signal(signal.SIGCONT)
        answer = wire.read_response(stale)
        stale.close()
        assert answer is not None, "the resumed leader closed the connection"
        assert wire.produce_v3_result(answer)[0] == 6, \
            f"NOT_LEADER_OR_FOLLOWER expected, got {answer.hex()}\n" + c.nodes[old].read_log()[-3000:]
        wait_rejoined(c, "zombie", old, "the old leader back in the ISR as a follower")
        # The old leader is the preferred replica: once in sync it leads again, in a new epoch.
        time.sleep(1)
    finally:
        w.finish()
    judge(c, w, "zombie", 1)


def test_acks_all_needs_min_insync_replicas(cluster):
    c = cluster
    c.start_all()
    create(c, "minisr", partitions=1)
    leader, _ = c.partitions("minisr")[0]
    for n in (1, 2, 3):
        if n != leader:
            c.nodes[n].kill9()
    wait_for("the ISR shrunk to the leader", lambda: c.partitions("minisr").get(0, (-1, []))[1] == [leader], timeout=30)
    p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "message.timeout.ms": 3000,
                  "retries": 0})
    errors = []
    p.produce("minisr", value=b"alone", partition=0,
              on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].name() == "NOT_ENOUGH_REPLICAS", errors
    acks1 = Producer({"bootstrap.servers": c.bootstrap(), "acks": 1})
    ok = []
    acks1.produce("minisr", value=b"one", partition=0, on_delivery=lambda err, msg: ok.append(err))
    acks1.flush(10)
    assert ok == [None], "acks=1 does not need the ISR"
    for n in (1, 2, 3):
        if n != leader:
            c.start(n)
    wait_for("the ISR back to 3", lambda: len(c.partitions("minisr").get(0, (-1, []))[1]) == 3, timeout=60)
    done = []
    p.produce("minisr", value=b"together", partition=0, on_delivery=lambda err, msg: done.append(err))
    p.flush(10)
    assert done == [None], done
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    four = admin.create_topics([NewTopic("four", num_partitions=1, replication_factor=4)])["four"]
    try:
        four.result(timeout=10)
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR, e
    except concurrent.futures.TimeoutError:
        raise AssertionError(f"CreateTopics not answered in 10 s; {describe_metadata(admin, 'minisr')}")
    else:
        raise AssertionError("a replication factor above the node count was accepted")


def test_sigterm_moves_leadership_before_the_node_leaves(cluster):
    """Controlled shutdown: the stopping node hands its leadership to the rest of the ISR first,
    so acknowledgements resume on the new leader well within the lease, nothing lost."""
    c = cluster
    c.start_all()
    create(c, "graceful", partitions=1)
    w = Writer(c, "graceful", 1)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 200, timeout=30)
        leader, _ = c.partitions("graceful")[0]
        stopped_at = time.time()
        assert c.nodes[leader].stop() == 0
        wait_for("acks on the new leader", lambda: w.first_ack_after(stopped_at + 0.05, 0), timeout=30)
        resumed = w.first_ack_after(stopped_at + 0.05, 0) - stopped_at
        print(f"SIGTERM of the leader to the first acks=all ack on the new leader: {resumed:.2f} s")
        assert resumed < SESSION_MS / 1000, "leadership moved before the lease would have expired"
        c.start(leader)
        wait_for("back in the ISR", lambda: len(c.partitions("graceful").get(0, (-1, []))[1]) == 3, timeout=60)
    finally:
        w.finish()
    judge(c, w, "graceful", 1)


def test_etcd_and_then_the_controller_killed_during_acks_all_traffic(cluster):
    """Losing etcd stops metadata changes, not the data path: acks=all acknowledgements go on
    while etcd is down past the lease; when it is back the nodes register again. Then the
    controller's node is killed -9: another node is elected and moves its partitions."""
    c = cluster
    c.start_all()
    create(c, "etcdloss")
    w = Writer(c, "etcdloss", 2)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 200, timeout=30)
        c.etcd.kill9()
        down_at = time.time()
        time.sleep(2 * SESSION_MS / 1000)
        during = len([1 for at, _ in list(w.ack_times) if at > down_at + 0.5])
        c.etcd.restart()
        assert during > 100, f"only {during} acknowledgements while etcd was down"
        wait_for("every replica in sync again", lambda: in_sync(c.partitions("etcdloss"), 2), timeout=60)
        admin = AdminClient({"bootstrap.servers": c.bootstrap()})  # kept until .result()
        described = admin.describe_cluster(request_timeout=10).result(timeout=15)
        controller = described.controller.id // 1000
        killed_at = time.time()
        c.nodes[controller].kill9()
        wait_for("acks on every partition after the controller's death",
                 lambda: all(w.first_ack_after(killed_at + 0.05, p) for p in (0, 1)), timeout=30)
        c.start(controller)
        wait_for("back in every ISR", lambda: in_sync(c.partitions("etcdloss"), 2), timeout=60)
    finally:
        w.finish()
    judge(c, w, "etcdloss", 2)


class NetNodes:
    """Three network namespaces on a bridge, one per node, so one node can be cut off from its
    peers and etcd (its veth taken down) without stopping it. etcd listens on the bridge."""

    def __init__(self):
        tag = os.getpid() % 200 + 20
        self.prefix = f"rl{tag}"
        self.bridge = f"{self.prefix}br"
        self.subnet = f"10.77.{tag}"
        self.ns = {}
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for n in (1, 2, 3):
            ns, veth = f"{self.prefix}n{n}", f"{self.prefix}v{n}"
            ip("netns", "add", ns)
            ip("link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
            ip("link", "set", f"{veth}p", "netns", ns)
            ip("link", "set", veth, "master", self.bridge)
            ip("link", "set", veth, "up")
            ip("-n", ns, "addr", "add", f"{self.subnet}.{10 + n}/24", "dev", f"{veth}p")
            ip("-n", ns, "link", "set", f"{veth}p", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            self.ns[n] = ns

    def host(self, n):
        return f"{self.subnet}.{10 + n}"

    def cut(self, n, up=False):
        ip("link", "set", f"{self.prefix}v{n}", "up" if up else "down")

    def remove(self):
        for n, ns in self.ns.items():
            subprocess.run(["ip", "link", "del", f"{self.prefix}v{n}"], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


def ip(*args):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert r.returncode == 0, f"ip {' '.join(args)}: {r.stderr}"


class NetBroker(Broker):
    """A ringlog node inside a network namespace, listening on its address there."""

    def __init__(self, net, node_id, **kw):
        super().__init__(**kw)
        self.net, self.node_id = net, node_id
        self.command_prefix = ["ip", "netns", "exec", net.ns[node_id]]

    @property
    def bootstrap(self):
        return f"{self.net.host(self.node_id)}:{self.port}"

    def _port_open(self, port):
        import socket
        with socket.socket() as s:
            s.settimeout(0.2)
            return s.connect_ex((self.net.host(self.node_id), port)) == 0



@pytest.fixture
def net_cluster():
    net = NetNodes()
    c = Cluster(net)
    yield c
    try:
        c.stop()
    finally:
        net.remove()


def test_a_leader_cut_off_from_its_peers_and_etcd_is_fenced_and_follows(net_cluster):
    """Nodes in their own network namespaces: the leader's link is taken down (it runs on, cut
    off from the followers, etcd and the clients) past its lease; the others elect a new leader
    and acknowledge on; when the link is back the old leader learns it was deposed, truncates what
    it alone had, and rejoins the ISR. Nothing acknowledged is lost."""
    c = net_cluster
    c.start_all()
    create(c, "cut", partitions=1)
    w = Writer(c, "cut", 1, **{"socket.timeout.ms": 3000, "request.timeout.ms": 3000})
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 200, timeout=30)
        old, _ = c.partitions("cut")[0]
        cut_at = time.time()
        c.net.cut(old)
        wait_for("acks on a new leader", lambda: w.first_ack_after(cut_at + 0.05, 0), timeout=30)
        took = w.first_ack_after(cut_at + 0.05, 0) - cut_at
        time.sleep(SESSION_MS / 1000)
        c.net.cut(old, up=True)
        wait_rejoined(c, "cut", old, "the cut-off node back in the ISR")
        print(f"leader cut off: acks=all resumed on the new leader after {took:.2f} s")
    finally:
        w.finish()
    judge(c, w, "cut", 1)


def test_a_restarted_replica_serves_what_was_committed_from_its_checkpoint(cluster):
    """Every node stopped, then only the last one (alone in the ISR, below min.insync.replicas,
    so its high watermark cannot move) started again: consumers still read every acknowledged
    record, because the replica starts from its checkpointed high watermark, not from zero."""
    c = cluster
    c.start_all()
    create(c, "restart", partitions=1)
    p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "enable.idempotence": True})
    acked = {}
    for i in range(500):
        p.produce("restart", value=f"r{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: err or acked.__setitem__(msg.value(), msg.offset()))
    assert p.flush(30) == 0 and len(acked) == 500
    del p
    time.sleep(1)  # followers learn the high watermark with their next fetch
    for n in (1, 2, 3):
        assert c.nodes[n].stop() == 0
    c.start(3)
    wait_for("node 3 leads alone", lambda: c.partitions("restart", via=3).get(0, (-1, []))[0] == 3, timeout=30)
    consumer = Consumer({"bootstrap.servers": c.nodes[3].bootstrap, "group.id": "restart-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("restart", 0, 0)])
    seen = {}
    deadline = time.time() + 20
    while len(seen) < 500 and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            seen[m.value()] = m.offset()
    consumer.close()
    assert seen == acked, f"{len(seen)} of {len(acked)} acknowledged records readable after the restart"


def test_committed_offsets_survive_the_coordinators_node(cluster):
    """`__consumer_offsets` is replicated (offsets.topic.replication.factor, 3) and commits wait
    for its ISR: kill -9 the node leading a group's offsets partition, and the coordinator moves
    with the leadership (the new leader loads the partition) with every committed offset."""
    c = cluster
    c.start_all()
    create(c, "commits", partitions=2)
    consumer = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": "survivor",
                         "enable.auto.commit": False})
    committed = [TopicPartition("commits", 0, 42), TopicPartition("commits", 1, 7)]
    consumer.commit(offsets=committed, asynchronous=False)
    consumer.close()
    offsets = c.partitions("__consumer_offsets")
    assert offsets and all(len(isr) == 3 for _, isr in offsets.values()), offsets
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    coordinator = admin.describe_consumer_groups(["survivor"])["survivor"].result(timeout=15).coordinator.id // 1000
    c.nodes[coordinator].kill9()
    other = next(n for n in (1, 2, 3) if n != coordinator)

    def fetched():
        probe = Consumer({"bootstrap.servers": c.nodes[other].bootstrap, "group.id": "survivor"})
        try:
            got = probe.committed([TopicPartition("commits", 0), TopicPartition("commits", 1)], timeout=5)
            return [(t.partition, t.offset) for t in got]
        except KafkaException:
            return None
        finally:
            probe.close()

    wait_for("the committed offsets from the new coordinator", lambda: fetched() == [(0, 42), (1, 7)], timeout=40)


def test_a_coordinator_paused_past_its_lease_does_not_answer_from_its_stale_state(cluster):
    """A group coordinator stopped (SIGSTOP) past its lease loses the group's offsets partition;
    a commit lands on the new coordinator meanwhile. An OffsetFetch waiting in the paused
    node's socket is read the moment it resumes, before it has caught up with the metadata:
    it must not answer from its stale state (the old offset would send a consumer back) —
    NOT_COORDINATOR, the client looks again."""
    c = cluster
    c.start_all()
    create(c, "stale", partitions=1)
    group = "stale-reader"
    s = wire.connect(c.bootstrap().split(",")[0])

    def found():
        answer = wire.find_coordinator_v0(s, group)
        return answer if answer[0] == 0 else None

    _, node_id, host, port = wait_for("the group's coordinator", found, timeout=30)
    s.close()
    old = node_id // 1000
    coordinator = wire.connect(f"{host}:{port}")
    # (COORDINATOR_NOT_AVAILABLE while the offsets partition's replicas come in sync)
    wait_for("offset 10 committed", timeout=30, interval=0.2,
             check=lambda: wire.offset_commit_v2(coordinator, group, -1, "", [("stale", 0, 10, "")]) == {("stale", 0): 0})
    c.nodes[old].proc.send_signal(signal.SIGSTOP)
    other = next(n for n in (1, 2, 3) if n != old)

    def commit_elsewhere():
        try:
            probe = wire.connect(c.nodes[other].bootstrap)
            try:
                err, nid, h, p = wire.find_coordinator_v0(probe, group)
            finally:
                probe.close()
            if err != 0 or nid // 1000 == old:
                return False
            new = wire.connect(f"{h}:{p}")
            try:
                return wire.offset_commit_v2(new, group, -1, "", [("stale", 0, 20, "")]) == {("stale", 0): 0}
            finally:
                new.close()
        except OSError:
            return False

    wait_for("offset 20 committed on the new coordinator", commit_elsewhere, timeout=40, interval=0.5)
    # Sent to the paused node: read the moment it resumes.
    coordinator.sendall(wire.request(9, 1, wire.offset_fetch_v1_body(group, "stale", [0])))
    c.nodes[old].proc.send_signal(signal.SIGCONT)
    answer = wire.read_response(coordinator)
    coordinator.close()
    assert answer is not None, "the resumed coordinator closed the connection"
    offset, _, error = wire.parse_offset_fetch_v1(wire.response_body(answer))[0]
    assert (offset, error) != (10, 0), "the resumed coordinator answered from its stale state: offset 10"
    assert error == 16 or (offset, error) == (20, 0), (offset, error)  # NOT_COORDINATOR


def test_deleted_records_stay_deleted_after_the_leader_dies(cluster):
    """DeleteRecords moves the leader's log start offset; followers move theirs from the
    leader's fetch answers, so after the leader is killed the new leader serves from the same
    start: the deleted records do not come back."""
    c = cluster
    c.start_all()
    create(c, "purged", partitions=1)
    p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all"})
    for i in range(200):
        p.produce("purged", f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    res = list(admin.delete_records([TopicPartition("purged", 0, 120)]).values())[0].result(30)
    assert res.low_watermark == 120

    def start_offsets():
        out = {}
        for node_id, b in c.nodes.items():
            if b.proc.poll() is None:
                d = os.path.join(b.data_dir, "purged-0", "log-start-offset-checkpoint")
                out[node_id] = open(d).read().split() if os.path.exists(d) else None
        return out
    # Followers learn the leader's start with their next fetch (within replica.fetch.wait.max.ms).
    wait_for("every replica moved its log start", lambda: all(
        v == ["0", "1", "120"] for v in start_offsets().values()), timeout=30)
    leader, _ = c.partitions("purged")[0]
    c.nodes[leader].kill9()
    for node_id in list(c.nodes):
        if c.nodes[node_id].proc.poll() is None:
            wait_for(f"node {node_id} knows the new leader", lambda: c.partitions(
                "purged", via=node_id).get(0, (leader, []))[0] not in (leader, -1), timeout=30)
    low, high = wait_for("watermarks from the new leader",
                         lambda: (lambda w: w if w and w[1] == 200 else None)(
                             fresh_watermarks(c, "purged", 0)), timeout=30)
    assert (low, high) == (120, 200)


def test_a_compacted_topic_is_cleaned_on_every_replica_and_survives_failover(cluster):
    """Replication factor 3, cleanup.policy=compact, small segments: the leader and both
    followers clean their own copies (followers copy the leader's batches with their offset
    gaps); after the leader is killed -9, the new leader serves every key's latest acknowledged
    record, and no acknowledged offset holds another value."""
    c = cluster
    c.start_all()
    topic = "compacted"
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3, config={
        "min.insync.replicas": "2", "cleanup.policy": "compact", "segment.bytes": "32768",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(timeout=15)
    wait_for("every replica in sync", lambda: in_sync(c.partitions(topic), 1), timeout=15)
    acked = {}  # offset -> value
    failed = []

    def on_ack(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            failed.append(err)

    # Batches well under a segment (a larger one is refused, as by Kafka).
    p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.size": 8000})
    for i in range(4000):
        key = f"k{(i * 13) % 40}"
        p.produce(topic, key=key.encode(), value=f"{key}:{i}".encode(), partition=0, on_delivery=on_ack)
        p.poll(0)
    assert p.flush(60) == 0
    assert not failed and len(acked) == 4000, failed[:3]

    def cleaned(b):
        return any("log cleaned" in line and f"/{topic}-0 " in line for line in b.read_log().splitlines())

    try:
        wait_for("every replica cleaned its copy", lambda: all(cleaned(b) for b in c.nodes.values()), timeout=60)
    except AssertionError:
        raise AssertionError("\n".join(f"node {n}: {[l for l in b.read_log().splitlines() if 'clean' in l or 'ERROR' in l][-5:]}"
                                       for n, b in c.nodes.items()))
    leader, _ = c.partitions(topic)[0]
    c.nodes[leader].kill9()
    del c.nodes[leader]
    wait_for("a new leader", lambda: c.partitions(topic).get(0, (-1, []))[0] not in (-1, leader), timeout=60)
    # The new leader learns the high watermark as its follower fetches: wait for it to pass the
    # last acknowledged offset before judging (read_all gives up after 30 s and reports).
    got = read_all(c, topic, 1, [(0, o) for o in acked])[0]
    values = [v for _, v in got]
    assert len(values) == len(set(values)), "a value twice"
    assert len(got) < len(acked), "nothing was compacted"
    at = dict(got)
    latest = {}
    for offset, value in acked.items():
        key = value.split(b":")[0]
        latest[key] = max(latest.get(key, -1), offset)
        if offset in at:
            assert at[offset] == value, f"offset {offset}: {value} became {at[offset]}"
    for key, offset in latest.items():
        assert at.get(offset) == acked[offset], \
            f"{key}: latest acknowledged record at {offset} gone (read {len(got)} records, last at {got[-1][0] if got else None})"


def test_a_consumer_protocol_group_moves_with_its_coordinator(cluster, tmp_path):
    """KIP-848 across coordinator failover: librdkafka members (group.protocol=consumer) consume a
    replicated topic while the node coordinating their group is killed -9 (the group's records
    in `__consumer_offsets` are read by the new leader, which goes on from the same epochs) and a
    member is killed -9 too. Judged from the members' logs: no partition owned by two members at
    once, every acknowledged record consumed, committed offsets never going back."""
    from support.consumer_groups import (CONSUMER_PROTOCOL, CommittedWatch, Members, Producing,
                                         assert_never_owned_twice, describe, ownership)
    c = cluster
    c.extra = dict(CONSUMER_PROTOCOL)
    c.start_all()
    topic, group, partitions = "moving848", "g-moving", 6
    create(c, topic, partitions=partitions)
    producing = Producing(c.bootstrap(), topic, partitions, rate=100)
    members = Members(c.bootstrap(), group, topic, str(tmp_path))
    watch = CommittedWatch(c.bootstrap(), group, topic, partitions)
    try:
        for name in ("a", "b", "c"):
            members.start(name)
        # the first group creates `__consumer_offsets` (50 partitions, 3 replicas each): its
        # coordinator may take a while to be there on a busy machine
        started = time.time()
        wait_for("three members, stable", lambda: len(describe(c.bootstrap(), group, timeout=90).members) == 3
                 and str(describe(c.bootstrap(), group).state) == "ConsumerGroupState.STABLE", timeout=120)
        print(f"group stable {time.time() - started:.1f} s after the members started")
        admin = AdminClient({"bootstrap.servers": c.bootstrap()})
        coordinator = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=30).coordinator.id // 1000
        c.nodes[coordinator].kill9()
        time.sleep(4)
        members.kill9("b")
        time.sleep(3)
        members.start("d")
        c.start(coordinator)
        time.sleep(8)
        producing.finish()
        wait_for(lambda: f"{len(producing.acked - members.consumed())} acknowledged records not consumed",
                 lambda: producing.acked <= members.consumed(), timeout=90)
        d = describe(c.bootstrap(), group)
        owned = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
        assert owned == list(range(partitions)) and len(d.members) == 3, d
    finally:
        watch.finish()
        members.stop_all()
    assert_never_owned_twice(ownership(members.events(), members.killed, time.time()))
    assert not watch.regressions, f"committed offsets went back: {watch.regressions}"
