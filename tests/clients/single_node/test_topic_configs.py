"""Kafka 4.1's topic configs beyond retention and compaction: `compression.type` (batches
recompressed on the broker to the topic's codec, at its `compression.*.level`), KIP-467's
per-record errors in Produce responses, `segment.index.bytes` / `segment.jitter.ms` /
`preallocate`, and tiered storage's configs refused with a reason that names what is not built.

Kafka's own tools judge: DumpLogSegments reads the codec of every stored batch, the Java console
consumer and librdkafka read what the broker recompressed, kafka-configs alters and describes."""
import os
import re
import time

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from support.batches import codecs_used
from support.kafka import kafka_tool

RECORDS = 400


def create(bootstrap, name, configs, partitions=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)])
    fs[name].result(30)


def values(topic):
    return [f"{topic}-{i:05d}-" .encode() + b"x" * (i % 97) for i in range(RECORDS)]


def produce(bootstrap, topic, codec):
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                  "enable.idempotence": True})
    errors = []
    for i, v in enumerate(values(topic)):
        p.produce(topic, key=str(i % 13).encode(), value=v,
                  on_delivery=lambda err, m: err and errors.append(err))
    assert p.flush(30) == 0
    assert errors == []


def read_with_librdkafka(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.time()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 30
    while len(got) < RECORDS and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def test_batches_are_recompressed_to_the_topic_codec_and_every_client_reads_them(make_broker):
    broker = make_broker(shards=1).start()
    # (topic codec and level, what the producer sends, what must be on disk)
    cases = {
        "c-zstd": ({"compression.type": "zstd", "compression.zstd.level": "10"}, "none", "zstd"),
        "c-gzip": ({"compression.type": "gzip", "compression.gzip.level": "1"}, "lz4", "gzip"),
        "c-lz4": ({"compression.type": "lz4", "compression.lz4.level": "17"}, "snappy", "lz4"),
        "c-snappy": ({"compression.type": "snappy"}, "gzip", "snappy"),
        "c-uncompressed": ({"compression.type": "uncompressed"}, "zstd", "none"),
        "c-producer": ({"compression.type": "producer"}, "lz4", "lz4"),
        "c-default": ({}, "gzip", "gzip"),
    }
    for topic, (configs, sent, _) in cases.items():
        create(broker.bootstrap, topic, configs)
        produce(broker.bootstrap, topic, sent)
    # A change applies to the batches that come after it.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "c-default", incremental_configs=[
        ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    time.sleep(0.5)
    produce(broker.bootstrap, "c-default", "gzip")

    for topic, (_, _, stored) in cases.items():
        if topic == "c-default":
            continue
        # The Java consumer (Kafka's console consumer) and librdkafka read every record back.
        r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", broker.bootstrap,
                       "--topic", topic, "--from-beginning", "--max-messages", str(RECORDS),
                       "--timeout-ms", "30000")
        assert f"Processed a total of {RECORDS} messages" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
        assert sorted(r.stdout.split()) == sorted(v.decode() for v in values(topic))
        assert read_with_librdkafka(broker.bootstrap, topic) == values(topic), topic

    broker.stop()
    for topic, (_, sent, stored) in cases.items():
        want = {"gzip", "zstd"} if topic == "c-default" else {stored}
        assert codecs_used(broker.data_dir, topic) == want, (topic, sent)
        # Kafka's DumpLogSegments reads each batch's codec and checks its CRC.
        for seg in sorted(f for f in os.listdir(os.path.join(broker.data_dir, f"{topic}-0")) if f.endswith(".log")):
            r = kafka_tool("kafka.tools.DumpLogSegments", "--files",
                           os.path.join(broker.data_dir, f"{topic}-0", seg), "--deep-iteration")
            assert r.returncode == 0, r.stderr
            batches = [l for l in r.stdout.splitlines() if l.startswith("baseOffset:")]
            assert batches and all("isvalid: true" in l for l in batches), r.stdout[:2000]
            codecs = set(re.findall(r"compresscodec: (\w+)", r.stdout))
            assert codecs <= {c.upper() for c in want} | want, (topic, codecs)
            if topic != "c-default":
                assert codecs in ({stored}, {stored.upper()}), (topic, codecs)


def deliveries(bootstrap, topic, records):
    """Sends `records` [(key, value, timestamp)] as one batch; [error code or None] per record."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "batch.num.messages": 1000,
                  "message.send.max.retries": 0})
    outcome = [None] * len(records)

    def done(i):
        return lambda err, m: outcome.__setitem__(i, err.code() if err else "ok")
    for i, (k, v, ts) in enumerate(records):
        p.produce(topic, key=k, value=v, timestamp=ts, on_delivery=done(i))
    assert p.flush(30) == 0
    return outcome


def test_a_batch_with_bad_records_names_each_of_them(broker):
    """KIP-467: a batch refused for some of its records names them (`record_errors`): librdkafka
    fails those with the record's error and the others with _INVALID_DIFFERENT_RECORD, so an
    application can send the good ones again; nothing of the refused batch is stored."""
    create(broker.bootstrap, "kip467-compact", {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    records = [(None if i % 10 == 3 else f"k{i}".encode(), f"v{i}".encode(), now) for i in range(100)]
    outcome = deliveries(broker.bootstrap, "kip467-compact", records)
    bad = [i for i, o in enumerate(outcome) if o == KafkaError.INVALID_RECORD]
    assert bad == [i for i in range(100) if i % 10 == 3], outcome
    assert outcome.count(KafkaError._INVALID_DIFFERENT_RECORD) == 90, outcome
    # The 90 good ones, sent again, are stored; nothing else is.
    good = [r for r in records if r[0] is not None]
    assert deliveries(broker.bootstrap, "kip467-compact", good) == ["ok"] * 90
    assert len(read_with_librdkafka_n(broker.bootstrap, "kip467-compact", 90)) == 90

    create(broker.bootstrap, "kip467-ts", {"message.timestamp.before.max.ms": "60000"})
    records = [(b"k", f"v{i}".encode(), now - 3_600_000 if i in (0, 7, 8) else now) for i in range(20)]
    outcome = deliveries(broker.bootstrap, "kip467-ts", records)
    # (librdkafka reports INVALID_RECORD for each named record when more than one is named; when
    # only one is, it gives every record of the batch the partition's error, INVALID_TIMESTAMP.)
    assert [i for i, o in enumerate(outcome) if o == KafkaError.INVALID_RECORD] == [0, 7, 8], outcome
    assert outcome.count(KafkaError._INVALID_DIFFERENT_RECORD) == 17, outcome
    records = [(b"k", f"v{i}".encode(), now - 3_600_000 if i == 4 else now) for i in range(20)]
    assert deliveries(broker.bootstrap, "kip467-ts", records) == [KafkaError.INVALID_TIMESTAMP] * 20


def read_with_librdkafka_n(bootstrap, topic, n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.time()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 20
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.offset())
        elif len(got) >= n:
            break
    c.close()
    assert got == list(range(n)), got
    return got


def test_kafka_4_topic_configs_are_honoured_or_refused_naming_what_is_not_built(broker):
    create(broker.bootstrap, "cfg", {})
    b = broker.bootstrap
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b, "--alter", "--entity-type", "topics",
                   "--entity-name", "cfg", "--add-config",
                   "segment.index.bytes=65536,segment.jitter.ms=60000,preallocate=true,compression.type=zstd,"
                   "compression.zstd.level=7,compression.gzip.level=-1,compression.lz4.level=12,"
                   "remote.storage.enable=false,local.retention.ms=-2")
    assert r.returncode == 0, r.stdout + r.stderr
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b, "--describe", "--entity-type",
                   "topics", "--entity-name", "cfg", "--all")
    assert r.returncode == 0, r.stderr
    for line in ["segment.index.bytes=65536", "segment.jitter.ms=60000", "preallocate=true", "compression.type=zstd",
                 "compression.zstd.level=7", "compression.lz4.level=12", "remote.storage.enable=false",
                 "local.retention.bytes=-2"]:
        assert line in r.stdout, (line, r.stdout)
    # Broker defaults are described as Kafka's synonyms.
    assert "DEFAULT_CONFIG:log.index.size.max.bytes=10485760" in r.stdout, r.stdout
    for bad, why in [("remote.storage.enable=true", "tiered storage (KIP-405) is not built in ringlog"),
                     ("local.retention.ms=1000", "tiered storage (KIP-405) is not built in ringlog"),
                     ("compression.type=brotli", "one of uncompressed, gzip, snappy, lz4, zstd, producer"),
                     ("compression.zstd.level=23", "must be from -131072 to 22"),
                     ("segment.index.bytes=3", "must be at least 4")]:
        r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", b, "--alter", "--entity-type",
                       "topics", "--entity-name", "cfg", "--add-config", bad)
        assert r.returncode != 0 and why in r.stdout + r.stderr, (bad, r.stdout + r.stderr)
    # A topic created with a tiered config is refused whole, with the same reason.
    admin = AdminClient({"bootstrap.servers": b})
    f = admin.create_topics([NewTopic("tiered", num_partitions=1, replication_factor=1,
                                      config={"remote.storage.enable": "true"})])["tiered"]
    try:
        f.result(30)
        raise AssertionError("a topic with remote.storage.enable=true was created")
    except Exception as e:  # KafkaException carrying INVALID_CONFIG
        assert "KIP-405" in str(e), e


def test_the_dynamic_default_cleanup_policy_reaches_topics_without_their_own(broker):
    """`log.cleanup.policy` as a dynamic broker config (`kafka-configs --entity-type brokers
    --entity-default`): a topic that sets no cleanup.policy follows it at once — compacted, it
    refuses an unkeyed record (INVALID_RECORD) — and DescribeConfigs says where its value comes
    from; a topic with its own keeps it; APPEND/SUBTRACT work on it as on a topic's list; deleting
    it brings back the config file's `delete`. `background.threads` and
    `sasl.kerberos.min.time.before.relogin` are accepted and shown (they change nothing in
    ringlog); a bad value is refused naming it."""
    from support.waiting import wait_for
    create(broker.bootstrap, "dyn-follows", {})
    create(broker.bootstrap, "dyn-own", {"cleanup.policy": "delete"})

    def unkeyed(topic):
        return deliveries(broker.bootstrap, topic, [(None, b"v", int(time.time() * 1000))])[0]

    def configs(*args):
        r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap, *args)
        return r.returncode, r.stdout + r.stderr
    assert unkeyed("dyn-follows") == "ok"
    code, out = configs("--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                        "log.cleanup.policy=compact,background.threads=9,sasl.kerberos.min.time.before.relogin=58000")
    assert code == 0, out
    wait_for("the topic compacted", lambda: unkeyed("dyn-follows") == KafkaError.INVALID_RECORD, 20)
    assert unkeyed("dyn-own") == "ok"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "dyn-follows")
    entry = admin.describe_configs([res])[res].result(30)["cleanup.policy"]
    assert (entry.value, entry.source) == ("compact", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value), entry
    code, out = configs("--entity-type", "brokers", "--entity-default", "--describe")
    assert code == 0 and "background.threads=9" in out and "log.cleanup.policy=compact" in out, out
    # incremental APPEND on a broker's own list, as librdkafka's 0081_admin does: on the
    # built-in default (`delete`) when the broker has no value of its own, as in Kafka
    broker_id = str(min(admin.list_topics(timeout=10).brokers))
    res = ConfigResource(ConfigResource.Type.BROKER, broker_id, incremental_configs=[
        ConfigEntry("log.cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    list(admin.incremental_alter_configs([res]).values())[0].result(30)
    code, out = configs("--entity-type", "brokers", "--entity-name", broker_id, "--describe")
    assert "log.cleanup.policy=delete,compact" in out, out
    code, out = configs("--entity-type", "brokers", "--entity-name", broker_id, "--alter", "--delete-config",
                        "log.cleanup.policy")
    assert code == 0, out
    code, out = configs("--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                        "background.threads=0")
    assert code != 0 and "background.threads" in out, out
    code, out = configs("--entity-type", "brokers", "--entity-default", "--alter", "--delete-config",
                        "log.cleanup.policy,background.threads,sasl.kerberos.min.time.before.relogin")
    assert code == 0, out
    wait_for("the config file's policy back", lambda: unkeyed("dyn-follows") == "ok", 20)
