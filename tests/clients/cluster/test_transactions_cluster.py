"""Transactions in a 3-node cluster under faults (issue 45): three transactional producers
(franz-go at transaction version 2, `clientcheck txn-writer`) each commit and abort transactions of records spread over two partitions (RF 3,
min.insync.replicas 2) while the nodes coordinating their transactional ids and the
partitions' leaders are killed -9 and restarted, paused past their lease, or cut off by the
network. Before each transaction a producer reads what is new in both partitions with its own
read_committed consumer, so the transactions read each other's. Judged Jepsen-style: every
transaction whose commit was acknowledged is read whole, exactly once; no record of an aborted
transaction is read, during the run or after (G1a); a transaction whose outcome its producer
could not tell is read whole or not at all; no record is read twice; every record read during
the run is at the end at the offset it was read at (nothing read was taken back or changed);
each producer's transactions appear in its commit order in both partitions; and the graph of
the committed transactions — an edge from a transaction to each one that read its records
(write-read), and from each to its producer's next (process order) — has no cycle (G1c).
Write-write edges from log order are left out: Kafka lets transactions interleave in a
partition, and its markers reach the partitions of a transaction one by one, so two
transactions may be ordered one way in one partition and the other way in the other.
"""
import json
import os
import signal
import struct
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING

from support.batches import aborted_index, stored_records
from support.broker import REPO
from support.kafka import go_client_check, kafka_libs
from support.waiting import wait_for
from test_replication import SESSION_MS, Cluster, NetNodes, create

TOPIC = "txns"
WRITERS = 3


def txn_of(value):
    """`(writer, transaction number)` of a checker record `w<writer>-t<n>-<k>`."""
    w, t, _ = value.split(b"-")
    return int(w[1:]), int(t[1:])


class TxnWriter:
    """One transactional producer, `clientcheck txn-writer` (franz-go, tests/clients/go/txnwriter.go:
    transaction version 2, so that no request of an earlier transaction — an EndTxn delayed in a
    cut link past the client's timeout — can end a later one, which transaction version 0/1
    allows in Kafka and ringlog alike: KIP-890's motivation), running transactions until its
    stdin closes. Each transaction's records, what it read before it and its outcome, from the
    program's JSON lines."""

    def __init__(self, c, wid, seed, command):
        self.wid = wid
        self.committed, self.aborted, self.unknown = [], [], []
        self.reads = {}  # transaction number -> [(partition, offset, value)] read before it
        self.proc = subprocess.Popen(command + ["txn-writer", c.bootstrap(), TOPIC, str(wid), str(seed)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self.follow, daemon=True)
        self.thread.start()
        # stderr read as it comes: a full pipe would block the writer
        self.errors = []
        self.stderr_thread = threading.Thread(
            target=lambda: self.errors.extend(line.rstrip("\n") for line in self.proc.stderr), daemon=True)
        self.stderr_thread.start()

    def follow(self):
        for line in self.proc.stdout:
            t = json.loads(line)
            values = [v.encode() for v in t["values"]]
            self.reads[t["n"]] = [(p, off, v.encode()) for p, off, v in t["reads"]]
            getattr(self, t["outcome"]).append(values)

    def finish(self):
        """Tells the writer to stop after its transaction under way (each of its steps is
        bounded by 40 s) and collects its errors. One still running after 120 s is hung:
        SIGQUIT makes the Go runtime print every goroutine's stack, which the failure shows."""
        self.proc.stdin.close()
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGQUIT)
            self.proc.wait(10)
            self.stderr_thread.join(10)
            raise AssertionError(f"writer {self.wid} still running 120 s after it was told to stop; "
                                 f"its stderr and goroutines:\n" + "\n".join(self.errors[-250:]))
        self.thread.join(10)
        self.stderr_thread.join(10)
        assert self.proc.returncode == 0, "\n".join(self.errors[-20:])


def stable_ends(c, topic, partitions):
    """Each partition's end offset if every partition's last stable offset is its high
    watermark (ListOffsets latest read_committed and read_uncommitted): no transaction open or
    completing in the topic. None otherwise."""
    ends = {}
    for isolation in ("read_committed", "read_uncommitted"):
        q = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": f"ends-{time.time()}",
                      "isolation.level": isolation})
        try:
            ends[isolation] = [q.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                               for p in range(partitions)]
        except KafkaException:
            return None
        finally:
            q.close()
    return ends["read_committed"] if ends["read_committed"] == ends["read_uncommitted"] else None


class FinalRead(dict):
    """partition -> the values read committed, in offset order; `ends`: each partition's end
    offset, `reached`: how far the reader got in each (its position)."""


def read_committed(c, topic=TOPIC, partitions=2, offsets=None, timeout=90):
    """Every record read committed up to each partition's end, once no transaction is open
    any more (the coordinators finish what a node's kill left prepared; one still open after
    90 s hangs: a failure). The reader stops when its position in every partition reached the
    end — not after a quiet spell, which a partition whose leader just moved can outlast — or
    after `timeout` s, leaving the shortfall in `reached` for the checker to name."""
    started = time.time()
    ends = wait_for(f"no transaction open in {topic}", lambda: stable_ends(c, topic, partitions),
                    timeout=90, interval=1)
    print(f"no transaction open in {topic} after {time.time() - started:.1f} s; ends {ends}")
    consumer = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": f"check-{time.time()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    got = FinalRead({p: [] for p in range(partitions)})
    got.ends, got.reached = dict(enumerate(ends)), {p: 0 for p in range(partitions)}
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got[m.partition()].append(m.value())
            if offsets is not None:
                offsets.setdefault(m.value(), []).append((m.partition(), m.offset()))
        positions = consumer.position(tps)
        got.reached = {tp.partition: max(tp.offset, got.reached[tp.partition]) for tp in positions}
        if all(got.reached[p] >= ends[p] for p in range(partitions)):
            break
    consumer.close()
    print(f"read {[len(got[p]) for p in range(partitions)]} records in {time.time() - started:.1f} s; "
          f"positions {got.reached}")
    return got


def stored_logs(c, topic=TOPIC):
    """Each node's stored batches and aborted transaction index of `topic`, the nodes stopped
    first: {node: (batches, aborted index entries)} (empty if unreadable)."""
    out = {}
    for n, b in c.nodes.items():
        if b.proc.poll() is None:
            b.proc.send_signal(signal.SIGCONT)
        try:
            b.stop()
            out[n] = (stored_records(b.data_dir, topic), aborted_index(b.data_dir, topic))
        except (RuntimeError, OSError, AssertionError, ValueError, IndexError, struct.error) as e:
            out[n] = ([], [f"unreadable: {e}"])
    return out


def where_stored(stored, values):
    """Per node, where `values` are stored (partition, offsets, leader epoch, producer id and
    epoch), the markers of that producer that follow them, and the aborted index entries of
    that producer covering them: whether a loss was a truncation, an abort marker or a read."""
    lines = []
    for n, (batches, aborted) in sorted(stored.items()):
        hits = [b for b in batches if set(b["values"]) & values]
        if not hits:
            lines.append(f"node {n}: none of them")
            continue
        for h in hits:
            p, pid, first = h["partition"], h["producer_id"], h["base_offset"]
            after = [b for b in batches if b["partition"] == p and b["producer_id"] == pid
                     and b["base_offset"] > first and b["control"]][:2]
            covering = [a for a in aborted if a[0] == p and a[1] == pid and a[2] <= first <= a[3]]
            lines.append(
                f"node {n}: {sorted(set(h['values']) & values)} at {p}/{first}-{h['last_offset']} "
                f"leader epoch {h['leader_epoch']} producer {pid} epoch {h['producer_epoch']}; then "
                f"{[(b['control'], b['base_offset'], b['producer_epoch'], b['leader_epoch']) for b in after]}; "
                f"aborted index entries covering it: {covering}")
    return "\n".join(lines)


def find_cycle(edges):
    """A cycle in the graph `{node: set(successors)}` as a list of nodes, or None."""
    colour, parent = {}, {}
    for root in edges:
        if root in colour:
            continue
        colour[root] = 1
        stack = [(root, iter(edges.get(root, ())))]
        while stack:
            node, succ = stack[-1]
            nxt = next(succ, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
            elif colour.get(nxt) == 1:
                cycle, at = [nxt], node
                while at != nxt:
                    cycle.append(at)
                    at = parent[at]
                return cycle[::-1]
            elif nxt not in colour:
                colour[nxt], parent[nxt] = 1, node
                stack.append((nxt, iter(edges.get(nxt, ()))))
    return None


def check_history(writers, got, at):
    """The checks of the module doc over the writers' histories and the final read (`got`:
    partition -> values in offset order; `at`: value -> [(partition, offset)])."""
    committed = [v for w in writers for v in w.committed]
    aborted = [v for w in writers for v in w.aborted]
    unknown = [v for w in writers for v in w.unknown]
    seen = [v for vs in got.values() for v in vs]
    assert len(seen) == len(set(seen)), "a record read twice"
    seen = set(seen)
    for values in aborted:
        assert not seen & set(values), f"aborted transaction read: {values}"
    lost = [sorted(set(values) - seen) for values in committed if not set(values) <= seen]
    assert not lost, (
        f"{len(lost)} committed transactions lost (in part or whole), first: {lost[:3]}; "
        f"the reader's position in each partition {getattr(got, 'reached', '?')}, "
        f"the ends {getattr(got, 'ends', '?')}")
    for values in unknown:
        present = set(values) & seen
        assert not present or present == set(values), f"transaction read in part: {sorted(present)}"
    # What the writers read during the run: committed, and where it is at the end.
    for w in writers:
        for n, reads in w.reads.items():
            for p, off, v in reads:
                assert at.get(v) == [(p, off)], (
                    f"writer {w.wid} read {v} at {p}/{off} before its transaction {n}; at the end "
                    f"it is at {at.get(v)} (aborted, uncommitted or moved)")
    # Each writer's transactions in its commit order, in each partition.
    for p, vs in got.items():
        for w in writers:
            order = [txn_of(v)[1] for v in vs if txn_of(v)[0] == w.wid]
            assert order == sorted(order), f"writer {w.wid}'s transactions out of order in partition {p}"
    # G1c: write-read and process-order edges among committed transactions.
    done = {txn_of(v) for v in seen}
    edges = {t: set() for t in done}
    for w in writers:
        mine = sorted(n for wid, n in done if wid == w.wid)
        for a, b in zip(mine, mine[1:]):
            edges[(w.wid, a)].add((w.wid, b))
        for n in mine:
            for _, _, v in w.reads.get(n, []):
                edges[txn_of(v)].add((w.wid, n))
    wr = sum(len(r) for w in writers for n, r in w.reads.items() if (w.wid, n) in done)
    cycle = find_cycle(edges)
    assert cycle is None, f"G1c: a cycle among committed transactions: {cycle}"
    return len(done), wr


class FakeWriter:
    def __init__(self, wid, committed, reads, aborted=()):
        self.wid, self.reads, self.unknown = wid, reads, []
        self.committed = [[b"w%d-t%05d-%d" % (wid, n, k) for k in range(2)] for n in committed]
        self.aborted = [[b"w%d-t%05d-%d" % (wid, n, k) for k in range(2)] for n in aborted]


def test_the_checker_finds_a_cycle_and_a_read_taken_back():
    """The history checks themselves, on made-up histories: a clean one passes; two
    transactions that each read the other's records (possible only if one read the other
    before it committed) are a G1c cycle; a record read during the run that is not there at
    the end is reported."""
    def final(writers):
        got, at = {0: [], 1: []}, {}
        for w in writers:
            for values in w.committed:
                for k, v in enumerate(values):
                    at[v] = [(k % 2, len(got[k % 2]))]
                    got[k % 2].append(v)
        return got, at

    a, b = FakeWriter(0, [1, 2], {}), FakeWriter(1, [1], {})
    got, at = final([a, b])
    # b's transaction 1 read a's first record; a's transaction 2 read b's: no cycle.
    b.reads = {1: [(0, 0, b"w0-t00001-0")]}
    a.reads = {2: [(0, 2, b"w1-t00001-0")]}
    assert check_history([a, b], got, at) == (3, 2)
    # a's transaction 1 also read b's 1: 1 -> b1 -> a1.
    a.reads[1] = [(0, 2, b"w1-t00001-0")]
    with pytest.raises(AssertionError, match="G1c"):
        check_history([a, b], got, at)
    # An aborted record read during the run.
    a, b = FakeWriter(0, [1], {}), FakeWriter(1, [1], {}, aborted=[2])
    got, at = final([a, b])
    a.reads = {1: [(1, 5, b"w1-t00002-1")]}
    with pytest.raises(AssertionError, match="aborted, uncommitted or moved"):
        check_history([a, b], got, at)


@pytest.mark.parametrize("fault", ["kill9", "pause", "cut"])
def test_transactions_survive_kill_9_and_pauses_of_coordinators_and_leaders(fault):
    """`kill9`: each node killed -9 and restarted in turn. `pause`: each node stopped (SIGSTOP)
    past its lease, so that its partitions and coordinators move while it sleeps, then resumed
    — a zombie leader and coordinator that must not take back what the others decided. `cut`:
    the nodes in their own network namespaces, each node's link taken down past its lease (it
    runs on, cut off from its peers, etcd and the client) and brought back, in turn."""
    net = NetNodes() if fault == "cut" else None
    c = Cluster(net)
    c.extra = {"transaction.state.log.num.partitions": 5, "transaction.state.log.replication.factor": 3,
               "transaction.state.log.min.isr": 2}
    writers = []
    try:
        c.start_all()
        create(c, TOPIC, partitions=2)
        seed = int(os.environ.get("RINGLOG_TXN_SEED", time.time()))
        print(f"seed {seed} (RINGLOG_TXN_SEED)")
        writers.extend(TxnWriter(c, wid, seed, go_client_check()) for wid in range(WRITERS))
        committed = lambda: sum(len(w.committed) for w in writers)
        wait_for("transactions flowing", lambda: all(len(w.committed) >= 3 for w in writers), timeout=60)
        for victim in (1, 2, 3, 1):
            before = committed()
            if fault == "kill9":
                c.nodes[victim].kill9()
                time.sleep(3)
                c.start(victim)
            elif fault == "pause":
                c.nodes[victim].proc.send_signal(signal.SIGSTOP)
                time.sleep(2 * SESSION_MS / 1000 + 1)
                c.nodes[victim].proc.send_signal(signal.SIGCONT)
            else:
                c.net.cut(victim)
                time.sleep(2 * SESSION_MS / 1000 + 1)
                c.net.cut(victim, up=True)
            wait_for(f"commits after node {victim} came back",
                     lambda: committed() >= before + 3 * WRITERS, timeout=90)
        for w in writers:
            w.finish()
        at = {}
        got = read_committed(c, offsets=at)
        errors = [e for w in writers for e in w.errors]
        try:
            done, wr = check_history(writers, got, at)
        except AssertionError as e:
            # where the lost records are, read from the stopped nodes' logs before they go
            seen = {v for vs in got.values() for v in vs}
            lost = {v for w in writers for values in w.committed for v in values if v not in seen}
            raise AssertionError(f"{e}\nwriters' errors: {errors[:30]}\n"
                                 f"where each node holds what was lost:\n{where_stored(stored_logs(c), lost)}") from e
        # the coordinators' EndTxn refusals (with the transaction's state), for a failure's message
        refusals = [line for n in c.nodes.values() if os.path.exists(n.log_path)
                    for line in open(n.log_path, errors="replace") if "EndTxn refused" in line]
    finally:
        for w in writers:  # one left running by a failure must not outlive the test
            if w.proc.poll() is None:
                w.proc.kill()
        c.stop()
        if net:
            net.remove()

    assert not [e for e in errors if "INVALID_TXN_STATE" in e], (errors[:20], refusals[-10:])
    print(f"{done} transactions committed ({sum(len(w.committed) for w in writers)} acknowledged, "
          f"{sum(len(w.aborted) for w in writers)} aborted, {sum(len(w.unknown) for w in writers)} "
          f"unknown); {wr} records read by them before they began; errors: {errors[:10]}")


def start_copier(c, partition, libs):
    """Kafka's own TransactionalMessageCopier (kafka-tools 4.1.1) copying one input partition
    in transactions of 750, with random aborts (Kafka's transactions_test.py)."""
    cmd = (f"source {REPO}/scripts/kafka/kafka-common.sh; kafka_tool "
           f"org.apache.kafka.tools.TransactionalMessageCopier --broker-list {c.bootstrap()} "
           f"--input-topic copier-in --input-partition {partition} --output-topic copier-out "
           f"--consumer-group copier-{partition} --transactional-id copier-{partition} "
           f"--transaction-size 750 --transaction-timeout 30000 --enable-random-aborts "
           f"--use-group-metadata")
    return subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, KAFKA_LIBS=libs))


def copied_all(proc):
    """Whether the copier reported nothing left to copy (its last JSON progress line)."""
    return proc.poll() is not None and proc.returncode == 0


def test_transactional_message_copier_copies_exactly_once_under_kill_9():
    """Kafka's transactions_test.py scenario: 100 000 records in two input partitions copied by
    two TransactionalMessageCopier processes (transactions of ~750, random aborts) while every
    node is killed -9 in turn; a copier that dies is started again (it resumes from its group's
    committed offsets). The output, read committed, is the input exactly: no record lost, none
    twice, none of an aborted transaction."""
    libs = kafka_libs()
    c = Cluster()
    c.extra = {"transaction.state.log.num.partitions": 5, "transaction.state.log.replication.factor": 3,
               "transaction.state.log.min.isr": 2}
    total = 100_000
    copiers = {}
    outputs = []
    try:
        c.start_all()
        create(c, "copier-in", partitions=2)
        create(c, "copier-out", partitions=2)
        p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5})
        for i in range(total):
            p.produce("copier-in", value=b"%d" % i, partition=i % 2)
            if i % 10_000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        copiers = {part: start_copier(c, part, libs) for part in (0, 1)}
        started, kills = time.time(), []
        deadline = time.time() + 300
        victims = [1, 2, 3]
        while time.time() < deadline:
            for part, proc in list(copiers.items()):
                if proc.poll() is not None:
                    out = proc.stdout.read()
                    outputs.append(out[-2000:])
                    if proc.returncode == 0:
                        del copiers[part]
                    else:
                        copiers[part] = start_copier(c, part, libs)
            if not copiers:
                break
            if victims:
                time.sleep(1.5)
                v = victims.pop(0)
                kills.append((round(time.time() - started, 1), v))
                c.nodes[v].kill9()
                time.sleep(2)
                c.start(v)
            else:
                time.sleep(1)
        assert not copiers, "copiers did not finish within 300 s:\n" + "\n".join(outputs)
        print(f"copied in {time.time() - started:.1f} s; killed (s, node): {kills}; "
              f"copier restarts: {len(outputs) - 2}")
        print("\n".join(o[-600:] for o in outputs))
        at = {}
        got = read_committed(c, topic="copier-out", offsets=at)
    finally:
        for proc in copiers.values():
            proc.kill()
        c.stop()
    values = [v for vs in got.values() for v in vs]
    twice = sorted((where, v) for v, where in at.items() if len(where) > 1)
    assert len(values) == len(set(values)), (
        f"{len(values) - len(set(values))} records copied twice; (partition, offset) of each copy, "
        f"first ones: {twice[:5]} … last: {twice[-3:]}")
    missing = set(b"%d" % i for i in range(total)) - set(values)
    assert not missing, f"{len(missing)} records lost, e.g. {sorted(missing)[:5]}"
    assert len(values) == total, f"{len(values)} records in the output, {total} in the input"


def test_the_transaction_version_is_finalized_for_the_whole_cluster():
    """`kafka-features downgrade|upgrade` (UpdateFeatures) through one node sets
    `transaction.version` for every node (the cluster metadata in etcd), which each node's
    ApiVersions then finalizes — also a node killed -9 and restarted."""
    from support.kafka import kafka_tool

    c = Cluster()
    try:
        c.start_all()

        def level(node):
            out = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server",
                             c.nodes[node].bootstrap, "describe")
            assert out.returncode == 0, out.stdout + out.stderr
            line = next(l for l in out.stdout.splitlines() if "transaction.version" in l)
            return int(line.split("FinalizedVersionLevel:")[1].split()[0])

        def set_level(verb, to):
            out = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server",
                             c.nodes[1].bootstrap, verb, "--feature", f"transaction.version={to}")
            assert out.returncode == 0, out.stdout + out.stderr

        assert [level(n) for n in (1, 2, 3)] == [2, 2, 2]
        set_level("downgrade", 1)
        wait_for("every node at transaction version 1", lambda: [level(n) for n in (1, 2, 3)] == [1, 1, 1],
                 timeout=30)
        c.nodes[2].kill9()
        c.start(2)
        assert level(2) == 1, "the restarted node went back to its configured level"
        set_level("upgrade", 2)
        wait_for("every node at transaction version 2", lambda: [level(n) for n in (1, 2, 3)] == [2, 2, 2],
                 timeout=30)
    finally:
        c.stop()
