"""Apache Kafka's own admin tools against ringlog (issue 13): what they show must be the
broker's running configuration, with Kafka's sources and synonyms.

Kafka's tools come from Maven Central (scripts/kafka/fetch-kafka.sh); `kafka_tool` runs one by class.
"""
import re

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from support.kafka import kafka_tool


def config_lines(output):
    """`name -> (value, synonyms)` from ConfigCommand's describe output."""
    out = {}
    for line in output.splitlines():
        m = re.match(r"\s+([a-z0-9.]+)=(.*?) sensitive=(?:true|false) synonyms=\{(.*)\}\s*$", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def test_config_command_shows_the_running_broker_and_topic_configs(make_broker):
    b = make_broker(shards=2, settings={"group.initial.rebalance.delay.ms": "250",
                                        "log.retention.ms": "3600000"}).start()
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--describe",
                   "--entity-type", "brokers", "--entity-name", "1", "--all")
    assert r.returncode == 0, r.stdout + r.stderr
    broker = config_lines(r.stdout)
    # Started with --data-dir and --listen (CLI flags) and two --set properties.
    assert broker["log.dirs"][0] == b.data_dir, broker["log.dirs"]
    assert f"STATIC_BROKER_CONFIG:log.dirs={b.data_dir}" in broker["log.dirs"][1]
    assert "DEFAULT_CONFIG:log.dirs=./ringlog-data" in broker["log.dirs"][1]
    assert broker["listeners"][0] == f"PLAINTEXT://{b.bootstrap}"
    assert broker["group.initial.rebalance.delay.ms"][0] == "250"
    assert broker["group.initial.rebalance.delay.ms"][1].startswith("STATIC_BROKER_CONFIG:")
    # Left at its default: the default, and only that source.
    assert broker["socket.request.max.bytes"] == ("104857600", "DEFAULT_CONFIG:socket.request.max.bytes=104857600")

    created = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b.bootstrap,
                         "--create", "--topic", "described", "--partitions", "2",
                         "--config", "segment.bytes=1048576")
    assert created.returncode == 0, created.stdout + created.stderr
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--describe",
                   "--entity-type", "topics", "--entity-name", "described", "--all")
    assert r.returncode == 0, r.stdout + r.stderr
    topic = config_lines(r.stdout)
    assert topic["segment.bytes"][0] == "1048576"
    assert topic["segment.bytes"][1].startswith("DYNAMIC_TOPIC_CONFIG:segment.bytes=1048576, ")
    assert "DEFAULT_CONFIG:log.segment.bytes=1073741824" in topic["segment.bytes"][1]
    assert topic["retention.ms"] == ("3600000", "STATIC_BROKER_CONFIG:log.retention.ms=3600000, "
                                                "DEFAULT_CONFIG:log.retention.ms=604800000")
    assert topic["cleanup.policy"][0] == "delete"
    # Without --all: only the topic's own overrides.
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--describe",
                   "--entity-type", "topics", "--entity-name", "described")
    assert r.returncode == 0, r.stdout + r.stderr
    assert list(config_lines(r.stdout)) == ["segment.bytes"], r.stdout


def test_describe_configs_through_librdkafka(make_broker):
    b = make_broker(shards=1, settings={"message.max.bytes": "2000000"}).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("cfg", 1, 1, config={"retention.bytes": "5000000"})])["cfg"].result(30)
    res = admin.describe_configs([ConfigResource("broker", "0"), ConfigResource("topic", "cfg"),
                                  ConfigResource("group", "some-group")])
    by = {k.name: f.result(30) for k, f in res.items()}
    broker = by["0"]
    assert broker["message.max.bytes"].value == "2000000"
    assert broker["message.max.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert broker["log.dirs"].value == b.data_dir
    topic = by["cfg"]
    assert topic["retention.bytes"].value == "5000000"
    assert topic["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert topic["max.message.bytes"].value == "2000000"
    assert topic["max.message.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not topic["retention.bytes"].is_read_only
    group = by["some-group"]
    assert group["consumer.session.timeout.ms"].value == "45000"
    assert group["consumer.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def produce_values(bootstrap, topic, n):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0)
        if i % 10 == 9:
            p.flush(30)  # several batches, so offsets fall inside batches and segments
    assert p.flush(30) == 0


def first_offset_read(bootstrap, topic, start):
    """The offset of the first record a consumer assigned at `start` gets, or its error."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{start}",
                  "enable.auto.commit": False, "auto.offset.reset": "error"})
    c.assign([TopicPartition(topic, 0, start)])
    try:
        for _ in range(30):
            m = c.poll(1)
            if m is None:
                continue
            if m.error():
                return m.error()
            return m.offset()
    finally:
        c.close()
    raise AssertionError("nothing read")


def log_files(b, topic):
    import os
    d = os.path.join(b.data_dir, f"{topic}-0")
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def test_delete_records_moves_the_log_start_offset(make_broker, tmp_path):
    from confluent_kafka import KafkaError, TopicPartition
    b = make_broker(shards=1).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    # Small segments: 300 records span several, so whole segments go.
    admin.create_topics([NewTopic("purge", 1, 1, config={"segment.bytes": "1024"})])["purge"].result(30)
    produce_values(b.bootstrap, "purge", 300)
    segments_before = log_files(b, "purge")
    assert len(segments_before) >= 3, segments_before

    # Kafka's own tool, with its JSON file.
    spec = tmp_path / "delete.json"
    spec.write_text('{"version": 1, "partitions": [{"topic": "purge", "partition": 0, "offset": 145}]}')
    r = kafka_tool("org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", b.bootstrap,
                   "--offset-json-file", str(spec))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "low_watermark: 145" in r.stdout, r.stdout
    low, high = watermarks(b.bootstrap, "purge")
    assert (low, high) == (145, 300)
    r = kafka_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", b.bootstrap,
                   "--topic", "purge", "--time", "-2")
    assert r.returncode == 0 and r.stdout.strip() == "purge:0:145", r.stdout + r.stderr
    segments_after = log_files(b, "purge")
    assert len(segments_after) < len(segments_before), (segments_before, segments_after)
    # Below the start: out of range; at it: the record at 145, even inside a batch.
    # (librdkafka reports the broker's OFFSET_OUT_OF_RANGE as a failed offset reset when
    # auto.offset.reset is "error".)
    below = first_offset_read(b.bootstrap, "purge", 144)
    assert isinstance(below, KafkaError) and below.code() == KafkaError._AUTO_OFFSET_RESET, below
    assert "out of range" in below.str().lower(), below
    assert first_offset_read(b.bootstrap, "purge", 145) == 145

    # confluent-kafka's delete_records: past the high watermark is refused, -1 means "up to it"
    # (OFFSET_END), and the start never moves back.
    fut = admin.delete_records([TopicPartition("purge", 0, 301)])
    err = list(fut.values())[0].exception(30)
    assert err is not None and err.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE, err
    res = list(admin.delete_records([TopicPartition("purge", 0, 10)]).values())[0].result(30)
    assert res.low_watermark == 145
    assert watermarks(b.bootstrap, "purge") == (145, 300)

    # The start survives a restart.
    b.stop()
    b.start()
    assert watermarks(b.bootstrap, "purge") == (145, 300)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = list(admin.delete_records([TopicPartition("purge", 0, -1)]).values())[0].result(30)
    assert res.low_watermark == 300
    assert watermarks(b.bootstrap, "purge") == (300, 300)
    produce_values(b.bootstrap, "purge", 5)
    assert first_offset_read(b.bootstrap, "purge", 300) == 300


def watermarks(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def test_log_dirs_command_reports_every_replica_with_its_size(make_broker):
    import json
    from confluent_kafka import Producer
    b = make_broker(shards=2).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("dirs", 4, 1)])["dirs"].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1})
    for i in range(400):
        p.produce("dirs", b"x" * 1000, partition=i % 4)
    assert p.flush(30) == 0
    r = kafka_tool("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", b.bootstrap,
                   "--describe", "--broker-list", "0,1", "--topic-list", "dirs")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(next(l for l in r.stdout.splitlines() if l.startswith("{")))
    seen = {}
    for broker in report["brokers"]:
        (log_dir,) = broker["logDirs"]
        assert log_dir["error"] is None and log_dir["logDir"] == b.data_dir, log_dir
        for part in log_dir["partitions"]:
            assert part["partition"] not in seen, f"{part['partition']} on two brokers"
            seen[part["partition"]] = (broker["broker"], part["size"], part["offsetLag"])
    assert sorted(seen) == [f"dirs-{i}" for i in range(4)], seen
    assert {b for b, _, _ in seen.values()} == {0, 1}, "partitions on both shards"
    for name, (_, size, lag) in seen.items():
        # 100 records of 1000 bytes each, in batches with their headers.
        assert 100_000 < size < 120_000 and lag == 0, (name, size, lag)


def test_list_offsets_v7_to_v10_and_kafka_python_sees_kafka_4(make_broker):
    """MAX_TIMESTAMP (-3) finds the record with the largest timestamp inside its batch (the
    first of two equal ones); EARLIEST_LOCAL (-4) is the log start; LATEST_TIERED (-5) is -1,
    nothing being tiered. kafka-python infers the broker's version from ApiVersions."""
    from confluent_kafka import Producer
    b = make_broker(shards=1).start()
    creator = AdminClient({"bootstrap.servers": b.bootstrap})
    creator.create_topics([NewTopic("times", 1, 1)])["times"].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 50})
    stamps = [1_000, 5_000, 3_000, 2_000, 9_000, 4_000, 9_000, 8_000]
    for i, ts in enumerate(stamps):
        p.produce("times", f"v{i}".encode(), partition=0, timestamp=1_700_000_000_000 + ts)
        if i == 2:
            p.flush(30)  # two batches: the max lies inside the second
    assert p.flush(30) == 0

    def shell(time_arg):
        r = kafka_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", b.bootstrap,
                       "--topic", "times", "--time", time_arg)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.strip()
    assert shell("-3") == "times:0:4", "the first record with the largest timestamp"
    assert shell("-4") == "times:0:0"
    # Offset -1 (nothing tiered): GetOffsetShell prints no line for it, as against Kafka.
    assert shell("-5") == ""
    assert shell("-1") == "times:0:8"

    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        version = admin._client.check_version()
    finally:
        admin.close()
    assert version >= (4, 0), version


def test_topic_configs_are_altered_live_and_persist(make_broker):
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    b = make_broker(shards=2).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("altered", 1, 1)])["altered"].result(30)

    def describe_topic():
        r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--describe",
                       "--entity-type", "topics", "--entity-name", "altered", "--all")
        assert r.returncode == 0, r.stdout + r.stderr
        return config_lines(r.stdout)

    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter",
                   "--entity-type", "topics", "--entity-name", "altered",
                   "--add-config", "segment.bytes=2048,retention.ms=86400000")
    assert r.returncode == 0 and "Completed updating config" in r.stdout, r.stdout + r.stderr
    configs = describe_topic()
    assert configs["segment.bytes"][0] == "2048"
    assert configs["segment.bytes"][1].startswith("DYNAMIC_TOPIC_CONFIG:segment.bytes=2048")
    assert configs["retention.ms"][0] == "86400000"
    # Applied to the open partition at once: 2 KiB segments roll while records arrive.
    before = len(log_files(b, "altered"))
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 0})
    for i in range(60):
        p.produce("altered", b"y" * 200, partition=0)
        p.flush(30)
    assert len(log_files(b, "altered")) >= before + 4, log_files(b, "altered")

    # A value out of Kafka's bounds is refused with the config named; nothing changes.
    bad = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter",
                     "--entity-type", "topics", "--entity-name", "altered", "--add-config", "segment.ms=0")
    assert bad.returncode != 0 and "segment.ms" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--alter",
                   "--entity-type", "topics", "--entity-name", "altered", "--delete-config", "retention.ms")
    assert r.returncode == 0, r.stdout + r.stderr
    configs = describe_topic()
    assert configs["retention.ms"] == ("604800000", "DEFAULT_CONFIG:log.retention.ms=604800000")
    assert configs["segment.bytes"][0] == "2048"

    # librdkafka's IncrementalAlterConfigs: max.message.bytes applies to the next produce.
    res = admin.incremental_alter_configs([ConfigResource(
        "topic", "altered", incremental_configs=[
            ConfigEntry("max.message.bytes", "1500", incremental_operation=AlterConfigOpType.SET)])])
    list(res.values())[0].result(30)
    small = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "compression.type": "none",
                      "message.max.bytes": 100000})
    errors = []
    small.produce("altered", b"z" * 3000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    small.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors
    # validate_only changes nothing; an unknown config and a broker config are refused.
    res = admin.incremental_alter_configs([ConfigResource(
        "topic", "altered", incremental_configs=[
            ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET)])],
        validate_only=True)
    list(res.values())[0].result(30)
    assert describe_topic()["retention.ms"][0] == "604800000"
    for resource, err_code in [
        (ConfigResource("topic", "altered", incremental_configs=[
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)]),
         KafkaError.INVALID_CONFIG),
        (ConfigResource("broker", "0", incremental_configs=[
            ConfigEntry("log.retention.ms", "1", incremental_operation=AlterConfigOpType.SET)]),
         KafkaError.INVALID_REQUEST),
    ]:
        fut = list(admin.incremental_alter_configs([resource]).values())[0]
        e = fut.exception(30)
        assert isinstance(e, KafkaException) and e.args[0].code() == err_code, e

    # Persisted: the overrides survive a restart.
    b.stop()
    b.start()
    configs = describe_topic()
    assert configs["segment.bytes"][0] == "2048" and configs["max.message.bytes"][0] == "1500"


def test_consumer_group_command_deletes_offsets(make_broker):
    """OffsetDelete through Kafka's ConsumerGroupCommand: an empty group loses the offsets of a
    topic; a group with a member subscribed to the topic keeps them (GROUP_SUBSCRIBED_TO_TOPIC);
    an unknown group is refused."""
    import time
    from confluent_kafka import Consumer, TopicPartition
    b = make_broker(shards=1, settings={"group.initial.rebalance.delay.ms": "0"}).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for t in ("od-a", "od-b"):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(30)
        produce_values(b.bootstrap, t, 5)
    committer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "od"})
    committer.commit(offsets=[TopicPartition("od-a", 0, 3), TopicPartition("od-b", 0, 4)], asynchronous=False)
    committer.close()

    def committed():
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "od"})
        try:
            return {tp.topic: tp.offset for tp in c.committed(
                [TopicPartition("od-a", 0), TopicPartition("od-b", 0)], timeout=10)}
        finally:
            c.close()
    assert committed() == {"od-a": 3, "od-b": 4}

    def delete_offsets(group, topic):
        return kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                          b.bootstrap, "--delete-offsets", "--group", group, "--topic", topic)
    r = delete_offsets("od", "od-a")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"od-a\s+0\s+Successful", r.stdout), r.stdout
    assert committed() == {"od-a": -1001, "od-b": 4}

    # A live member subscribed to od-b: its offsets stay.
    member = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "od", "session.timeout.ms": 6000,
                       "enable.auto.commit": False})
    member.subscribe(["od-b"])
    deadline = time.time() + 30
    while not member.assignment() and time.time() < deadline:
        member.poll(0.2)
    assert member.assignment(), "the member joined"
    r = delete_offsets("od", "od-b")
    assert "subscribed" in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    member.close()
    assert committed()["od-b"] == 4

    r = delete_offsets("no-such-group", "od-a")
    # (The tool exits 0 and prints the error.)
    assert "GroupIdNotFoundException" in r.stdout + r.stderr, r.stdout + r.stderr


def test_log_append_time_and_timestamp_bounds(make_broker):
    """message.timestamp.type=LogAppendTime stamps batches with the broker's time (consumers see
    TIMESTAMP_LOG_APPEND_TIME); CreateTime topics refuse records more than
    message.timestamp.after.max.ms ahead (Kafka 4.x's default: one hour) or, when set,
    message.timestamp.before.max.ms behind, with INVALID_TIMESTAMP; an alteration to
    LogAppendTime applies to the next batch."""
    import time
    from confluent_kafka import (Consumer, KafkaError, Producer, TopicPartition,
                                 TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME)
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    b = make_broker(shards=1).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for name, cfg in [("stamped", {"message.timestamp.type": "LogAppendTime"}),
                      ("bounded", {"message.timestamp.before.max.ms": "86400000"}),
                      ("plain", {})]:
        admin.create_topics([NewTopic(name, 1, 1, config=cfg)])[name].result(30)
    now = int(time.time() * 1000)
    day = 86_400_000

    def produce(topic, ts):
        results = []
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": 1, "linger.ms": 0})
        p.produce(topic, b"v", partition=0, timestamp=ts,
                  on_delivery=lambda err, msg: results.append((err, msg.timestamp())))
        p.flush(30)
        return results[0]

    def first_timestamps(topic, n):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"ts-{topic}",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.time() + 30
        while len(out) < n and time.time() < deadline:
            m = c.poll(1)
            if m is not None and m.error() is None:
                out.append(m.timestamp())
        c.close()
        return out

    err, _ = produce("stamped", now - 30 * day)
    assert err is None, err
    (kind, ts), = first_timestamps("stamped", 1)
    assert kind == TIMESTAMP_LOG_APPEND_TIME and abs(ts - now) < 60_000, (kind, ts, now)

    err, _ = produce("plain", now + 2 * 3_600_000)
    assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP, err
    assert produce("plain", now + 60_000)[0] is None, "a minute ahead is fine"
    assert produce("plain", now - 365 * day)[0] is None, "no bound on the past by default"

    err, _ = produce("bounded", now - 2 * day)
    assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP, err
    assert produce("bounded", now - day // 2)[0] is None

    res = admin.incremental_alter_configs([ConfigResource("topic", "plain", incremental_configs=[
        ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET)])])
    list(res.values())[0].result(30)
    assert produce("plain", now - 365 * day)[0] is None
    kinds = [k for k, _ in first_timestamps("plain", 3)]
    assert kinds == [TIMESTAMP_CREATE_TIME, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME], kinds


def test_topic_command_describes_through_describe_topic_partitions(make_broker):
    """Kafka 4.x's admin client describes topics with DescribeTopicPartitions when the broker
    offers it, a page of partitions at a time: three topics of five partitions, four partitions
    a page, come back whole, each with its leader, replicas and ISR."""
    b = make_broker(shards=2).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for t in ("pages-a", "pages-b", "pages-c"):
        admin.create_topics([NewTopic(t, 5, 1)])[t].result(30)
    r = kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b.bootstrap, "--describe",
                   "--topic", "pages-.*", "--partition-size-limit-per-response", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [l for l in r.stdout.splitlines() if "Partition:" in l]
    seen = sorted((l.split("Topic:")[1].split()[0], int(l.split("Partition:")[1].split()[0])) for l in lines)
    assert seen == [(t, p) for t in ("pages-a", "pages-b", "pages-c") for p in range(5)], r.stdout
    for l in lines:
        leader = l.split("Leader:")[1].split()[0]
        assert leader in ("0", "1") and f"Replicas: {leader}" in l and f"Isr: {leader}" in l, l
        assert "Elr: " in l, l


def test_topics_created_and_grown_with_a_manual_replica_assignment(make_broker):
    """CreateTopics and CreatePartitions with a manual replica assignment (Kafka's TopicCommand
    --replica-assignment): partitions land on the shards (brokers) named; an assignment that
    breaks the placement rules is refused with INVALID_REPLICA_ASSIGNMENT."""
    b = make_broker(shards=2).start()

    def topics(*args):
        return kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b.bootstrap, *args)

    def leaders(topic):
        r = topics("--describe", "--topic", topic)
        assert r.returncode == 0, r.stdout + r.stderr
        return [l.split("Leader:")[1].split()[0] for l in r.stdout.splitlines() if "Partition:" in l]

    r = topics("--create", "--topic", "manual", "--replica-assignment", "1,0,1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert leaders("manual") == ["1", "0", "1"]
    r = topics("--alter", "--topic", "manual", "--partitions", "5", "--replica-assignment", "1,0,1,0,0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert leaders("manual") == ["1", "0", "1", "0", "0"]
    for bad, why in [("0:1", "two replicas on node 0"), ("7", "broker 7 is not a live broker")]:
        r = topics("--create", "--topic", f"bad-{len(why)}", "--replica-assignment", bad)
        out = r.stdout + r.stderr
        assert r.returncode != 0 and "InvalidReplicaAssignment" in out and why in out, out
    # Records go where the assignment put them and read back.
    produce_values(b.bootstrap, "manual", 20)
    assert watermarks(b.bootstrap, "manual") == (0, 20)


def test_authorized_operations_are_reported_when_asked(make_broker):
    """Metadata (topics) and DescribeCluster report authorized operations when a client asks:
    every operation of the resource type, as Kafka without an authorizer (ringlog has none yet)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation
    b = make_broker(shards=1).start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("authz", 1, 1)])["authz"].result(30)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE,
    }, cluster.authorized_operations
    topic = admin.describe_topics(TopicCollection(["authz"]), include_authorized_operations=True)["authz"].result(30)
    assert set(topic.authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
        AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    }, topic.authorized_operations
    # Not asked: not computed (None).
    plain = admin.describe_cluster().result(30)
    assert not plain.authorized_operations, plain.authorized_operations


def test_list_config_resources_lists_groups_for_config_command(make_broker):
    """Kafka 4.1's ConfigCommand lists every group with configs through ListConfigResources
    (v1, GROUP), and client metrics resources (none on ringlog) through it too."""
    b = make_broker(shards=1)
    b.env = {"RUST_LOG": "info,node::server::connection=trace"}
    b.start()
    from confluent_kafka import Consumer, TopicPartition
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("listed", num_partitions=1, replication_factor=1)])["listed"].result(30)
    for g in ("listed-a", "listed-b"):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": g})
        c.commit(offsets=[TopicPartition("listed", 0, 1)], asynchronous=False)
        c.close()
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--describe",
                   "--entity-type", "groups")
    assert r.returncode == 0, r.stderr
    listed = sorted(re.findall(r"Dynamic configs for group (\S+) are", r.stdout))
    assert listed == ["listed-a", "listed-b"], r.stdout
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--describe",
                   "--entity-type", "client-metrics")
    assert r.returncode == 0 and "Dynamic configs" not in r.stdout, (r.stdout, r.stderr)
    with open(b.log_path, encoding="utf-8", errors="replace") as f:
        assert "api=ListConfigResources version=1" in f.read(), "ConfigCommand asked ListConfigResources v1"
