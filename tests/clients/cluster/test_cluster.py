"""A cluster of ringlog nodes sharing their metadata through a real etcd (Debian's etcd-server):
every node registers its shards under a lease, topics created through any node are placed over
every live node (replication factor 1 here; cluster/test_replication.py replicates), and
every node's Metadata lists every broker and every partition's leader, so Kafka clients produce
to and consume from the whole cluster through any node. A node that dies takes its partitions
offline (LEADER_NOT_AVAILABLE) until it returns; a second process with a live node's node.id is
refused at start."""
import os
import signal
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from support import wire
from support.broker import BINARY, Broker
from support.etcd import Etcd
from support.kafka import kafka_tool
from support.waiting import wait_for


@pytest.fixture
def cluster():
    etcd = Etcd()
    nodes = []

    def node(node_id, shards=2, cluster_id="c1", data_dir=None):
        b = Broker(shards=shards, data_dir=data_dir, settings={
            "node.id": node_id, "metadata.store": "etcd", "metadata.etcd.endpoints": etcd.endpoint,
            "cluster.id": cluster_id, "broker.session.timeout.ms": 3000,
            "group.initial.rebalance.delay.ms": 0})
        nodes.append(b)
        return b

    yield etcd, node
    for b in nodes:
        b.cleanup()
    etcd.stop()


def up(node, ids, shards=1):
    """Starts nodes `ids` and waits until the first one lists all their brokers."""
    nodes = [node(i, shards=shards).start() for i in ids]
    admin = AdminClient({"bootstrap.servers": nodes[0].bootstrap})
    wait_for(f"{len(ids) * shards} brokers",
             lambda: len(admin.list_topics(timeout=10).brokers) == len(ids) * shards, timeout=15)
    return nodes, admin


def test_topics_spread_over_the_cluster_and_clients_use_every_node(cluster):
    _etcd, node = cluster
    nodes = [node(i).start() for i in (1, 2, 3)]
    admin = AdminClient({"bootstrap.servers": nodes[0].bootstrap})
    # Every node sees every broker (3 nodes x 2 shards).
    for n in nodes:
        md = wait_for("6 brokers", lambda: (lambda m: m if len(m.brokers) == 6 else None)(
            AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=10)), timeout=15)
        assert sorted(md.brokers) == [1000, 1001, 2000, 2001, 3000, 3001]
    admin.create_topics([NewTopic("spread", num_partitions=12, replication_factor=1)])["spread"].result(timeout=15)
    # Leaders spread evenly: 4 partitions per node, 2 per shard.
    md = wait_for("12 partitions seen from node 3", lambda: (lambda m: m if "spread" in m.topics else None)(
        AdminClient({"bootstrap.servers": nodes[2].bootstrap}).list_topics(timeout=10)), timeout=15)
    leaders = sorted(p.leader for p in md.topics["spread"].partitions.values())
    assert leaders == sorted([1000, 1001, 2000, 2001, 3000, 3001] * 2), leaders
    status = subprocess.run([BINARY, "cluster", "--bootstrap-server", nodes[1].bootstrap, "status"],
                            capture_output=True, text=True, timeout=30)
    assert "Nodes: 3\tBrokers: 6" in status.stdout and "Offline: 0" in status.stdout, status.stdout
    # Node 1 campaigned first: it is the controller, on every node's word.
    for n in nodes:
        asker = AdminClient({"bootstrap.servers": n.bootstrap})
        described = wait_for("controller known", lambda: (lambda d: d if d.controller is not None else None)(
            asker.describe_cluster().result(timeout=10)), timeout=15)
        assert described.controller.id == 1000, (n.bootstrap, described.controller)

    # Produce through node 3's bootstrap, consume through node 2's: every record, in order per
    # partition, each from the node that holds it.
    p = Producer({"bootstrap.servers": nodes[2].bootstrap, "linger.ms": 5, "enable.idempotence": True})
    sent = {}
    for i in range(1200):
        part = i % 12
        p.produce("spread", value=f"v{i}".encode(), partition=part)
        sent.setdefault(part, []).append(f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": nodes[1].bootstrap, "group.id": "g-spread",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["spread"])
    got = {}
    deadline = time.time() + 60
    while sum(len(v) for v in got.values()) < 1200 and time.time() < deadline:
        m = c.poll(1)
        if m is None or m.error():
            continue
        got.setdefault(m.partition(), []).append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == sent
    # Each node's data dir holds exactly the partitions it leads.
    for n, nid in zip(nodes, (1, 2, 3)):
        dirs = sorted(d for d in os.listdir(n.data_dir) if d.startswith("spread-"))
        assert len(dirs) == 4, (nid, dirs)

    # A replication factor larger than the live nodes is refused; 3 puts one replica on each.
    with pytest.raises(Exception) as e:
        admin.create_topics([NewTopic("rf4", num_partitions=1, replication_factor=4)])["rf4"].result(timeout=10)
    assert "larger than the 3 live node" in str(e.value), str(e.value)
    admin.create_topics([NewTopic("rf3", num_partitions=1, replication_factor=3)])["rf3"].result(timeout=10)
    p = AdminClient({"bootstrap.servers": nodes[0].bootstrap}).list_topics(timeout=10).topics["rf3"].partitions[0]
    assert sorted(r // 1000 for r in p.replicas) == [1, 2, 3] and sorted(p.isrs) == sorted(p.replicas), p


def test_new_partitions_are_served_by_their_leaders_when_the_creation_is_answered(cluster):
    """CreateTopics and CreatePartitions answer once every node holding a new partition serves
    it (as Kafka's brokers waited for a new topic's metadata to reach them): a produce sent to
    each new partition's leader right after the answer succeeds the first time, where a node
    that had not applied the change yet answered UNKNOWN_TOPIC_OR_PARTITION."""
    _etcd, node = cluster
    nodes, admin = up(node, [1, 2, 3], shards=2)
    brokers = admin.list_topics(timeout=10).brokers
    # Connected before the topics exist: nothing but the produce itself after each answer.
    socks = {b: wire.connect(f"{m.host}:{m.port}") for b, m in brokers.items()}
    batch = wire.record_batch([b"first"])

    def answers(topic, partitions):
        """{partition: [error code from each broker]}: the leader answers 0, the others refuse."""
        out = {}
        for p in partitions:
            for s in socks.values():
                s.sendall(wire.produce_v3(topic, p, batch))
            out[p] = sorted(wire.produce_v3_error_code(wire.read_response(s))
                            for s in socks.values())
        return out

    for i in range(4):
        topic = f"fresh-{i}"
        admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=1)])[topic].result(timeout=15)
        got = answers(topic, range(6))
        assert all(codes.count(0) == 1 for codes in got.values()), (topic, got)
        admin.create_partitions([NewPartitions(topic, 9)])[topic].result(timeout=15)
        got = answers(topic, range(6, 9))
        assert all(codes.count(0) == 1 for codes in got.values()), (topic, "added", got)
    for s in socks.values():
        s.close()


def test_a_paused_replica_node_delays_create_topics_only_up_to_its_timeout(cluster):
    """CreateTopics waits for the new partitions' nodes to serve them only up to the request's
    timeout: a node paused (SIGSTOP) inside its lease accepts the connection and never answers,
    and the creation is still answered, once the timeout has passed."""
    _etcd, node = cluster
    nodes, admin = up(node, [1, 2, 3])
    nodes[2].proc.send_signal(signal.SIGSTOP)
    try:
        # Within node 3's lease (3 s): it still gets replicas of the new topic.
        fut = admin.create_topics([NewTopic("while-paused", num_partitions=6, replication_factor=1)],
                                  operation_timeout=1.5)["while-paused"]
        fut.result(timeout=20)
    finally:
        nodes[2].proc.send_signal(signal.SIGCONT)


def test_a_dead_node_takes_its_partitions_offline_and_back(cluster):
    etcd, node = cluster
    nodes, admin = up(node, (1, 2))
    admin.create_topics([NewTopic("half", num_partitions=2, replication_factor=1)])["half"].result(timeout=15)
    p = Producer({"bootstrap.servers": nodes[0].bootstrap})
    for part in (0, 1):
        p.produce("half", value=b"before", partition=part)
    assert p.flush(15) == 0
    on_node2 = [pid for pid, pm in admin.list_topics(timeout=10).topics["half"].partitions.items() if pm.leader == 2000]
    assert len(on_node2) == 1
    # Node 2 stops (SIGTERM revokes its lease at once): its partition goes offline.
    data2 = nodes[1].data_dir
    nodes[1].stop()

    def offline():
        pm = admin.list_topics(timeout=10).topics["half"].partitions[on_node2[0]]
        return pm.leader == -1 and pm.error is not None
    wait_for("offline partition", offline, timeout=15)
    # `ringlog cluster status` and Kafka's Admin describeCluster see the same cluster.
    status = subprocess.run([BINARY, "cluster", "--bootstrap-server", nodes[0].bootstrap, "status",
                             "--etcd", etcd.endpoint], capture_output=True, text=True, timeout=30)
    assert status.returncode == 0, status.stderr
    assert "Cluster: c1" in status.stdout and "Nodes: 1" in status.stdout, status.stdout
    assert f"offline: half-{on_node2[0]}" in status.stdout, status.stdout
    # Lease health as etcd holds it: node 1 kept alive (3 s TTL), node 2's lease revoked.
    leases = [l.strip() for l in status.stdout.split("Leases (etcd")[1].splitlines()[1:]]
    assert len(leases) == 1 and leases[0].startswith("node 1: broker epoch "), status.stdout
    assert "s of 3 s left, healthy" in leases[0], status.stdout
    described = admin.describe_cluster().result(timeout=10)
    assert described.cluster_id == "c1" and [n.id for n in described.nodes] == [1000]
    # A second process with node 1's id is refused while node 1 lives.
    dup = node(1, shards=1)
    with pytest.raises(RuntimeError) as e:
        dup.start()
    assert "already registered" in str(e.value)
    # Node 2 returns with its data: the partition is back, with its record.
    back = node(2, shards=1, data_dir=data2).start()
    wait_for("partition back", lambda: admin.list_topics(timeout=10).topics["half"].partitions[on_node2[0]].leader == 2000,
             timeout=15)
    c = Consumer({"bootstrap.servers": back.bootstrap, "group.id": "g-half", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("half", on_node2[0], 0)])
    m = wait_for("record after the return", lambda: (lambda m: m if m is not None and not m.error() else None)(c.poll(1)),
                 timeout=15)
    assert m.value() == b"before"
    c.close()
    # The controller (node 1, first to campaign) is killed: node 2 is elected once node 1's
    # lease expires, and says so.
    nodes[0].kill9()

    def controller():
        # A fresh client each time: librdkafka sends DescribeCluster to the controller it last
        # learnt of, and keeps its metadata for minutes.
        asker = AdminClient({"bootstrap.servers": back.bootstrap})
        try:
            return asker.describe_cluster(request_timeout=3).result(timeout=5).controller.id
        except Exception:  # the dead node still registered, chosen as the target
            return None
    wait_for("node 2 elected controller", lambda: controller() == 2000, timeout=30)


def test_losing_etcd_stops_metadata_changes_not_the_data_path(cluster):
    etcd, node = cluster
    nodes, admin = up(node, (1, 2))
    admin.create_topics([NewTopic("steady", num_partitions=2, replication_factor=1)])["steady"].result(timeout=15)
    # etcd dies for twice the broker session timeout (3 s).
    etcd.kill9()
    p = Producer({"bootstrap.servers": nodes[1].bootstrap, "linger.ms": 1})
    values = []
    start = time.time()
    while time.time() - start < 6:
        v = f"x{len(values)}".encode()
        p.produce("steady", value=v, partition=len(values) % 2)
        values.append(v)
        p.poll(0)
        time.sleep(0.02)
    assert p.flush(15) == 0, "produce failed while etcd was down"
    # No commits: __consumer_offsets cannot be created while etcd is down (a metadata change),
    # and librdkafka's close() would wait for a coordinator to commit to.
    c = Consumer({"bootstrap.servers": nodes[0].bootstrap, "group.id": "g-steady-unused",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition("steady", 0, 0), TopicPartition("steady", 1, 0)])
    got = set()
    deadline = time.time() + 20
    while len(got) < len(values) and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()
    assert got == set(values), f"{len(got)} of {len(values)} read while etcd was down"
    # etcd returns: both nodes are registered again and metadata changes work again.
    etcd.restart()
    wait_for("both nodes registered again", lambda: len(
        AdminClient({"bootstrap.servers": nodes[1].bootstrap}).list_topics(timeout=10).brokers) == 2, timeout=30)
    admin.create_topics([NewTopic("after", num_partitions=2, replication_factor=1)])["after"].result(timeout=30)
    md = wait_for("both nodes back", lambda: (lambda m: m if len(m.brokers) == 2 and "after" in m.topics else None)(
        AdminClient({"bootstrap.servers": nodes[1].bootstrap}).list_topics(timeout=10)), timeout=30)
    assert sorted(p.leader for p in md.topics["after"].partitions.values()) == [1000, 2000]


def test_kafkas_own_topic_tool_describes_the_cluster(cluster):
    _etcd, node = cluster
    nodes = [node(i, shards=1).start() for i in (1, 2, 3)]
    wait_for("3 brokers", lambda: len(AdminClient({"bootstrap.servers": nodes[0].bootstrap}).list_topics(timeout=10).brokers) == 3,
             timeout=15)
    created = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", nodes[1].bootstrap,
                         "--create", "--topic", "described", "--partitions", "3", "--replication-factor", "1")
    assert created.returncode == 0, created.stdout + created.stderr
    r = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", nodes[2].bootstrap,
                   "--describe", "--topic", "described")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [l for l in r.stdout.splitlines() if "Partition:" in l]
    assert len(lines) == 3, r.stdout
    leaders = sorted(l.split("Leader:")[1].split()[0] for l in lines)
    assert leaders == ["1000", "2000", "3000"], r.stdout
    for l in lines:
        leader = l.split("Leader:")[1].split()[0]
        assert f"Replicas: {leader}" in l and f"Isr: {leader}" in l, l
    assert "PartitionCount: 3" in r.stdout and "ReplicationFactor: 1" in r.stdout, r.stdout
    # Replicated: every partition on all three nodes, all in sync; Kafka's producer perf tool
    # writes to it with acks=all.
    created = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", nodes[0].bootstrap,
                         "--create", "--topic", "replicated", "--partitions", "3", "--replication-factor", "3",
                         "--config", "min.insync.replicas=2")
    assert created.returncode == 0, created.stdout + created.stderr

    def described():
        r = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", nodes[2].bootstrap,
                       "--describe", "--topic", "replicated")
        lines = [l for l in r.stdout.splitlines() if "Partition:" in l]
        in_sync = len(lines) == 3 and all(len(l.split("Isr:")[1].split()[0].split(",")) == 3 for l in lines)
        return (r, lines) if in_sync else None
    r, lines = wait_for("every replica in sync", described, timeout=60)
    assert "ReplicationFactor: 3" in r.stdout and "min.insync.replicas=2" in r.stdout, r.stdout
    for l in lines:
        leader = l.split("Leader:")[1].split()[0]
        replicas = l.split("Replicas:")[1].split()[0].split(",")
        assert sorted(replicas) == ["1000", "2000", "3000"] and leader in replicas, l
    assert sorted(l.split("Leader:")[1].split()[0] for l in lines) == ["1000", "2000", "3000"], r.stdout
    perf = kafka_tool("org.apache.kafka.tools.ProducerPerformance", "--topic", "replicated",
                      "--num-records", "20000", "--record-size", "100", "--throughput", "-1",
                      "--producer-props", "acks=all", f"bootstrap.servers={nodes[1].bootstrap}")
    assert perf.returncode == 0, perf.stdout + perf.stderr
    assert "20000 records sent" in perf.stdout, perf.stdout
    offsets = kafka_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", nodes[0].bootstrap,
                         "--topic", "replicated")
    assert offsets.returncode == 0, offsets.stdout + offsets.stderr
    ends = [int(l.rsplit(":", 1)[1]) for l in offsets.stdout.split()]
    assert sum(ends) == 20000, offsets.stdout
    # A manual replica assignment over the cluster's brokers (node * 1000 + shard): each
    # partition's replicas where named, the first leading; two replicas on one node refused.
    created = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", nodes[0].bootstrap,
                         "--create", "--topic", "assigned", "--replica-assignment", "2000:3000,3000:1000")
    assert created.returncode == 0, created.stdout + created.stderr

    def assigned():
        r = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", nodes[1].bootstrap,
                       "--describe", "--topic", "assigned")
        lines = [l for l in r.stdout.splitlines() if "Partition:" in l]
        return lines if len(lines) == 2 and all(
            len(l.split("Isr:")[1].split()[0].split(",")) == 2 for l in lines) else None
    lines = wait_for("the assigned replicas in sync", assigned, timeout=60)
    assert [(l.split("Leader:")[1].split()[0], l.split("Replicas:")[1].split()[0]) for l in lines] == [
        ("2000", "2000,3000"), ("3000", "3000,1000")], lines
    refused = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", nodes[0].bootstrap,
                         "--create", "--topic", "same-node", "--replica-assignment", "1000:1001")
    assert refused.returncode != 0 and "InvalidReplicaAssignment" in refused.stdout + refused.stderr


def test_a_node_killed_and_restarted_at_once_rejoins_with_every_acknowledged_record(cluster):
    _etcd, node = cluster
    nodes, admin = up(node, (1, 2))
    admin.create_topics([NewTopic("crash", num_partitions=4, replication_factor=1)])["crash"].result(timeout=15)
    acked = {}

    def on_ack(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()

    p = Producer({"bootstrap.servers": nodes[0].bootstrap, "linger.ms": 1, "acks": 1})
    for i in range(400):
        p.produce("crash", value=f"c{i}".encode(), partition=i % 4, on_delivery=on_ack)
    assert p.flush(15) == 0
    # kill -9 node 2 and start it again at once, on the same data: its old registration still
    # holds its lease for up to broker.session.timeout.ms; the new process waits it out.
    data2 = nodes[1].data_dir
    nodes[1].kill9()
    started = time.time()
    again = node(2, shards=1, data_dir=data2).start()
    wait_for("node 2 registered again", lambda: len(
        AdminClient({"bootstrap.servers": again.bootstrap}).list_topics(timeout=10).brokers) == 2, timeout=20)
    assert time.time() - started < 3 + 2 + 5, "rejoined within the session timeout and a margin"
    c = Consumer({"bootstrap.servers": again.bootstrap, "group.id": "g-crash",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition("crash", part, 0) for part in range(4)])
    seen = {}
    deadline = time.time() + 30
    while len(seen) < len(acked) and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen[(m.partition(), m.offset())] = m.value()
    c.close()
    assert len(acked) == 400
    assert seen == acked, "every acknowledged record at its offset, nothing else"


def test_topic_deletion_and_new_partitions_across_the_cluster(cluster):
    _etcd, node = cluster
    nodes, admin = up(node, (1, 2))
    admin.create_topics([NewTopic("grow", num_partitions=2, replication_factor=1)])["grow"].result(timeout=15)
    from confluent_kafka.admin import NewPartitions
    admin.create_partitions([NewPartitions("grow", 6)])["grow"].result(timeout=15)
    md = wait_for("6 partitions seen by node 2", lambda: (lambda m: m if "grow" in m.topics and len(m.topics["grow"].partitions) == 6 else None)(
        AdminClient({"bootstrap.servers": nodes[1].bootstrap}).list_topics(timeout=10)), timeout=15)
    leaders = sorted(p.leader for p in md.topics["grow"].partitions.values())
    assert leaders == [1000, 1000, 1000, 2000, 2000, 2000], leaders
    # (librdkafka may have asked node 1: node 2 opens its new partitions when it applies the
    # change, shortly.)
    wait_for("node 2 holds 3 partitions",
             lambda: sum(d.startswith("grow-") for d in os.listdir(nodes[1].data_dir)) == 3, timeout=15)
    # Deleted through node 2: both nodes drop their partitions and folders.
    admin2 = AdminClient({"bootstrap.servers": nodes[1].bootstrap})
    admin2.delete_topics(["grow"])["grow"].result(timeout=15)
    for n in nodes:
        wait_for("folders removed", lambda: not any(d.startswith("grow-") for d in os.listdir(n.data_dir)), timeout=15)
    assert "grow" not in admin.list_topics(timeout=10).topics
