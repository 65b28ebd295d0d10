"""Transactions on one node (issue 45): a transactional producer's committed records reach
`read_committed` consumers, aborted ones never do (a `read_uncommitted` consumer sees both);
a second producer instance of the same `transactional.id` fences the first; everything holds
across a restart and a kill -9.
"""
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker import free_port_block
from support.metrics import metric, parse, scrape, values

TOPIC = "txn"


def create(b, topic=TOPIC, partitions=2):
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def transactional(b, tid, **extra):
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 60000, **extra})
    p.init_transactions(30)
    return p


def send(p, values, commit, topic=TOPIC):
    p.begin_transaction()
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % 2)
    if commit:
        p.commit_transaction(30)
    else:
        p.flush(30)
        p.abort_transaction(30)


def read(b, isolation, expected, topic=TOPIC, partitions=2, timeout=20):
    """Values per partition, in offset order, once `expected` records were read (or the time
    ran out)."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"reader-{isolation}-{time.time()}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    deadline = time.time() + timeout
    while sum(len(v) for v in got.values()) < expected and time.time() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got[m.partition()].append(m.value())
    # Nothing more arrives after the expected ones.
    end = time.time() + 1
    while time.time() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got[m.partition()].append(m.value())
    c.close()
    return got


def by_partition(values):
    out = {0: [], 1: []}
    for i, v in enumerate(values):
        out[i % 2].append(v)
    return out


def test_read_committed_sees_commits_only_across_a_restart_and_kill_9(make_broker):
    b = make_broker().start()
    create(b)
    p = transactional(b, "t1")
    first = [b"c1-%d" % i for i in range(20)]
    aborted = [b"a-%d" % i for i in range(10)]
    second = [b"c2-%d" % i for i in range(6)]
    send(p, first, commit=True)
    send(p, aborted, commit=False)
    send(p, second, commit=True)
    committed = by_partition(first)
    for part, vs in by_partition(second).items():
        committed[part] += vs
    assert read(b, "read_committed", 26) == committed
    everything = read(b, "read_uncommitted", 36)
    assert sorted(sum(everything.values(), [])) == sorted(first + aborted + second)

    # An open transaction holds read_committed consumers back: its records are not read.
    p.begin_transaction()
    p.produce(TOPIC, value=b"open", partition=0)
    p.flush(30)
    assert read(b, "read_committed", 26, timeout=3) == committed
    p.abort_transaction(30)
    p.flush(30)

    b.stop()
    b.start()
    assert read(b, "read_committed", 26) == committed
    p2 = transactional(b, "t1")
    send(p2, [b"c3-0", b"c3-1"], commit=True)
    committed[0].append(b"c3-0")
    committed[1].append(b"c3-1")
    b.kill9()
    b.start()
    got = read(b, "read_committed", 28)
    assert got == committed, (
        f"after kill -9: read {[len(v) for v in got.values()]}, expected "
        f"{[len(v) for v in committed.values()]}; tails {[v[-3:] for v in got.values()]}; "
        f"read_uncommitted {read(b, 'read_uncommitted', 40)}")


def test_a_new_instance_fences_the_old_one(make_broker):
    b = make_broker().start()
    create(b)
    old = transactional(b, "fenced")
    old.begin_transaction()
    old.produce(TOPIC, value=b"zombie", partition=0)
    old.flush(30)
    # The new instance aborts the old one's open transaction and bumps the epoch.
    new = transactional(b, "fenced")
    send(new, [b"fresh-0", b"fresh-1"], commit=True)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(10)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower(), e.value
    assert read(b, "read_committed", 2) == {0: [b"fresh-0"], 1: [b"fresh-1"]}


def committed_offsets(b, group, topic, partitions=2):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    c.close()
    return {tp.partition: tp.offset for tp in got}


def test_consume_transform_produce_copies_exactly_once(make_broker):
    """A copier reads `in`, writes `out` and commits its consumer offsets in one transaction;
    one transaction is aborted part way (its output never read, its offsets not committed, the
    copier rewinds to the committed offsets), the broker is restarted between transactions."""
    b = make_broker().start()
    create(b, "in")
    create(b, "out")
    src = Producer({"bootstrap.servers": b.bootstrap})
    values = [b"v%03d" % i for i in range(60)]
    for i, v in enumerate(values):
        src.produce("in", value=v, partition=i % 2)
    assert src.flush(30) == 0

    def consumer():
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "copier",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed"})
        c.subscribe(["in"])
        return c

    p = transactional(b, "copier-1")
    c = consumer()
    copied, rounds = 0, 0
    while copied < 60 and rounds < 100:
        rounds += 1
        batch = [m for m in c.consume(10, 1.0) if not m.error()]
        if not batch:
            continue
        p.begin_transaction()
        for m in batch:
            p.produce("out", value=b"out-" + m.value(), partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        if rounds == 2:
            p.abort_transaction(30)
            # Rewind to what the group committed.
            for tp in c.committed(c.assignment(), timeout=10):
                c.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        p.commit_transaction(30)
        copied += len(batch)
        if rounds == 4:
            c.close()
            b.stop()
            b.start()
            p = transactional(b, "copier-1")
            c = consumer()
    c.close()
    assert copied == 60, f"copied {copied} in {rounds} rounds"
    out = read(b, "read_committed", 60, topic="out")
    assert out == {part: [b"out-" + v for v in vs] for part, vs in by_partition(values).items()}
    assert committed_offsets(b, "copier", "in") == {0: 30, 1: 30}


def test_kafka_transactions_tool_lists_describes_and_aborts_a_hanging_transaction(make_broker):
    """Kafka's `kafka-transactions` (TransactionsCommand, kafka-tools 4.1.1): list (with an id
    pattern), describe,
    describe-producers, find-hanging (a live transaction is not hanging); and `abort` of an open
    transaction by its partition's start offset (what an operator does with a hanging one): its
    records are never read, and the read_committed consumer passes them. The metrics endpoint
    shows the open transaction and the LSO lag it causes, and neither after the abort."""
    from support.kafka import kafka_tool

    metrics_port = free_port_block(1)
    b = make_broker(settings={"metrics.listen": f"127.0.0.1:{metrics_port}"}).start()
    create(b)
    plain = Producer({"bootstrap.servers": b.bootstrap})
    plain.produce(TOPIC, value=b"before", partition=0)
    assert plain.flush(10) == 0
    p = transactional(b, "ops")
    p.begin_transaction()
    p.produce(TOPIC, value=b"hanging", partition=0)
    p.flush(30)
    tool = "org.apache.kafka.tools.TransactionsCommand"

    def run(*args):
        out = kafka_tool(tool, "--bootstrap-server", b.bootstrap, *args)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    listed = run("list")
    assert "ops" in listed and "Ongoing" in listed, listed
    # ListTransactions v2: the pattern matches the whole id; one that does not compile is
    # refused with INVALID_REGULAR_EXPRESSION.
    assert "ops" in run("list", "--transactional-id-pattern", "o.s"), "pattern o.s"
    assert "ops" in run("list", "--transactional-id-pattern", "'(?i)OPS'"), "pattern (?i)OPS (kafka_tool's bash needs the quotes)"
    assert "ops" not in run("list", "--transactional-id-pattern", "o"), "pattern o matched ops"
    bad = kafka_tool(tool, "--bootstrap-server", b.bootstrap, "list", "--transactional-id-pattern", "o{2")
    assert bad.returncode != 0 and "INVALID_REGULAR_EXPRESSION" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
    described = run("describe", "--transactional-id", "ops")
    assert "Ongoing" in described and f"{TOPIC}-0" in described, described
    producers = run("describe-producers", "--topic", TOPIC, "--partition", "0")
    # The open transaction started at offset 1 (offset 0 holds the plain record).
    lines = [l.split() for l in producers.splitlines()[1:] if l.strip()]
    assert any(l[-1] == "1" for l in lines), producers
    # Every open transaction is a candidate (timeout 0 minutes), but the coordinator still lists
    # the partition in it: not hanging.
    hanging = run("find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
    assert hanging.splitlines()[0].split()[0] == "Topic", hanging
    assert not hanging.splitlines()[1:], hanging
    # The LSO waits for the open transaction: only "before" is read.
    assert read(b, "read_committed", 1, partitions=1, timeout=3) == {0: [b"before"]}
    part = {"topic": TOPIC, "partition": "0"}
    assert metric(metrics_port, "ringlog_partition_open_transactions", **part) == 1
    assert metric(metrics_port, "ringlog_partition_last_stable_offset", **part) == 1
    assert metric(metrics_port, "ringlog_partition_last_stable_offset_lag", **part) == 1
    ongoing = values(parse(scrape(metrics_port)), "ringlog_transactional_ids", state="Ongoing")
    assert sum(v for _, v in ongoing) == 1, ongoing
    run("abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "1")
    plain.produce(TOPIC, value=b"after", partition=0)
    assert plain.flush(10) == 0
    assert read(b, "read_committed", 2, partitions=1) == {0: [b"before", b"after"]}
    assert metric(metrics_port, "ringlog_partition_open_transactions", **part) == 0
    assert metric(metrics_port, "ringlog_partition_last_stable_offset_lag", **part) == 0
    none_open = run("describe-producers", "--topic", TOPIC, "--partition", "0")
    assert not [l for l in none_open.splitlines()[1:] if l.split() and l.split()[-1] == "1"], none_open


def test_an_idle_transactional_id_expires_and_comes_back_with_a_new_producer_id(make_broker):
    """`transactional.id.expiration.ms`: an id with no transaction open that has not changed
    for that long is removed by its coordinator (a tombstone in `__transaction_state`):
    `kafka-transactions list` no longer shows it, `describe` finds nothing, it stays removed
    across a kill -9, and a producer using it again gets a new producer id at epoch 0. An id
    with a transaction open is not removed, however long it has been open."""
    from support.kafka import kafka_tool

    b = make_broker(settings={"transactional.id.expiration.ms": "8000",
                              "transaction.remove.expired.transaction.cleanup.interval.ms": "300"}).start()
    create(b)
    tool = "org.apache.kafka.tools.TransactionsCommand"

    def run(*args):
        return kafka_tool(tool, "--bootstrap-server", b.bootstrap, *args)

    def described(tid):
        out = run("describe", "--transactional-id", tid)
        assert out.returncode == 0, out.stdout + out.stderr
        header, row = [l.split() for l in out.stdout.splitlines()[:2]]
        return dict(zip(header, row))

    def listed():
        out = run("list")
        assert out.returncode == 0, out.stdout + out.stderr
        return {l.split()[0] for l in out.stdout.splitlines()[1:] if l.split()}

    idle = transactional(b, "idle")
    send(idle, [b"i0", b"i1"], commit=True)
    first = described("idle")
    busy = transactional(b, "busy")
    busy.begin_transaction()
    busy.produce(TOPIC, value=b"open", partition=0)
    busy.flush(30)
    assert "busy" in listed()  # `described` above found "idle" (each tool run starts a JVM)
    deadline = time.time() + 40
    while "idle" in listed():
        assert time.time() < deadline, "the idle transactional id was not removed"
        time.sleep(0.5)
    time.sleep(3)  # past busy's expiration time too: its transaction is open
    assert "busy" in listed(), "an id with a transaction open was removed"
    gone = run("describe", "--transactional-id", "idle")
    assert gone.returncode != 0 and "could not be found" in gone.stdout + gone.stderr, gone.stdout + gone.stderr
    b.kill9()
    b.start()
    deadline = time.time() + 30
    while "busy" not in listed():  # the coordinator loaded again
        assert time.time() < deadline, "the coordinator did not load after the restart"
        time.sleep(0.5)
    assert "idle" not in listed(), "the removed id came back after kill -9"
    again = transactional(b, "idle")
    send(again, [b"i2", b"i3"], commit=True)
    now = described("idle")
    assert now["ProducerId"] != first["ProducerId"] and now["ProducerEpoch"] == "0", (first, now)
    busy.abort_transaction(30)
    assert read(b, "read_committed", 4) == {0: [b"i0", b"i2"], 1: [b"i1", b"i3"]}


def test_a_commit_answered_just_before_kill_9_is_completed_after_restart(make_broker):
    """The commit is answered once it is prepared; its markers follow. Killed -9 right after,
    the node's coordinator finds the transaction prepared when it loads and writes the markers
    then. (It once completed such a transaction without markers: the shard's metadata during
    the load was the one before, without the topic, taken for a deleted one.)"""
    b = make_broker().start()
    create(b)
    for i in range(8):
        p = transactional(b, "quick")
        values = [b"q%d-%d" % (i, k) for k in range(4)]
        send(p, values, commit=True)
        b.kill9()
        b.start()
        got = read(b, "read_committed", 4 * (i + 1), timeout=15)
        assert sum(len(v) for v in got.values()) == 4 * (i + 1), f"round {i}: {got}"


def retry_until_ok(what, call, timeout=30):
    """`call()` → (error, *rest), again while the error is retriable (the coordinator being
    created or loaded, a transaction completing)."""
    deadline = time.time() + timeout
    while True:
        out = call()
        if out[0] == 0:
            return out[1:]
        assert out[0] in (14, 15, 16, 51) and time.time() < deadline, f"{what}: error {out[0]}"
        time.sleep(0.2)


@pytest.mark.parametrize("verification", ["true", "false"])
def test_a_transactional_batch_outside_its_transaction_is_refused(make_broker, verification):
    """KIP-890 part 1: a transactional batch for a partition the producer never added to its
    transaction (a late or stray write) is refused with INVALID_TXN_STATE after the leader asks
    the coordinator (AddPartitionsToTxn v5, verify_only; the two partitions sit on the
    coordinator's shard and on the other one), so it never opens a transaction no marker would
    close. With `transaction.partition.verification.enable=false` the same batch is appended and
    hangs the partition's last stable offset: read_committed consumers stop before it."""
    from support import wire

    metrics_port = free_port_block(1)
    b = make_broker(settings={"metrics.listen": f"127.0.0.1:{metrics_port}",
                              "transaction.partition.verification.enable": verification}).start()
    create(b)
    tid = "stray-writer"
    s = wire.connect(b.bootstrap)
    _node, host, port = retry_until_ok("FindCoordinator", lambda: wire.find_transaction_coordinator(s, tid))
    coordinator = wire.connect(f"{host}:{port}")
    pid, epoch = retry_until_ok("InitProducerId", lambda: wire.init_producer_id_v0(coordinator, tid))
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(TOPIC, timeout=10)
    errors = {}
    for p in (0, 1):
        leader = md.brokers[md.topics[TOPIC].partitions[p].leader]
        conn = wire.connect(f"{leader.host}:{leader.port}")
        batch = wire.record_batch([b"stray-%d" % p], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                  attributes=wire.TRANSACTIONAL)
        conn.sendall(wire.produce_v3_transactional(TOPIC, p, batch, tid))
        errors[p] = wire.produce_v3_error_code(wire.read_response(conn))
    plain = Producer({"bootstrap.servers": b.bootstrap})
    for p in (0, 1):
        plain.produce(TOPIC, value=b"after-%d" % p, partition=p)
    assert plain.flush(10) == 0
    open_txns = sum(v for _, v in values(parse(scrape(metrics_port)), "ringlog_partition_open_transactions"))
    if verification == "true":
        assert errors == {0: 48, 1: 48}, errors  # INVALID_TXN_STATE
        assert open_txns == 0
        assert read(b, "read_committed", 2) == {0: [b"after-0"], 1: [b"after-1"]}
    else:
        assert errors == {0: 0, 1: 0}, errors
        assert open_txns == 2
        assert read(b, "read_committed", 1, timeout=3) == {0: [], 1: []}


def test_a_late_marker_of_the_previous_transaction_does_not_end_the_open_one(make_broker):
    """KIP-1228 at the wire: WriteTxnMarkers v2 says a marker's transaction version. At version
    2 a transaction's records are at the epoch its predecessor's markers carry, so a marker at
    the epoch of the transaction open on the partition is the previous transaction's, late (a
    request held in a cut link): refused INVALID_PRODUCER_EPOCH, the transaction stays open;
    the same marker v1 (version 0/1 markers carry the records' epoch) ends it; a version 2
    marker sent again with nothing open is accepted; one an epoch up ends the transaction.
    Transactional batches go in unverified (`transaction.partition.verification.enable=false`)
    so that the test alone decides the epochs."""
    from support import wire

    b = make_broker(shards=1, settings={"transaction.partition.verification.enable": "false"}).start()
    create(b, partitions=1)
    tid = "late-marker"
    s = wire.connect(b.bootstrap)
    retry_until_ok("FindCoordinator", lambda: wire.find_transaction_coordinator(s, tid))
    pid, epoch = retry_until_ok("InitProducerId", lambda: wire.init_producer_id_v0(s, tid))

    def produce(value, at_epoch, seq):
        batch = wire.record_batch([value], producer_id=pid, producer_epoch=at_epoch, base_sequence=seq,
                                  attributes=wire.TRANSACTIONAL)
        s.sendall(wire.produce_v3_transactional(TOPIC, 0, batch, tid))
        assert wire.produce_v3_error_code(wire.read_response(s)) == 0

    def marker(at_epoch, commit, version=2):
        return wire.write_txn_markers(s, pid, at_epoch, commit, TOPIC, [0], version=version)[0]

    produce(b"first", epoch, 0)
    assert marker(epoch + 1, commit=True) == 0  # its own marker, one epoch up
    assert marker(epoch + 1, commit=True) == 0  # sent again, nothing open
    produce(b"second", epoch + 1, 0)
    assert marker(epoch + 1, commit=False) == 47  # the first's, late: INVALID_PRODUCER_EPOCH
    assert read(b, "read_committed", 1, partitions=1, timeout=3) == {0: [b"first"]}, "second's LSO hold gone"
    assert marker(epoch + 2, commit=True) == 0
    assert read(b, "read_committed", 2, partitions=1) == {0: [b"first", b"second"]}
    # Version 1: the legacy check (not below the producer's epoch) lets the same-epoch marker end
    # the open transaction.
    produce(b"third", epoch + 2, 0)
    assert marker(epoch + 2, commit=False, version=1) == 0
    produce(b"fourth", epoch + 2, 1)
    assert marker(epoch + 3, commit=True) == 0
    assert read(b, "read_committed", 3, partitions=1) == {0: [b"first", b"second", b"fourth"]}


@pytest.mark.parametrize("txn_version", ["2", "1", "downgraded-to-1"])
def test_java_transactions_at_the_finalized_transaction_version(make_broker, txn_version):
    """Transaction version 2 (KIP-890 part 2): ApiVersions finalizes `transaction.version` at
    the broker's setting (Kafka's `kafka-features describe` shows it), or at the level
    `kafka-features downgrade|upgrade` (UpdateFeatures) set for the cluster — kept in the
    metadata across a restart; an "upgrade" to a lower level and an unknown feature refused. Kafka's
    TransactionalMessageCopier (the Java 4.1.1 producer and consumer) copies 3 000 records in
    transactions of 100 with random aborts, sending offsets in each: at level 2 it sends no
    AddPartitionsToTxn or AddOffsetsToTxn (Produce v12 and TxnOffsetCommit v5 add the
    partitions) and every transaction ends with an epoch bump, so the producer's epoch counts
    its transactions; at level 1 the epoch stays where InitProducerId put it. The output read
    committed is the input exactly, either way."""
    from support.kafka import kafka_tool

    metrics_port = free_port_block(1)
    # One shard: the leaders' calls to the coordinator stay inside it and are not counted as
    # AddPartitionsToTxn requests, which leaves the client's own.
    downgraded = txn_version == "downgraded-to-1"
    b = make_broker(shards=1, settings={"metrics.listen": f"127.0.0.1:{metrics_port}",
                                        "transaction.version": "2" if downgraded else txn_version}).start()

    def feature_tool(*args):
        return kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", b.bootstrap, *args)

    if downgraded:
        txn_version = "1"
        lower = feature_tool("upgrade", "--feature", "transaction.version=1")
        assert lower.returncode != 0 and "cannot lower" in lower.stdout + lower.stderr, lower.stdout + lower.stderr
        unknown = feature_tool("upgrade", "--feature", "share.version=1")
        assert unknown.returncode != 0 and "not supported by ringlog" in unknown.stdout + unknown.stderr, \
            unknown.stdout + unknown.stderr
        down = feature_tool("downgrade", "--feature", "transaction.version=1")
        assert down.returncode == 0, down.stdout + down.stderr
        b.stop()
        b.start()
    features = feature_tool("describe")
    assert features.returncode == 0, features.stdout + features.stderr
    line = next(l for l in features.stdout.splitlines() if "transaction.version" in l)
    assert "SupportedMaxVersion: 2" in line and f"FinalizedVersionLevel: {txn_version}" in line, line

    create(b, "copy-in", partitions=1)
    create(b, "copy-out", partitions=1)
    total = 3000
    plain = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(total):
        plain.produce("copy-in", value=b"%d" % i, partition=0)
    assert plain.flush(30) == 0
    requests = lambda api: sum(v for _, v in values(parse(scrape(metrics_port)), "ringlog_requests_total", request=api))
    adds_before = requests("AddPartitionsToTxn") + requests("AddOffsetsToTxn")
    copier = kafka_tool("org.apache.kafka.tools.TransactionalMessageCopier", "--broker-list", b.bootstrap,
                        "--input-topic", "copy-in", "--input-partition", "0", "--output-topic", "copy-out",
                        "--consumer-group", "copier-tv", "--transactional-id", "copier-tv",
                        "--transaction-size", "100", "--transaction-timeout", "30000",
                        "--enable-random-aborts", "--use-group-metadata")
    assert copier.returncode == 0, copier.stdout[-3000:] + copier.stderr[-3000:]
    adds = requests("AddPartitionsToTxn") + requests("AddOffsetsToTxn") - adds_before
    described = kafka_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", b.bootstrap,
                           "describe", "--transactional-id", "copier-tv")
    assert described.returncode == 0, described.stdout + described.stderr
    header, row = [l.split("\t") if "\t" in l else l.split() for l in described.stdout.strip().splitlines()[:2]]
    epoch = int(row[header.index("ProducerEpoch")])
    if txn_version == "2":
        assert adds == 0, f"{adds} AddPartitionsToTxn/AddOffsetsToTxn requests at transaction version 2"
        assert epoch >= total // 100, f"epoch {epoch} after at least {total // 100} transactions"
    else:
        assert adds >= total // 100, adds
        assert epoch <= 1, f"epoch {epoch}: bumped per transaction at transaction version 1"
    got = read(b, "read_committed", total, topic="copy-out", partitions=1, timeout=30)
    assert sorted(got[0], key=int) == [b"%d" % i for i in range(total)]
    assert len(got[0]) == total
