"""librdkafka's own test suite against ringlog: the C client's tests, unchanged, built from the
librdkafka release that @confluentinc/kafka-javascript vendors
(scripts/librdkafka/fetch-librdkafka-tests.sh), run by its own runner against one node and
against a 3-node cluster, as against the brokers librdkafka's CI starts (trivup: an ACL
authorizer with allow.everyone.if.no.acl.found=true).

0011_produce_batch: batches per partition, per-message partitions, and KIP-467 — a batch of 100
records to a compacted topic, 10 without a key: exactly those 10 fail INVALID_RECORD, the other
90 _INVALID_DIFFERENT_RECORD.

0081_admin: the Admin API as librdkafka tests it — CreateTopics / DeleteTopics /
CreatePartitions, ACLs, AlterConfigs and IncrementalAlterConfigs on topics, brokers (dynamic
broker configs, APPEND/SUBTRACT on `log.cleanup.policy`) and groups (KIP-848's group configs),
DescribeConfigs, DeleteRecords, ListConsumerGroups, DescribeConsumerGroups (static members, a
delete one session after they stopped), DescribeTopics / DescribeCluster with authorized
operations, DeleteGroups, DeleteConsumerGroupOffsets, ListOffsets, Alter/ListConsumerGroupOffsets,
SCRAM credentials. Its single node has one shard: the test spreads a topic's replicas over the
brokers it sees, and the shards of one node (each a broker) never hold two replicas of one
partition."""
import os
import subprocess

import pytest
from confluent_kafka.admin import AdminClient

from support.broker import REPO, Broker
from support.etcd import Etcd
from support.waiting import wait_for

# What the runner assumes of the broker (its tests gate features on it): the Kafka ringlog
# answers as.
KAFKA_VERSION = "4.1.1"
TESTS = ["0011", "0081"]
# shards of the single node per test (see 0081_admin above)
SHARDS = {"0011": 2, "0081": 1}
TRIVUP = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
          "allow.everyone.if.no.acl.found": "true", "group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def tests_dir():
    r = subprocess.run([os.path.join(REPO, "scripts", "librdkafka", "fetch-librdkafka-tests.sh")],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def run_suite(tests_dir, bootstrap, tmp_path, tests):
    conf = tmp_path / "test.conf"
    conf.write_text(f"bootstrap.servers={bootstrap}\ntest.topic.random=true\n")
    env = dict(os.environ, TESTS=",".join(tests), TEST_KAFKA_VERSION=KAFKA_VERSION,
               RDKAFKA_TEST_CONF=str(conf))
    env.pop("CI", None)  # (CI=true makes the runner run tests in parallel with longer timeouts)
    r = subprocess.run(["./run-test.sh", "-Q", "-E"], cwd=tests_dir, env=env, capture_output=True, text=True,
                       timeout=900)
    out = r.stdout + r.stderr
    (tmp_path / "suite.log").write_text(out)
    assert r.returncode == 0 and "ALL TESTS PASSED" in out, out[-6000:]


@pytest.mark.parametrize("test", TESTS)
def test_librdkafka_suite_against_one_node(tests_dir, tmp_path, test):
    b = Broker(shards=SHARDS[test], settings=TRIVUP).start()
    try:
        run_suite(tests_dir, b.bootstrap, tmp_path, [test])
    finally:
        b.cleanup()


@pytest.mark.parametrize("test", TESTS)
def test_librdkafka_suite_against_a_three_node_cluster(tests_dir, tmp_path, test):
    etcd = Etcd()
    nodes = []
    try:
        for node_id in (1, 2, 3):
            nodes.append(Broker(shards=1, settings={
                **TRIVUP, "node.id": node_id, "metadata.store": "etcd", "metadata.etcd.endpoints": etcd.endpoint,
                "cluster.id": "librdkafka", "default.replication.factor": 3,
                "offsets.topic.replication.factor": 3}).start())
        admin = AdminClient({"bootstrap.servers": nodes[0].bootstrap})
        wait_for("3 brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=20)
        run_suite(tests_dir, ",".join(n.bootstrap for n in nodes), tmp_path, [test])
    finally:
        for n in nodes:
            n.cleanup()
        etcd.stop()
