"""ACLs: the same ACL set, made with Kafka's own `kafka-acls` tool (org.apache.kafka.tools.AclCommand),
against ringlog and Apache Kafka 4.1.1 with its StandardAuthorizer in one run; every case of a table
(produce, consume, list topics, commit offsets, describe a group, create and delete topics, as three
SCRAM users over SASL_PLAINTEXT) must be allowed or denied alike. PREFIXED and LITERAL patterns,
wildcards, DENY over ALLOW, DESCRIBE implied by READ/WRITE, a user with no ACLs at all.

Both brokers: a PLAINTEXT listener whose principal (User:ANONYMOUS) is a super user, used only to set
things up (users, ACLs, topics with records), and a SASL_PLAINTEXT listener with SCRAM-SHA-512 for the
cases. The table is printed and written to target/acl-comparison.md.
"""
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from support.broker import REPO, Broker, free_port_block
from support.kafka import ApacheKafka, kafka_tool

USERS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
TOPICS = ["orders-eu", "orders-secret", "orders-old", "payments", "other"]

# kafka-acls arguments, one binding set each
ACLS = [
    ["--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe",
     "--topic", "orders-", "--resource-pattern-type", "prefixed"],
    ["--deny-principal", "User:alice", "--operation", "Write", "--topic", "orders-secret"],
    ["--allow-principal", "User:alice", "--operation", "Read", "--topic", "payments"],
    ["--allow-principal", "User:alice", "--operation", "Delete", "--topic", "orders-old"],
    ["--allow-principal", "User:alice", "--operation", "Read", "--group", "g-alice"],
    ["--allow-principal", "User:bob", "--operation", "All", "--topic", "*"],
    ["--deny-principal", "User:bob", "--operation", "Read", "--topic", "orders-", "--resource-pattern-type", "prefixed"],
    ["--allow-principal", "User:bob", "--operation", "Read", "--group", "g-", "--resource-pattern-type", "prefixed"],
]

# (user, action, target): actions run in this order (creations and deletions last)
CASES = [
    ("alice", "produce", "orders-eu"), ("alice", "produce", "orders-secret"), ("alice", "produce", "payments"),
    ("bob", "produce", "orders-eu"), ("bob", "produce", "other"), ("carol", "produce", "other"),
    ("alice", "consume", "payments"), ("alice", "consume", "orders-eu"), ("bob", "consume", "orders-eu"),
    ("bob", "consume", "payments"), ("carol", "consume", "payments"),
    ("alice", "list-topics", ""), ("bob", "list-topics", ""), ("carol", "list-topics", ""),
    ("alice", "commit", "g-alice/payments"), ("alice", "commit", "g-other/payments"),
    ("alice", "commit", "g-alice/orders-eu"), ("bob", "commit", "g-bob/payments"),
    ("carol", "commit", "g-alice/payments"),
    ("alice", "describe-group", "g-alice"), ("carol", "describe-group", "g-alice"),
    ("alice", "create-topic", "orders-new"), ("bob", "create-topic", "bob-new"), ("carol", "create-topic", "carol-new"),
    ("carol", "delete-topic", "payments"), ("alice", "delete-topic", "payments"), ("alice", "delete-topic", "orders-old"),
]


def sasl(bootstrap, user):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": USERS[user]}


def denied_or(error_name):
    return "denied" if "AUTHORIZATION_FAILED" in error_name else f"error {error_name}"


def produce(conf, topic):
    got = []
    p = Producer({**conf, "enable.idempotence": False, "acks": "all", "message.timeout.ms": 8000,
                  "error_cb": lambda e: None})
    p.produce(topic, b"case", partition=0, on_delivery=lambda err, m: got.append(err))
    p.flush(10)
    if not got:
        return "error no delivery report"
    return "allowed" if got[0] is None else denied_or(got[0].name())


def consume(conf, topic):
    # the consumer's own group (g-<user>) may be one it is not allowed to use: errors about the
    # group are not the answer to the fetch, and are passed over
    group = "g-" + conf["sasl.username"]
    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "error_cb": lambda e: None})
    c.assign([TopicPartition(topic, 0, 0)])
    deadline, outcome = time.time() + 6, "error nothing read"
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error() is None:
            outcome = "allowed"
            break
        if m.error().code() not in (KafkaError._PARTITION_EOF, KafkaError.GROUP_AUTHORIZATION_FAILED):
            outcome = denied_or(m.error().name())
            break
    c.close()
    return outcome


def list_topics(conf):
    md = AdminClient(conf).list_topics(timeout=10)
    return ",".join(sorted(t for t in md.topics if not t.startswith("__")))


def commit(conf, target):
    group, topic = target.split("/")
    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False, "error_cb": lambda e: None})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        outcome = "allowed"
    except KafkaException as e:
        err = e.args[0]
        outcome = denied_or(err.name()) if isinstance(err, KafkaError) else f"error {e}"
        # a partition-level error comes back in the list of partitions
    c.close()
    return outcome


def describe_group(conf, group):
    admin = AdminClient(conf)  # kept alive until the answer is in
    f = admin.describe_consumer_groups([group], request_timeout=8)[group]
    try:
        f.result(12)
        return "allowed"
    except KafkaException as e:
        return denied_or(e.args[0].name())
    except Exception as e:  # noqa: BLE001 - a timeout is an outcome to compare too
        return f"error {type(e).__name__}"


def create_topic(conf, topic):
    admin = AdminClient(conf)
    f = admin.create_topics([NewTopic(topic, 1, 1)])[topic]
    try:
        f.result(15)
        return "allowed"
    except KafkaException as e:
        return denied_or(e.args[0].name())


def delete_topic(conf, topic):
    admin = AdminClient(conf)
    f = admin.delete_topics([topic])[topic]
    try:
        f.result(15)
        return "allowed"
    except KafkaException as e:
        return denied_or(e.args[0].name())


ACTIONS = {"produce": produce, "consume": consume, "list-topics": lambda c, _: list_topics(c),
           "commit": commit, "describe-group": describe_group, "create-topic": create_topic,
           "delete-topic": delete_topic}


def set_up(plaintext, sasl_bootstrap):
    """Users, topics with a record each, and the ACLs, as the super user ANONYMOUS on PLAINTEXT."""
    admin = AdminClient({"bootstrap.servers": plaintext})
    futs = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), pw.encode())
        for u, pw in USERS.items()])
    for f in futs.values():
        f.result(20)
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
        f.result(20)
    p = Producer({"bootstrap.servers": plaintext})
    for t in TOPICS:
        p.produce(t, b"seed", partition=0)
    assert p.flush(20) == 0
    for acl in ACLS:
        r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", plaintext, "--add", "--force",
                       *[f"'{a}'" for a in acl])
        assert r.returncode == 0, r.stdout + r.stderr
    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", plaintext, "--list")
    assert r.returncode == 0, r.stderr
    # SCRAM credentials reach every listener a moment after they are written (Kafka: through
    # the metadata log); wait until alice can log in
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            AdminClient(sasl(sasl_bootstrap, "alice")).list_topics(timeout=3)
            break
        except KafkaException:
            time.sleep(0.5)
    return r.stdout


def run_cases(sasl_bootstrap):
    return {(u, a, t): ACTIONS[a](sasl(sasl_bootstrap, u), t) for u, a, t in CASES}


def set_up_and_run(plaintext, sasl_bootstrap):
    acls = set_up(plaintext, sasl_bootstrap)
    return acls, run_cases(sasl_bootstrap)


SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "sasl.enabled.mechanisms": "SCRAM-SHA-512",
}


def test_the_same_acls_decide_alike_on_ringlog_and_kafka():
    sasl_port = free_port_block(2)
    b = Broker(shards=2)
    b.settings.update({**SETTINGS, "group.initial.rebalance.delay.ms": "0", "num.partitions": "1",
                       "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{b.port}"})
    while abs(sasl_port - b.port) < 2:
        sasl_port = free_port_block(2)
        b.settings["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{b.port}"
    b.extra_ports = [sasl_port]
    kafka = ApacheKafka("\n".join([
        "listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{extra_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{extra_port}",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
        *[f"{k}={v}" for k, v in SETTINGS.items()],
    ]), prefix="kafka-acls-")
    try:
        b.start()
        kafka.start()
        # The two brokers are independent: their set-up and cases run side by side (each case
        # waits on its own broker's answers, mostly timeouts of denied requests).
        with ThreadPoolExecutor(2) as pool:
            ours_run = pool.submit(set_up_and_run, b.bootstrap, f"127.0.0.1:{sasl_port}")
            theirs_run = pool.submit(set_up_and_run, kafka.bootstrap, f"127.0.0.1:{kafka.extra_port}")
            ours_acls, ours = ours_run.result()
            _, theirs = theirs_run.result()
    finally:
        b.cleanup()
        kafka.stop()
    rows = ["| user | request | on | ringlog | Apache Kafka 4.1.1 |", "|---|---|---|---|---|"]
    rows += [f"| {u} | {a} | {t or '-'} | {ours[(u, a, t)]} | {theirs[(u, a, t)]} |" for u, a, t in CASES]
    table = "\n".join(rows)
    print(table)
    with open(os.path.join(REPO, "target", "acl-comparison.md"), "w") as f:
        f.write(table + "\n\nACLs (kafka-acls --list on ringlog):\n\n" + ours_acls)
    assert ours == theirs, table
    # and the table says something: each kind of outcome happens
    assert ours[("alice", "produce", "orders-eu")] == "allowed"
    assert ours[("alice", "produce", "orders-secret")] == "denied"
    assert ours[("bob", "consume", "orders-eu")] == "denied"
    assert ours[("carol", "list-topics", "")] == ""
    assert ours[("alice", "delete-topic", "orders-old")] == "allowed"
    assert "orders-" in ours_acls and "PREFIXED" in ours_acls, ours_acls
