"""Brokers that authenticate to each other: three ringlog nodes over a real etcd whose
inter-broker listener is SASL_SSL (TLS checked against the test CA, SCRAM-SHA-512 as the user
`broker`, sessions limited to 4 s by connections.max.reauth.ms), with ACLs on and a PLAINTEXT
listener that lets nobody do anything. Followers fetch over
the SASL_SSL listener (the ISR fills), acks=all writes survive the leader's kill -9 with every
acknowledged value read back at its offset, and a node whose inter-broker password is wrong is
refused by the leader — it stays out of the ISR and says why in its log — until it restarts with
the right one. No follower is ever closed for an expired session: they authenticate again on
their connections."""
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker import Broker, free_port_block
from support.certs import make_certs
from support.etcd import Etcd
from support.waiting import wait_for

BROKER_PASSWORD = "broker-Secret pw"
ADMIN_PASSWORD = "admin-pw"
TOPIC = "secure-replicated"


def jaas(user, password):
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{password}";')


class SecureCluster:
    def __init__(self, certs):
        self.certs = certs
        self.etcd = Etcd()
        self.nodes, self.dirs, self.all = {}, {}, []

    def start(self, node_id, broker_password=BROKER_PASSWORD):
        b = Broker(shards=1, data_dir=self.dirs.get(node_id))
        b.sasl_ssl = free_port_block(1)
        while b.sasl_ssl == b.port:
            b.sasl_ssl = free_port_block(1)
        b.extra_ports = [b.sasl_ssl]
        b.settings = {
            "node.id": node_id, "metadata.store": "etcd", "metadata.etcd.endpoints": self.etcd.endpoint,
            "cluster.id": "secure", "broker.session.timeout.ms": 3000, "replica.lag.time.max.ms": 3000,
            "listeners": f"SASL_SSL://127.0.0.1:{b.sasl_ssl},PLAINTEXT://127.0.0.1:{b.port}",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas("broker", broker_password),
            "ssl.keystore.location": self.certs["broker.pem"],
            "ssl.truststore.location": self.certs["ca"],
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker;User:admin",
            # sessions end every 4 s: followers (and librdkafka) authenticate again on their
            # connections (KIP-368) instead of being cut off
            "connections.max.reauth.ms": 4000,
        }
        if node_id == 1:
            # The users, made once (a node given another password would replace it).
            b.serve_args = ["--add-scram", f"SCRAM-SHA-512=[name=broker,password={BROKER_PASSWORD}]",
                            "--add-scram", f"SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD}]"]
        if node_id not in self.dirs:
            self.dirs[node_id] = b.data_dir
            self.all.append(b)
        self.nodes[node_id] = b.start()
        return b

    def conf(self):
        return {"bootstrap.servers": ",".join(f"127.0.0.1:{b.sasl_ssl}" for b in self.nodes.values()
                                              if b.proc.poll() is None),
                "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD,
                "ssl.ca.location": self.certs["ca"]}

    def partition(self, conf=None):
        """(leader node, [ISR nodes]) of partition 0 as the cluster (or the node `conf`
        bootstraps from) reports it."""
        t = AdminClient(conf or self.conf()).list_topics(timeout=10).topics.get(TOPIC)
        if t is None or t.error is not None or 0 not in t.partitions:
            return (-1, [])
        p = t.partitions[0]
        return (p.leader // 1000 if p.leader >= 0 else -1, sorted(r // 1000 for r in p.isrs))

    def views(self):
        """Each live node's own answer for partition 0: {node: (leader, [ISR])} (diagnostics)."""
        out = {}
        for n, b in self.nodes.items():
            if b.proc.poll() is not None:
                continue
            try:
                out[n] = self.partition({**self.conf(), "bootstrap.servers": f"127.0.0.1:{b.sasl_ssl}"})
            except Exception as e:  # a diagnostic must not hide the failure it explains
                out[n] = repr(e)
        return out

    def stop(self):
        for b in self.nodes.values():
            b.stop()
        for b in self.all:
            b.cleanup()
        self.etcd.stop()


@pytest.fixture
def cluster(tmp_path_factory):
    c = SecureCluster(make_certs(str(tmp_path_factory.mktemp("certs"))))
    yield c
    c.stop()


def produce(conf, values):
    acked, errors = {}, []
    p = Producer({**conf, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 30000})
    for v in values:
        p.produce(TOPIC, v, partition=0,
                  on_delivery=lambda err, m: errors.append(err) if err else acked.__setitem__(m.value(), m.offset()))
    assert p.flush(60) == 0
    return acked, errors


def read_back(conf, count):
    c = Consumer({**conf, "group.id": "check-" + uuid.uuid4().hex, "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got, deadline = [], time.time() + 60
    while len(got) < count and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    c.close()
    return got


def isr_lines(b, last=10):
    return [l for l in full_log(b).splitlines() if "isr" in l.lower()][-last:]


def full_log(b):
    with open(b.log_path, "rb") as f:
        return f.read().decode(errors="replace")


def test_followers_fetch_over_sasl_ssl_and_a_wrong_broker_password_is_refused(cluster):
    for n in (1, 2, 3):
        cluster.start(n)
    admin = AdminClient(cluster.conf())
    wait_for("three brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=15)
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[TOPIC].result(timeout=15)
    # Only authenticated fetches can fill the ISR: the inter-broker listener is SASL_SSL.
    wait_for("every replica in sync", lambda: cluster.partition()[1] == [1, 2, 3], timeout=30)

    first = [f"a-{i}".encode() for i in range(300)]
    acked, errors = produce(cluster.conf(), first)
    assert not errors and len(acked) == 300, errors[:3]
    leader = cluster.partition()[0]
    cluster.nodes[leader].kill9()
    wait_for("a new leader", lambda: cluster.partition()[0] not in (-1, leader), timeout=30)
    second = [f"b-{i}".encode() for i in range(300)]
    more, errors = produce(cluster.conf(), second)
    assert not errors and len(more) == 300, errors[:3]
    acked.update(more)
    cluster.start(leader)
    wait_for("the old leader back in sync", lambda: cluster.partition()[1] == [1, 2, 3], timeout=60)
    got = read_back(cluster.conf(), 600)
    assert [v for _, v in got] == first + second
    assert all(acked[v] == o for o, v in got), "an acknowledged value is not at its offset"

    # A follower with the wrong inter-broker password: refused, out of the ISR, and it says why.
    leader = cluster.partition()[0]
    follower = next(n for n in (1, 2, 3) if n != leader)
    cluster.nodes[follower].stop()
    cluster.start(follower, broker_password="not-the-broker-password")
    wait_for("the follower's refusal logged",
             lambda: "refused this follower's authentication" in full_log(cluster.nodes[follower]), timeout=30)
    assert "SCRAM-SHA-512 authentication failed" in full_log(cluster.nodes[follower])
    try:
        wait_for("the ISR without it", lambda: follower not in cluster.partition()[1], timeout=30)
    except AssertionError as e:
        # Seen once in ~30 runs; say what each node reports and what each logged of ISR changes.
        raise AssertionError(f"{e}; leader {leader}, follower {follower}; {cluster.views()}; "
                             f"ISR lines logged: { {n: isr_lines(b) for n, b in cluster.nodes.items()} }") from None
    produce(cluster.conf(), [b"while-refused"])
    time.sleep(4)  # past replica.lag.time.max.ms: it must not have caught up
    assert follower not in cluster.partition()[1]
    assert "failed authentication" in full_log(cluster.nodes[leader])
    for b in cluster.nodes.values():
        log = full_log(b)
        assert BROKER_PASSWORD not in log and "not-the-broker-password" not in log and ADMIN_PASSWORD not in log
        # every follower renewed its session in time: none was closed for an expired one
        assert "SASL session of broker expired" not in log, log[-3000:]
    cluster.nodes[follower].stop()
    cluster.start(follower)
    wait_for("back in sync with the right password", lambda: cluster.partition()[1] == [1, 2, 3], timeout=60)
