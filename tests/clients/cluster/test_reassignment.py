"""Replica moves (issue 44), Kafka's way and with Kafka's own tool: a cluster grows from three
nodes to four and partitions move onto the new node while an idempotent acks=all producer keeps
writing; moves survive kill -9 of the new replica's node, the removed replica's node, the
leader and the controller; a move is cancelled midway. Each ends with every partition on the
replicas asked for, all in the ISR, and the Jepsen-style checker of test_replication.py over
what was acknowledged: every acknowledged value at its offset, none twice, none changed, and
the replicas' stored batches identical below the high watermark."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from support.broker import BINARY
from support.kafka import kafka_tool
from support.waiting import wait_for
from test_replication import Cluster, Writer, check, fresh_watermarks, read_all, stored

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.stop()


def layout(c, topic):
    """{partition: (leader node, [replica nodes in order], [isr nodes sorted])}."""
    md = AdminClient({"bootstrap.servers": c.bootstrap()}).list_topics(topic, timeout=10)
    t = md.topics[topic]
    return {p.id: (p.leader // 1000 if p.leader >= 0 else -1, [r // 1000 for r in p.replicas],
                   sorted(r // 1000 for r in p.isrs)) for p in t.partitions.values()}


def create(c, topic, partitions, nodes=(1, 2, 3)):
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[topic].result(timeout=15)
    wait_for("every replica in sync",
             lambda: all(len(isr) == 3 for _, _, isr in layout(c, topic).values()), timeout=15)


def grow(c, node):
    c.start(node)
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    wait_for(f"node {node} registered",
             lambda: any(b // 1000 == node for b in admin.list_topics(timeout=10).brokers), timeout=15)


def plan(topic, targets):
    """Kafka's reassignment JSON: {partition: [nodes]} with one shard per node (broker node*1000)."""
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": [n * 1000 for n in nodes],
                                          "log_dirs": ["any"] * len(nodes)}
                                         for p, nodes in sorted(targets.items())]}


def tool(c, *args):
    r = kafka_tool(REASSIGN, "--bootstrap-server", c.bootstrap(), *args)
    return r.returncode, r.stdout + r.stderr


def execute(c, tmp_path, topic, targets, *extra):
    f = tmp_path / f"plan-{time.time()}.json"
    f.write_text(json.dumps(plan(topic, targets)))
    rc, out = tool(c, "--execute", "--reassignment-json-file", str(f), *extra)
    assert rc == 0, out
    assert "Successfully started partition reassignment" in out, out
    return f


def verify_done(c, f, timeout=120, *extra):
    """`--verify` until it reports every move complete; its last output."""
    deadline = time.time() + timeout
    while True:
        rc, out = tool(c, "--verify", "--reassignment-json-file", str(f), *extra)
        if rc == 0 and "is still in progress" not in out and "is complete" in out:
            return out
        assert time.time() < deadline, f"moves not complete in {timeout} s:\n{out}"
        time.sleep(1)


def wait_layout(c, topic, targets, timeout=60):
    """Until every partition has exactly `targets[p]` as replicas, in order, all in the ISR."""
    def there():
        now = layout(c, topic)
        return all(now[p][1] == nodes and now[p][2] == sorted(nodes) for p, nodes in targets.items())
    wait_for(f"replicas as asked: {targets}", there, timeout=timeout)


def broker_config(c, broker, name):
    """A dynamic broker config's value as the broker describes it (None: not set dynamically)."""
    res = ConfigResource(ConfigResource.Type.BROKER, str(broker))
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    entry = admin.describe_configs([res])[res].result(timeout=10).get(name)
    return entry.value if entry is not None and entry.source in (
        ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value) else None


def topic_config(c, topic, name):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    return admin.describe_configs([res])[res].result(timeout=10)[name].value


def bulk(c, topic, partitions, mib):
    """`mib` MiB of unique 1 KiB records into each partition: more than one follower fetch
    (replica.fetch.max.bytes, 1 MiB), so a throttled move cannot complete on its first fetch."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True})
    pad = b"x" * 1000
    for part in range(partitions):
        for i in range(mib * 1024):
            while True:
                try:
                    p.produce(topic, value=b"bulk-%d-%d-" % (part, i) + pad, partition=part)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
    assert p.flush(60) == 0


def replace(current, old, new):
    return {p: [new if n == old else n for n in replicas] for p, (_, replicas, _) in current.items()}


def judge_moved(c, w, topic, partitions, targets):
    """The checker, then the replicas that hold each partition now compared batch by batch, and
    the removed replicas' folders gone."""
    read = read_all(c, topic, partitions, w.acked.values())
    total = check(w, read)
    for b in c.nodes.values():
        b.stop()
    for p, records in read.items():
        hw = records[-1][0] + 1 if records else 0
        holders = targets[p]
        copies = {n: [x for x in stored(c.dirs[n], topic, p) if x[0] + x[1] < hw] for n in holders}
        first = copies[holders[0]]
        for n, batches in copies.items():
            assert batches == first, f"partition {p}: node {n}'s batches below {hw} differ"
        assert first and first[-1][0] + first[-1][1] == hw - 1, f"partition {p}: replicas end below {hw}"
        for n, d in c.dirs.items():
            if n not in holders:
                assert not os.path.isdir(os.path.join(d, f"{topic}-{p}")), f"node {n} still holds {topic}-{p}"
    return total


def test_a_new_node_takes_replicas_with_kafkas_tool_under_acks_all_load(cluster, tmp_path):
    c = cluster
    c.start_all()
    create(c, "grow", 4)
    w = Writer(c, "grow", 4)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 500, timeout=30)
        grow(c, 4)
        # --generate proposes a plan over the four brokers (rack-aware: every node reports one).
        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "grow"}]}))
        rc, out = tool(c, "--generate", "--topics-to-move-json-file", str(topics),
                       "--broker-list", "1000,2000,3000,4000")
        assert rc == 0, out
        proposed = json.loads(out.split("Proposed partition reassignment configuration")[1].strip().splitlines()[0])
        for p in proposed["partitions"]:
            assert len({b // 1000 for b in p["replicas"]}) == 3, p
        # Each partition hands the replica of one old node to node 4 (the leader's for some).
        before = layout(c, "grow")
        targets = {p: [4 if n == (p % 3) + 1 else n for n in replicas] for p, (_, replicas, _) in before.items()}
        f = execute(c, tmp_path, "grow", targets, "--throttle", "50000000")
        # The tool set Kafka's throttles: rates on every broker involved, replica lists on the topic.
        assert broker_config(c, 4000, "follower.replication.throttled.rate") in ("50000000", None)
        out = verify_done(c, f)
        assert "Clearing topic-level throttles on topic grow" in out, out
        assert broker_config(c, 1000, "leader.replication.throttled.rate") is None
        assert topic_config(c, "grow", "leader.replication.throttled.replicas") == ""

        wait_layout(c, "grow", targets)
        acked_during = len(w.acked)
        wait_for("acks after the move", lambda: len(w.acked) > acked_during + 200, timeout=30)
    finally:
        w.finish()
    assert not w.failed, w.failed[:5]
    judge_moved(c, w, "grow", 4, targets)


def test_a_replica_added_below_the_leaders_log_start_starts_there(cluster, tmp_path):
    """The head of the partition is gone (DeleteRecords inside a batch, whole segments below it
    deleted): the new replica cannot fetch from offset 0. As Kafka's, it empties its log and
    starts at the leader's log start (at the batch holding it), catches up, joins the ISR and,
    leading, serves from that log start with every acknowledged record."""
    from confluent_kafka import TopicPartition
    c = cluster
    c.start_all()
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    admin.create_topics([NewTopic("trimmed", num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2", "segment.bytes": str(1 << 20)})]
                        )["trimmed"].result(timeout=15)
    wait_for("every replica in sync", lambda: len(layout(c, "trimmed")[0][2]) == 3, timeout=15)
    bulk(c, "trimmed", 1, 3)
    cut = 2501
    done = admin.delete_records([TopicPartition("trimmed", 0, cut)])
    assert next(iter(done.values())).result(timeout=15).low_watermark == cut
    w = Writer(c, "trimmed", 1)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 300, timeout=30)
        grow(c, 4)
        before = layout(c, "trimmed")
        leader = before[0][0]
        # Node 4 takes the leader's place: once in sync it leads.
        targets = replace(before, leader, 4)
        f = execute(c, tmp_path, "trimmed", targets)
        verify_done(c, f, timeout=60)
        wait_layout(c, "trimmed", targets)
        wait_for("node 4 leads", lambda: layout(c, "trimmed")[0][0] == 4, timeout=30)
        marks = wait_for("node 4's watermarks", lambda: fresh_watermarks(c, "trimmed", 0), timeout=30)
        low = marks[0]
        assert low == cut, f"the new leader's log start is {low}, not {cut}"
        acked_during = len(w.acked)
        wait_for("acks after the move", lambda: len(w.acked) > acked_during + 200, timeout=30)
    finally:
        w.finish()
    assert not w.failed, w.failed[:5]
    read = read_all(c, "trimmed", 1, w.acked.values())
    assert read[0] and read[0][0][0] == cut, f"read from {read[0][:1]}"
    check(w, read)
    for b in c.nodes.values():
        b.stop()
    # Node 4 holds the batch with the cut and everything after it, as the other replicas do.
    mine = stored(c.dirs[4], "trimmed", 0)
    assert mine and mine[0][0] <= cut <= mine[0][0] + mine[0][1], f"node 4 starts at {mine[:1]}"
    # bulk()'s batches hold hundreds of records: the cut falls inside one (the straddling case).
    assert mine[0][0] < cut, f"the cut fell on a batch boundary: {mine[:1]}"
    hw = read[0][-1][0] + 1
    for n in targets[0]:
        theirs = [x for x in stored(c.dirs[n], "trimmed", 0) if x[0] >= mine[0][0] and x[0] + x[1] < hw]
        assert theirs == [x for x in mine if x[0] + x[1] < hw], f"node {n}'s batches differ from node 4's"


def test_moves_survive_kill9_of_the_destination_the_source_and_the_leader(cluster, tmp_path):
    c = cluster
    c.start_all()
    create(c, "kills", 3)
    w = Writer(c, "kills", 3)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 3000, timeout=60)
        grow(c, 4)
        before = layout(c, "kills")
        # Partition 0: node 4 replaces a follower; 1: replaces the leader; 2: replaces node 3.
        targets = {}
        for p, (leader, replicas, _) in before.items():
            old = leader if p == 1 else (3 if p == 2 else next(n for n in replicas if n != leader))
            targets[p] = [4 if n == old else n for n in replicas]
        f = execute(c, tmp_path, "kills", targets)
        # The destination dies at once (mid-catch-up), comes back.
        c.nodes[4].proc.send_signal(signal.SIGKILL)
        c.nodes[4].proc.wait()
        time.sleep(1)
        c.start(4)
        # The source of partition 2 and then partition 1's leader die while moves may still run.
        for victim in (3, before[1][0]):
            if victim == 4:
                continue
            c.nodes[victim].proc.send_signal(signal.SIGKILL)
            c.nodes[victim].proc.wait()
            time.sleep(SESSION_S + 1)
            c.start(victim)
        verify_done(c, f, timeout=180)
        wait_layout(c, "kills", targets, timeout=90)
        acked_during = len(w.acked)
        wait_for("acks after the moves", lambda: len(w.acked) > acked_during + 200, timeout=60)
    finally:
        w.finish()
    judge_moved(c, w, "kills", 3, targets)


SESSION_S = 3


def test_a_move_cancelled_midway_goes_back(cluster, tmp_path):
    c = cluster
    c.start_all()
    create(c, "cancel", 2)
    w = Writer(c, "cancel", 2)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 500, timeout=30)
        grow(c, 4)
        before = layout(c, "cancel")
        # While node 4 is down its brokers are refused as targets.
        c.nodes[4].stop()
        targets = replace(before, 3, 4)
        f = tmp_path / "plan.json"
        f.write_text(json.dumps(plan("cancel", targets)))
        rc, out = tool(c, "--execute", "--reassignment-json-file", str(f))
        # Node 4 left: its brokers are not live, so the tool's own check refuses ... or the
        # broker does (INVALID_REPLICA_ASSIGNMENT names the broker).
        assert rc != 0 and "4000" in out, out
        grow(c, 4)
        # A throttle of 1 byte/s on the move: node 4 takes at most one fetch and never catches
        # up while the producer writes on, so the moves stay in progress until cancelled.
        bulk(c, "cancel", 2, 3)
        rc, out = tool(c, "--execute", "--reassignment-json-file", str(f), "--throttle", "1")
        assert rc == 0, out
        time.sleep(3)
        rc, out = tool(c, "--list")
        assert "cancel-0" in out and "cancel-1" in out, out
        rc, out = tool(c, "--cancel", "--reassignment-json-file", str(f))
        assert rc == 0, out
        assert "Successfully cancelled partition reassignments for: cancel-0,cancel-1" in out, out
        back = {p: sorted(replicas) for p, (_, replicas, _) in before.items()}
        wait_for("back on the original replicas",
                 lambda: {p: sorted(r) for p, (_, r, isr) in layout(c, "cancel").items()} == back, timeout=60)
        rc, out = tool(c, "--list")
        assert "No partition reassignments found" in out, out
    finally:
        w.finish()
    final = {p: r for p, (_, r, _) in layout(c, "cancel").items()}
    judge_moved(c, w, "cancel", 2, final)


ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"


def test_kafka_leader_election_preferred_and_unclean(cluster, tmp_path):
    """`kafka-leader-election`: PREFERRED after a reorder hands leadership to the new first
    replica; UNCLEAN leads a partition whose only in-sync replica is gone with a live
    out-of-sync one, which the controller alone never does (unclean.leader.election.enable is
    false); the cluster default of that config, set dynamically, does it by itself."""
    c = cluster
    c.extra = {"auto.leader.rebalance.enable": "false"}
    c.start_all()
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    for topic in ("elect", "dynamic"):
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                      config={"min.insync.replicas": "1"})])[topic].result(timeout=15)
    wait_for("in sync", lambda: len(layout(c, "elect")[0][2]) == 3 and len(layout(c, "dynamic")[0][2]) == 3,
             timeout=15)
    # Reordered so that node 2 is preferred where it does not lead.
    for topic in ("elect", "dynamic"):
        leader = layout(c, topic)[0][0]
        reordered = [2, 1, 3] if leader != 2 else [1, 2, 3]
        execute(c, tmp_path, topic, {0: reordered})
        wait_for("reordered", lambda: layout(c, topic)[0][1] == reordered, timeout=15)
        assert layout(c, topic)[0][0] == leader, "a reorder alone does not move leadership"
    r = kafka_tool(ELECTION, "--bootstrap-server", c.bootstrap(), "--election-type", "PREFERRED",
                   "--all-topic-partitions")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Successfully completed leader election (PREFERRED) for partitions" in r.stdout, r.stdout
    assert "elect-0" in r.stdout and "dynamic-0" in r.stdout, r.stdout
    wait_for("the preferred replicas lead",
             lambda: all(layout(c, t)[0][0] == layout(c, t)[0][1][0] for t in ("elect", "dynamic")), timeout=15)
    # Both to [2, 3, 1] and node 2 leading.
    for topic in ("elect", "dynamic"):
        execute(c, tmp_path, topic, {0: [2, 3, 1]})
        wait_for("reordered", lambda: layout(c, topic)[0][1] == [2, 3, 1], timeout=15)
    r = kafka_tool(ELECTION, "--bootstrap-server", c.bootstrap(), "--election-type", "PREFERRED",
                   "--all-topic-partitions")
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for("node 2 leads both", lambda: layout(c, "elect")[0][0] == layout(c, "dynamic")[0][0] == 2,
             timeout=15)
    r = kafka_tool(ELECTION, "--bootstrap-server", c.bootstrap(), "--election-type", "PREFERRED",
                   "--topic", "elect", "--partition", "0")
    assert "Valid replica already elected for partitions elect-0" in r.stdout + r.stderr, r.stdout + r.stderr

    # Two followers stop: the leader alone in the ISR; then it dies too.
    survivor = 2
    others = [3, 1]
    for n in others:
        c.nodes[n].stop()
    wait_for("ISR shrunk to the leader",
             lambda: layout(c, "elect")[0][2] == layout(c, "dynamic")[0][2] == [survivor], timeout=30)
    c.nodes[survivor].proc.send_signal(signal.SIGKILL)
    c.nodes[survivor].proc.wait()
    time.sleep(SESSION_S + 1)
    # Node 3 comes back without the records only node 2 held: not eligible.
    c.start(others[0])
    time.sleep(2)
    assert layout(c, "elect")[0][0] == -1, "no clean leader: offline"
    r = kafka_tool(ELECTION, "--bootstrap-server", c.bootstrap(), "--election-type", "UNCLEAN",
                   "--topic", "elect", "--partition", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for("an unclean leader", lambda: layout(c, "elect")[0][0] == others[0], timeout=15)
    # The cluster default of unclean.leader.election.enable, altered at run time, lets the
    # controller do the same for a partition whose clean replicas are all gone.
    assert layout(c, "dynamic")[0][0] == -1
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", c.bootstrap(), "--alter",
                   "--entity-type", "brokers", "--entity-default", "--add-config",
                   "unclean.leader.election.enable=true")
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for("the controller elects uncleanly", lambda: layout(c, "dynamic")[0][0] == others[0], timeout=15)


def ringlog(c, *args):
    r = subprocess.run([BINARY, "cluster", "--bootstrap-server", c.bootstrap().split(",")[0], *args],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def moves_done(c):
    rc, out = ringlog(c, "status")
    assert rc == 0, out
    return "Reassignments in progress: 0" in out


def replicas_on(c, topic, node):
    return [p for p, (_, replicas, _) in layout(c, topic).items() if node in replicas]


def test_ringlog_rebalance_then_decommission_under_acks_all_load(cluster):
    """`ringlog cluster rebalance --execute` gives a new node its share (replicas and preferred
    leaders); `ringlog cluster decommission 2 --execute` empties node 2, which then stops; the
    producer never stops and the checker finds every acknowledged record."""
    c = cluster
    c.start_all()
    create(c, "life", 6)
    w = Writer(c, "life", 6)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 500, timeout=30)
        grow(c, 4)
        rc, out = ringlog(c, "rebalance")
        assert rc == 0 and "Not started" in out, out
        assert not replicas_on(c, "life", 4), "a plan alone moves nothing"
        rc, out = ringlog(c, "rebalance", "--execute")
        assert rc == 0 and "Started" in out, out
        wait_for("moves complete", lambda: moves_done(c), timeout=120)
        counts = {n: len(replicas_on(c, "life", n)) for n in (1, 2, 3, 4)}
        assert max(counts.values()) - min(counts.values()) <= 1, counts
        leaders = [l for l, _, _ in layout(c, "life").values()]
        assert 4 in leaders, f"node 4 leads its share once preferred: {leaders}"
        rc, out = ringlog(c, "rebalance")
        assert rc == 0 and "Plan: 0 partition(s) change" in out, out

        rc, out = ringlog(c, "decommission", "2", "--execute")
        assert rc == 0 and "Started" in out, out
        wait_for("moves complete", lambda: moves_done(c), timeout=120)
        assert not replicas_on(c, "life", 2)
        assert all(len(isr) == 3 for _, _, isr in layout(c, "life").values())
        c.nodes[2].stop()
        acked = len(w.acked)
        wait_for("acks without node 2", lambda: len(w.acked) > acked + 300, timeout=30)
        rc, out = ringlog(c, "decommission", "2")
        assert rc != 0 and "remove-node" in out, out
    finally:
        w.finish()
    targets = {p: r for p, (_, r, _) in layout(c, "life").items()}
    del c.nodes[2]
    judge_moved(c, w, "life", 6, targets)


def test_a_node_lost_for_good_is_repaired_to_full_replication(cluster):
    """Node 3 dies with its disk (kill -9, data dir wiped): every partition it held is
    under-replicated until `ringlog cluster remove-node 3 --execute` re-creates its replicas
    on the live nodes; then every partition is back to three in-sync replicas."""
    c = cluster
    c.start_all()
    grow(c, 4)
    create(c, "lost", 4)
    w = Writer(c, "lost", 4)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 500, timeout=30)
        rc, out = ringlog(c, "remove-node", "3")
        assert rc != 0 and "decommission" in out, out
        c.nodes[3].proc.send_signal(signal.SIGKILL)
        c.nodes[3].proc.wait()
        shutil.rmtree(c.dirs[3])
        del c.nodes[3]
        wait_for("node 3 gone", lambda: not ringlog(c, "remove-node", "3")[1].count("is live"), timeout=30)
        rc, out = ringlog(c, "remove-node", "3", "--execute")
        assert rc == 0 and "Started" in out, out
        wait_for("moves complete", lambda: moves_done(c), timeout=120)
        wait_for("full replication", lambda: all(len(isr) == 3 and 3 not in r
                                                 for _, r, isr in layout(c, "lost").values()), timeout=60)
        acked = len(w.acked)
        wait_for("acks after the repair", lambda: len(w.acked) > acked + 300, timeout=30)
    finally:
        w.finish()
    targets = {p: r for p, (_, r, _) in layout(c, "lost").items()}
    del c.dirs[3]
    judge_moved(c, w, "lost", 4, targets)


def test_automatic_repair_after_replica_repair_delay(cluster):
    """With replica.repair.delay.ms set, the controller itself re-creates the replicas of a node
    gone longer than that on the live nodes."""
    c = cluster
    c.extra = {"replica.repair.delay.ms": "4000"}
    c.start_all()
    grow(c, 4)
    create(c, "heal", 4)
    w = Writer(c, "heal", 4)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 300, timeout=30)
        victim = next(n for n in (1, 2, 3) if replicas_on(c, "heal", n))
        c.nodes[victim].proc.send_signal(signal.SIGKILL)
        c.nodes[victim].proc.wait()
        gone = time.time()
        del c.nodes[victim]
        wait_for("repaired without the lost node",
                 lambda: all(len(isr) == 3 and victim not in r for _, r, isr in layout(c, "heal").values()),
                 timeout=60)
        took = time.time() - gone
        assert took >= 4, f"repaired after {took:.1f} s: before the delay"
        # The node comes back: its stray replicas are removed, it holds nothing of the topic.
        c.start(victim)
        wait_for("the returning node drops its stray replicas",
                 lambda: not any(os.path.isdir(os.path.join(c.dirs[victim], f"heal-{p}")) for p in range(4)),
                 timeout=30)
    finally:
        w.finish()
    targets = {p: r for p, (_, r, _) in layout(c, "heal").items()}
    judge_moved(c, w, "heal", 4, targets)


def controller_node(c):
    md = AdminClient({"bootstrap.servers": c.bootstrap()}).list_topics(timeout=10)
    return md.controller_id // 1000


def test_a_move_survives_kill9_of_the_controller(cluster, tmp_path):
    """A move held back by a 1 byte/s throttle is in progress when the controller's node is
    killed -9; another node takes over as controller, the throttle is raised with the tool's
    --additional, the move completes on the asked replicas, nothing acknowledged is lost."""
    c = cluster
    c.start_all()
    create(c, "ctl", 2)
    grow(c, 4)
    w = Writer(c, "ctl", 2)
    try:
        wait_for("acks flowing", lambda: len(w.acked) > 500, timeout=30)
        bulk(c, "ctl", 2, 3)
        before = layout(c, "ctl")
        controller = controller_node(c)
        # Each partition hands a replica on a node other than the controller to node 4.
        targets = {}
        for p, (_, replicas, _) in before.items():
            old = next(n for n in replicas if n != controller)
            targets[p] = [4 if n == old else n for n in replicas]
        f = execute(c, tmp_path, "ctl", targets, "--throttle", "1")
        time.sleep(2)
        rc, out = tool(c, "--list")
        assert "ctl-0" in out and "ctl-1" in out, out
        c.nodes[controller].proc.send_signal(signal.SIGKILL)
        c.nodes[controller].proc.wait()
        wait_for("a new controller", lambda: controller_node(c) not in (controller, -1), timeout=30)
        c.start(controller)
        rc, out = tool(c, "--execute", "--additional", "--reassignment-json-file", str(f),
                       "--throttle", "100000000")
        assert rc == 0, out
        verify_done(c, f, timeout=120)
        wait_layout(c, "ctl", targets, timeout=60)
        acked = len(w.acked)
        wait_for("acks after the move", lambda: len(w.acked) > acked + 200, timeout=30)
    finally:
        w.finish()
    judge_moved(c, w, "ctl", 2, targets)


def test_a_throttled_move_holds_its_rate(cluster, tmp_path):
    """16 MiB move under --throttle 2 MiB/s: the new replica's node fetches at about that rate
    (its follower budget; one fetch of 1 MiB goes first, the budget holds one second), so the
    move takes about 7 s — not the fraction of a second it takes unthrottled — and the bytes its
    throttled fetches counted in 1-second windows stay near the rate."""
    from support.metrics import metric
    c = cluster
    c.start_all()
    create(c, "paced", 1)
    bulk(c, "paced", 1, 16)
    grow(c, 4)
    rate = 2 * 1024 * 1024
    before = layout(c, "paced")
    targets = replace(before, before[0][1][-1], 4)
    started = time.time()
    f = execute(c, tmp_path, "paced", targets, "--throttle", str(rate))
    samples = []
    while layout(c, "paced")[0][1] != targets[0] and time.time() - started < 60:
        samples.append((time.time(), metric(c.metrics_ports[4], "ringlog_replication_throttled_follower_bytes_total",
                                            default=0, shard="0")))
        time.sleep(1)
    took = time.time() - started
    verify_done(c, f)
    wait_layout(c, "paced", targets)
    # Each full second window (after the first free fetch) moved at most rate + 1 MiB of burst.
    per_second = [(b1 - b0) / (t1 - t0) for (t0, b0), (t1, b1) in zip(samples[1:], samples[2:])]
    print(f"throttled move of 16 MiB at {rate} B/s took {took:.1f} s; B/s per window: {per_second}")
    assert 5 <= took <= 20, f"took {took:.1f} s"
    assert per_second and max(per_second) <= rate * 1.6, per_second
