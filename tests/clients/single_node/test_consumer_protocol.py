"""Consumer groups of the consumer protocol (KIP-848, `group.protocol=consumer`) against the real
ringlog binary: librdkafka members in their own processes under churn (joins, a clean leave, a
kill -9), the Java consumer (Kafka's own console consumer) in the same group, Kafka's
`kafka-consumer-groups` tool, and the group surviving the broker's kill -9.

Judged from the members' own logs (support/group_member.py): no partition owned by two members
at once (a member owns a partition from its assign callback to its revoke callback, or to its
death), every produced record consumed (none skipped), and the committed offsets, sampled while
it runs, never going back.

The broker serves the protocol by default (`group.coordinator.rebalance.protocols=classic,consumer`,
as Kafka 4); sessions are 6 s and heartbeats 1 s here so a killed member's partitions move within
the test.
"""
import os
import signal
import subprocess
import time

import pytest

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker import REPO
from support.consumer_groups import (CONSUMER_PROTOCOL, CommittedWatch, Members, Producing, assert_never_owned_twice,
                                     describe, judge_members, ownership)
from support.kafka import kafka_tool
from support.waiting import wait_for



def make_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def test_the_protocol_is_advertised_only_when_enabled(make_broker):
    """Served by default, as in Kafka 4; `group.coordinator.rebalance.protocols=classic` turns it
    off (not advertised, and a consumer-protocol client is told so)."""
    from support import wire as w
    b = make_broker(settings={"group.coordinator.rebalance.protocols": "classic"}).start()
    keys = w.api_versions(b.bootstrap)
    assert 68 not in keys and 69 not in keys, "ConsumerGroupHeartbeat advertised while not enabled"
    b.stop()
    b2 = make_broker().start()
    keys = w.api_versions(b2.bootstrap)
    assert keys.get(68) == (0, 1) and keys.get(69) == (0, 1), keys
    # Kafka's group.version feature (KIP-1022) at level 1, as `kafka-features describe` shows it
    out = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", b2.bootstrap, "describe")
    line = next(l for l in out.stdout.splitlines() if "group.version" in l)
    assert "SupportedMaxVersion: 1" in line and "FinalizedVersionLevel: 1" in line, out.stdout
    # set by the broker config, not by UpdateFeatures: refused with the reason
    out = kafka_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", b2.bootstrap, "downgrade",
                     "--feature", "group.version=0")
    assert out.returncode != 0 and "group.coordinator.rebalance.protocols" in out.stdout + out.stderr, out


def test_librdkafka_members_under_churn_never_own_a_partition_twice_nor_skip_a_record(make_broker, tmp_path):
    b = make_broker(shards=2, settings=CONSUMER_PROTOCOL).start()
    topic, group, partitions = "churn848", "g-churn", 8
    make_topic(b.bootstrap, topic, partitions)
    producing = Producing(b.bootstrap, topic, partitions)
    members = Members(b.bootstrap, group, topic, str(tmp_path))
    watch = CommittedWatch(b.bootstrap, group, topic, partitions)
    try:
        members.start("a")
        members.start("b", seconds=14)  # leaves cleanly at ~14 s
        time.sleep(2)
        members.start("c")
        time.sleep(4)
        d = describe(b.bootstrap, group)
        assert str(d.type) == "ConsumerGroupType.CONSUMER", d.type
        members.start("d")
        time.sleep(4)
        members.kill9("c")  # its partitions move once its 6 s session is over
        time.sleep(3)
        members.start("e")
        time.sleep(12)
        producing.finish()
        # everything produced is consumed by the members left (a, d, e)
        wait_for(lambda: f"{len(producing.acked - members.consumed())} records not consumed",
                 lambda: producing.acked <= members.consumed(), 60)
        d = describe(b.bootstrap, group)
        assert str(d.state) == "ConsumerGroupState.STABLE", d.state
        owned = [tp.partition for m in d.members for tp in m.assignment.topic_partitions]
        assert sorted(owned) == list(range(partitions)), owned
        assert len(d.members) == 3, [m.member_id for m in d.members]
    finally:
        watch.finish()
        members.stop_all()
    judge_members(members, watch, owners=("a", "b", "c", "d", "e"), closed=("b",))
    assert len(watch.last) == partitions


def test_java_and_librdkafka_members_share_a_group_and_kafkas_tool_describes_it(make_broker, tmp_path):
    b = make_broker(shards=2, settings=CONSUMER_PROTOCOL).start()
    topic, group, partitions, n = "mixed848", "g-mixed", 4, 400
    make_topic(b.bootstrap, topic, partitions)
    members = Members(b.bootstrap, group, topic, str(tmp_path))
    members.start("rd")
    # Kafka's own console consumer: the Java client's consumer-protocol consumer
    java = subprocess.Popen(
        ["bash", "-c", f"source {REPO}/scripts/kafka/kafka-common.sh; kafka_tool "
         f"org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server {b.bootstrap} --topic {topic} "
         f"--group {group} --consumer-property group.protocol=consumer --from-beginning --timeout-ms 15000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, KAFKA_LIBS=os.environ.get("RINGLOG_KAFKA_LIBS", "")))
    try:
        # both members in the group, each with its partitions, as Kafka's tool shows it
        def two_members():
            d = describe(b.bootstrap, group)
            return len(d.members) == 2 and all(m.assignment.topic_partitions for m in d.members)
        wait_for(lambda: f"two members with partitions: {describe(b.bootstrap, group).members}", two_members, 40)
        # produced once both have their partitions: each consumes its share
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(n):
            p.produce(topic, f"r{i}".encode(), partition=i % partitions)
        assert p.flush(30) == 0
        r = kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                       b.bootstrap, "--describe", "--group", group, "--members")
        assert r.returncode == 0, r.stdout + r.stderr
        rows = [line.split() for line in r.stdout.splitlines() if line.startswith(group)]
        assert sorted((row[3], row[4]) for row in rows) == [("console-consumer", "2"), ("rdkafka", "2")], r.stdout
        r = kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                       b.bootstrap, "--list", "--type")
        assert r.returncode == 0 and group in r.stdout and "Consumer" in r.stdout, r.stdout + r.stderr
        out, err = java.communicate(timeout=90)
    finally:
        if java.poll() is None:
            java.kill()
        members.stop_all()
    java_got = {line for line in out.splitlines() if line.startswith("r")}
    rd_got = {e["offset"] * partitions + e["partition"] for e in members.events()["rd"] if e["ev"] == "record"}
    rd_values = {f"r{i}" for i in rd_got}
    assert java_got, f"the Java consumer consumed nothing: {err[-2000:]}"
    assert rd_values, "the librdkafka member consumed nothing"
    assert java_got | rd_values == {f"r{i}" for i in range(n)}, (len(java_got), len(rd_values))
    assert not java_got & rd_values, f"consumed by both: {sorted(java_got & rd_values)[:10]}"


def test_a_consumer_group_survives_the_brokers_kill9(make_broker, tmp_path):
    b = make_broker(shards=2, settings=CONSUMER_PROTOCOL).start()
    topic, group, partitions = "durable848", "g-durable", 6
    make_topic(b.bootstrap, topic, partitions)
    producing = Producing(b.bootstrap, topic, partitions, rate=100)
    members = Members(b.bootstrap, group, topic, str(tmp_path))
    try:
        members.start("a")
        members.start("b")
        wait_for("two members", lambda: len(describe(b.bootstrap, group).members) == 2, 30)
        wait_for("a stable group", lambda: str(describe(b.bootstrap, group).state) == "ConsumerGroupState.STABLE", 30)
        before = describe(b.bootstrap, group)
        ids = sorted(m.member_id for m in before.members)
        producing.stop.set()
        producing.thread.join(60)
        b.stop(sig=signal.SIGKILL)
        b.start()
        # the group is read back from __consumer_offsets: same members, same partitions
        after = describe(b.bootstrap, group)
        assert sorted(m.member_id for m in after.members) == ids, (ids, after.members)
        assign = {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in after.members}
        assign_before = {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
                         for m in before.members}
        assert assign == assign_before
        more = Producing(b.bootstrap, topic, partitions, rate=100)
        time.sleep(5)
        more.finish()
        acked = producing.acked | more.acked
        wait_for(lambda: f"{len(acked - members.consumed())} records not consumed",
                 lambda: acked <= members.consumed(), 60)
        # the members kept their ids through the restart: no rejoin was needed
        final = describe(b.bootstrap, group)
        assert sorted(m.member_id for m in final.members) == ids
    finally:
        members.stop_all()
    assert_never_owned_twice(ownership(members.events(), members.killed, time.time()))


def test_classic_requests_to_a_consumer_group_and_its_way_back_to_classic(make_broker, tmp_path):
    """Online migration at the wire: a classic JoinGroup to a consumer group with members makes
    the classic member one more member of it (never its leader: the coordinator assigns), with
    SyncGroup and Heartbeat answered by the consumer group; when the consumer-protocol member
    leaves, the group turns classic (tombstones for its consumer records, a classic group
    record) and the classic member, told to rejoin, leads the classic group. An empty consumer
    group a classic member joins becomes a classic group too; both survive kill -9."""
    from support import wire as w
    b = make_broker(shards=1, settings={**CONSUMER_PROTOCOL, "group.initial.rebalance.delay.ms": "0"}).start()
    make_topic(b.bootstrap, "proto848", 2)
    members = Members(b.bootstrap, "g-proto", "proto848", str(tmp_path))
    members.start("a", seconds=8)
    wait_for("a consumer-protocol member", lambda: len(describe(b.bootstrap, "g-proto").members) == 1, 30)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})

    def listed(group):
        return {g.group_id: str(g.type) for g in admin.list_consumer_groups(request_timeout=5).result(30).valid}.get(group)
    # ConsumerProtocolSubscription v0: no topics, null user data
    sub = (("range", b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"),)
    s = w.connect(b.bootstrap)
    try:
        err, generation, protocol, leader, member, joined = w.join_group_v1(s, "g-proto", protocols=sub)
        assert (err, protocol, leader, joined) == (0, "range", "", []), (err, protocol, leader, joined)
        assert generation > 0 and member
        err, assignment = w.sync_group_v1(s, "g-proto", generation, member)
        # subscribed to no topic: an assignment (ConsumerProtocolAssignment v0) of nothing
        assert (err, assignment[:6]) == (0, b"\x00\x00\x00\x00\x00\x00"), (err, assignment)
        assert w.heartbeat_v1(s, "g-proto", generation, member) == 0
        assert w.heartbeat_v1(s, "g-proto", generation + 1, member) == 22  # ILLEGAL_GENERATION
        assert listed("g-proto") == "ConsumerGroupType.CONSUMER"
        d = describe(b.bootstrap, "g-proto")
        assert sorted(m.member_id for m in d.members if m.member_id == member) == [member], d.members
        # the consumer-protocol member leaves: the group turns classic and asks for a rejoin
        members.procs["a"].wait(30)
        wait_for("the group turned classic", lambda: listed("g-proto") == "ConsumerGroupType.CLASSIC", 20)
        assert w.heartbeat_v1(s, "g-proto", generation, member) == 27  # REBALANCE_IN_PROGRESS
        err, generation2, protocol, leader, member2, joined = w.join_group_v1(s, "g-proto", member_id=member, protocols=sub)
        assert (err, protocol, leader, member2) == (0, "range", member, member), (err, protocol, leader, member2)
        assert generation2 == generation + 1 and [m for m, _ in joined] == [member]
        assert w.sync_group_v1(s, "g-proto", generation2, member, [(member, b"")])[0] == 0
        assert w.heartbeat_v1(s, "g-proto", generation2, member) == 0
    finally:
        s.close()
    # an empty consumer group a classic member joins becomes a classic group
    members2 = Members(b.bootstrap, "g-proto2", "proto848", str(tmp_path / "2"))
    os.makedirs(tmp_path / "2")
    members2.start("x", seconds=5)
    wait_for("a consumer group", lambda: listed("g-proto2") == "ConsumerGroupType.CONSUMER", 30)
    members2.procs["x"].wait(30)
    wait_for("it is empty", lambda: not describe(b.bootstrap, "g-proto2").members, 20)
    s = w.connect(b.bootstrap)
    try:
        err, generation, protocol, _leader, member, _ = w.join_group_v1(s, "g-proto2")
        assert (err, generation, protocol) == (0, 1, "range"), (err, generation, protocol)
        assert w.sync_group_v1(s, "g-proto2", generation, member, [(member, b"")])[0] == 0
    finally:
        s.close()
    assert listed("g-proto2") == "ConsumerGroupType.CLASSIC"
    # and so they stay after a restart (the records are in __consumer_offsets)
    b.stop(sig=signal.SIGKILL)
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    wait_for("the groups listed after the restart", lambda: listed("g-proto") and listed("g-proto2"), 20)
    assert (listed("g-proto"), listed("g-proto2")) == ("ConsumerGroupType.CLASSIC",) * 2


# librdkafka's classic default is eager (`range`); the Java client's migration check
# (interop/test_java_client.py) runs cooperative-sticky members, the simulation both
@pytest.mark.parametrize("assignor", ["range"])
def test_a_group_migrates_online_from_classic_to_consumer_and_back(make_broker, tmp_path, assignor):
    """Kafka's online migration with real members (librdkafka), rolling both ways while records
    flow: two classic members (cooperative or eager), a consumer-protocol member joins (the group
    becomes a consumer group: the classic members keep their partitions until the assignor moves
    them), a classic member leaves, a second consumer-protocol member joins, a classic member
    joins, the consumer-protocol members leave (the group is classic again). No partition owned by
    two members at once, no record skipped, committed offsets never going back."""
    b = make_broker(shards=2, settings={**CONSUMER_PROTOCOL, "group.initial.rebalance.delay.ms": "0"}).start()
    topic, group, partitions = "migrate848", "g-migrate", 8
    make_topic(b.bootstrap, topic, partitions)
    producing = Producing(b.bootstrap, topic, partitions)
    members = Members(b.bootstrap, group, topic, str(tmp_path))
    watch = CommittedWatch(b.bootstrap, group, topic, partitions)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})

    def kind():
        return {g.group_id: str(g.type) for g in admin.list_consumer_groups(request_timeout=5).result(30).valid}.get(group)
    classic = {"protocol": "classic", "classic_assignor": assignor}
    try:
        members.start("c1", seconds=16, **classic)
        members.start("c2", **classic)
        wait_for("a classic group", lambda: kind() == "ConsumerGroupType.CLASSIC", 30)
        time.sleep(2)
        members.start("n1", seconds=24)
        wait_for("the group upgraded", lambda: kind() == "ConsumerGroupType.CONSUMER", 30)
        time.sleep(4)
        members.start("n2", seconds=22)
        time.sleep(6)
        members.start("c3", **classic)
        # c1 leaves at ~16 s, n2 and n1 at ~26-28 s: then only classic members are left
        wait_for("the group downgraded", lambda: kind() == "ConsumerGroupType.CLASSIC", 40)
        time.sleep(6)
        producing.finish()
        wait_for(lambda: f"{len(producing.acked - members.consumed())} records not consumed",
                 lambda: producing.acked <= members.consumed(), 60)
        d = describe(b.bootstrap, group)
        owned = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
        assert owned == list(range(partitions)) and len(d.members) == 2, d.members
    finally:
        watch.finish()
        members.stop_all()
    judge_members(members, watch, owners=("c1", "c2", "n1", "n2", "c3"), closed=("c1", "n1", "n2"))
    log = b.read_log()
    assert "classic group upgraded to a consumer group" in log
    assert "consumer group turned classic" in log


def test_group_configs_through_kafka_configs(make_broker):
    """Kafka's per-group configs (`kafka-configs --entity-type groups`): set within the broker's
    `group.consumer.min/max.*` bounds, shown by DescribeConfigs over the broker's value, kept in the
    cluster metadata across kill -9, removed; out of bounds, unknown and share-group configs refused."""
    b = make_broker(settings=CONSUMER_PROTOCOL).start()

    def configs(*args):
        return kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--entity-type",
                          "groups", "--entity-name", "g-configs", *args)
    r = configs("--alter", "--add-config", "consumer.session.timeout.ms=20000,consumer.heartbeat.interval.ms=2000")
    assert r.returncode == 0, r.stdout + r.stderr
    r = configs("--describe", "--all")
    assert "consumer.session.timeout.ms=20000" in r.stdout and "consumer.heartbeat.interval.ms=2000" in r.stdout, r.stdout
    b.stop(sig=signal.SIGKILL)
    b.start()
    r = configs("--describe")
    assert "consumer.session.timeout.ms=20000" in r.stdout, r.stdout + r.stderr
    for bad, why in (("consumer.session.timeout.ms=1000", "must be between"),
                     ("consumer.heartbeat.interval.ms=30000", "must be between"),
                     ("share.record.lock.duration.ms=10000", "not built"),
                     ("no.such.config=1", "Unknown group config")):
        r = configs("--alter", "--add-config", bad)
        assert r.returncode != 0 and why in r.stdout + r.stderr, (bad, r.stdout + r.stderr)
    r = configs("--alter", "--delete-config", "consumer.session.timeout.ms,consumer.heartbeat.interval.ms")
    assert r.returncode == 0, r.stdout + r.stderr
    r = configs("--describe", "--all")
    assert "consumer.session.timeout.ms=6000" in r.stdout, r.stdout  # the broker's again


def test_a_regex_subscription_is_resolved_on_the_broker_as_topics_come(make_broker, tmp_path):
    """SubscribedTopicRegex (librdkafka subscribes `^re848-.*`): the coordinator resolves it over
    the topic names; a matching topic created later moves the group epoch and reaches the member."""
    b = make_broker(shards=1, settings=CONSUMER_PROTOCOL).start()
    make_topic(b.bootstrap, "re848-a", 2)
    make_topic(b.bootstrap, "other848", 1)
    members = Members(b.bootstrap, "g-regex", "^re848-.*", str(tmp_path))
    members.start("r")
    p = Producer({"bootstrap.servers": b.bootstrap})

    def topics_read():
        return {e["topic"] for e in members.events().get("r", []) if e["ev"] == "record"}
    try:
        wait_for("the member assigned re848-a", lambda: describe(b.bootstrap, "g-regex").members
                 and describe(b.bootstrap, "g-regex").members[0].assignment.topic_partitions, 30)
        for t in ("re848-a", "other848"):
            p.produce(t, b"x")
        p.flush(10)
        wait_for("a record of re848-a", lambda: "re848-a" in topics_read(), 30)
        make_topic(b.bootstrap, "re848-b", 2)
        wait_for("re848-b assigned", lambda: {tp.topic for tp in describe(b.bootstrap, "g-regex").members[0]
                                             .assignment.topic_partitions} == {"re848-a", "re848-b"}, 30)
        p.produce("re848-b", b"y")
        p.flush(10)
        wait_for("a record of re848-b", lambda: "re848-b" in topics_read(), 30)
        # the group's offsets of a topic its member subscribes to (here by regex) stay
        r = kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                       b.bootstrap, "--delete-offsets", "--group", "g-regex", "--topic", "re848-b")
        assert "subscribed" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    finally:
        members.stop_all()
    assert "other848" not in topics_read()


def test_a_static_member_comes_back_to_its_partitions(make_broker, tmp_path):
    """group.instance.id with the consumer protocol: a static member that closes leaves with
    epoch -2 and keeps its partitions for its session; a new process with the same instance id
    takes them over (a new member id), the other member's partitions untouched."""
    b = make_broker(shards=1, settings=CONSUMER_PROTOCOL).start()
    make_topic(b.bootstrap, "static848", 4)
    members = Members(b.bootstrap, "g-static", "static848", str(tmp_path))
    try:
        members.start("s1", seconds=12, instance_id="inst-1")
        members.start("s2", instance_id="inst-2")

        def by_instance():
            d = describe(b.bootstrap, "g-static")
            return {m.group_instance_id: (m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                    for m in d.members}
        wait_for("two static members with two partitions each",
                 lambda: sorted(len(v[1]) for v in by_instance().values()) == [2, 2], 30)
        before = by_instance()
        members.procs["s1"].wait(30)  # closes: a static leave
        during = by_instance()
        assert during["inst-1"][1] == before["inst-1"][1], (before, during)  # kept for its session
        members.start("s1-again", instance_id="inst-1")
        wait_for("inst-1 back", lambda: by_instance()["inst-1"][0] != before["inst-1"][0]
                 and by_instance()["inst-1"][1] == before["inst-1"][1], 30)
        after = by_instance()
        assert after["inst-2"] == before["inst-2"], (before, after)
    finally:
        members.stop_all()
