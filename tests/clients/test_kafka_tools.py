"""Apache Kafka's own admin tools against ringlog (issue 13): what they show must be the
broker's running configuration, with Kafka's sources and synonyms.

Kafka's tools come from Maven Central (scripts/fetch-kafka.sh); `kafka_tool` runs one by class.
"""
import re

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from conftest import kafka_tool


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
