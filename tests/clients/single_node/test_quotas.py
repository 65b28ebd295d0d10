"""Client quotas, Kafka's way: kept with AlterClientQuotas (Kafka's kafka-configs tool), described
with DescribeClientQuotas, and enforced — a producer over its `producer_byte_rate` and a
consumer over its `consumer_byte_rate` are held to it (answers carry `throttle_time_ms`, the
connection is muted for that long), node-wide across shards, and a client over its
`controller_mutation_rate` gets THROTTLING_QUOTA_EXCEEDED."""
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from support.kafka import kafka_tool
from support.wire import connect


def configs(bootstrap, *args):
    return kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, *args)


def test_kafka_configs_sets_describes_and_removes_quotas_with_kafkas_rules(broker):
    b = broker.bootstrap
    for entity in (["--entity-type", "users", "--entity-name", "alice"],
                   ["--entity-type", "users", "--entity-default"],
                   ["--entity-type", "clients", "--entity-name", "app"],
                   ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                    "--entity-name", "app"]):
        r = configs(b, "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152", *entity)
        assert r.returncode == 0, r.stdout + r.stderr
    r = configs(b, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "Quota configs for user-principal 'alice' are" in r.stdout and "producer_byte_rate=1048576.0" in r.stdout, \
        r.stdout + r.stderr
    r = configs(b, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                "--entity-name", "app")
    assert "Quota configs for user-principal 'alice', client-id 'app' are" in r.stdout, r.stdout + r.stderr
    r = configs(b, "--describe", "--entity-type", "clients")
    assert "Quota configs for client-id 'app' are" in r.stdout, r.stdout + r.stderr
    r = configs(b, "--describe", "--entity-type", "users", "--entity-default")
    assert "Quota configs for the default user-principal are" in r.stdout, r.stdout + r.stderr
    # Kafka's refusals, each naming what is wrong.
    for bad, why in [("producer_byte_rate=1.5", "cannot be a fractional value"),
                     ("producer_byte_rate=0", "must be greater than 0"),
                     ("request_percentage=-1", "must be greater than 0")]:
        r = configs(b, "--alter", "--add-config", bad, "--entity-type", "users", "--entity-name", "bob")
        assert r.returncode != 0 and why in r.stdout + r.stderr, (bad, r.stdout + r.stderr)
    r = configs(b, "--alter", "--add-config", "connection_creation_rate=10", "--entity-type", "ips",
                "--entity-name", "127.0.0.1")
    assert r.returncode != 0 and "IP quotas (connection_creation_rate) are not built" in r.stdout + r.stderr, \
        r.stdout + r.stderr
    # Removing every key removes the entity; kill -9 keeps the rest.
    r = configs(b, "--alter", "--delete-config", "producer_byte_rate,consumer_byte_rate", "--entity-type",
                "clients", "--entity-name", "app")
    assert r.returncode == 0, r.stdout + r.stderr
    broker.stop(sig=9)
    broker.start()
    r = configs(b, "--describe", "--entity-type", "clients")
    assert "client-id 'app'" not in r.stdout, r.stdout
    r = configs(b, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "producer_byte_rate=1048576.0" in r.stdout, r.stdout + r.stderr


def flood(bootstrap, topic, client_id, seconds, partitions):
    """Sends 10 KiB records as fast as the client can for `seconds`; [(time, bytes acked)]. The
    producer's queue is kept to 2 MiB so that what is left at the end drains in seconds."""
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
                  "queue.buffering.max.kbytes": 2048})
    acked = []
    value = b"q" * 10240
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, value, partition=i % partitions,
                      on_delivery=lambda err, m: err or acked.append((time.monotonic(), len(m.value()))))
            i += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(60)
    return [(t - start, n) for t, n in acked]


def rate_between(samples, a, b):
    return sum(n for t, n in samples if a <= t < b) / (b - a)


def test_a_flooding_producer_is_held_to_its_quota_across_the_nodes_shards(make_broker):
    broker = make_broker(shards=2).start()
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("flooded", num_partitions=2, replication_factor=1)])["flooded"].result(30)
    quota = 1_048_576
    r = configs(b, "--alter", "--add-config", f"producer_byte_rate={quota}", "--entity-type", "clients",
                "--entity-name", "flooder")
    assert r.returncode == 0, r.stdout + r.stderr
    # Two partitions, one per shard: the quota is the node's, not each shard's.
    # (The first second goes at once: the token bucket holds a second's burst.)
    samples = flood(b, "flooded", "flooder", 14, 2)
    steady = rate_between(samples, 4, 14)
    assert 0.85 * quota <= steady <= 1.15 * quota, f"{steady / quota:.2f} of the quota"
    # Another client id has no quota and is not held.
    free = flood(b, "flooded", "other", 5, 2)
    assert rate_between(free, 0, 5) > 4 * quota


def test_a_consumer_is_held_to_its_consumer_byte_rate(broker):
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("read-limited", num_partitions=1, replication_factor=1)])["read-limited"].result(30)
    p = Producer({"bootstrap.servers": b, "linger.ms": 5})
    for _ in range(4000):
        p.produce("read-limited", b"r" * 10240)
        p.poll(0)
    p.flush(60)
    quota = 1_048_576
    r = configs(b, "--alter", "--add-config", f"consumer_byte_rate={quota}", "--entity-type", "clients",
                "--entity-name", "slow-reader")
    assert r.returncode == 0, r.stdout + r.stderr
    c = Consumer({"bootstrap.servers": b, "group.id": "q", "client.id": "slow-reader",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.max.bytes": 1048576})
    c.subscribe(["read-limited"])
    got = []
    start = time.monotonic()
    while time.monotonic() - start < 14:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((time.monotonic() - start, len(m.value())))
    c.close()
    steady = rate_between(got, 4, 14)
    assert 0.8 * quota <= steady <= 1.2 * quota, f"{steady / quota:.2f} of the quota"


def test_topic_mutations_over_the_controller_mutation_rate_are_refused(broker):
    """CreateTopics v7 on the wire (strict mode): once the client's partitions created per
    second pass its quota, the next creation is THROTTLING_QUOTA_EXCEEDED with a throttle."""
    b = broker.bootstrap
    r = configs(b, "--alter", "--add-config", "controller_mutation_rate=2", "--entity-type", "clients",
                "--entity-name", "creator")
    assert r.returncode == 0, r.stdout + r.stderr
    first, second = connect(b), connect(b)
    codes = []
    for i in range(4):
        # CreateTopics v7 (flexible): one topic of 10 partitions; the last on another connection
        # of the same client, which its first connection's throttle does not hold.
        s = first if i < 3 else second
        body = (b"\x02" + compact_string(f"mut-{i}") + (10).to_bytes(4, "big") + (1).to_bytes(2, "big")
                + b"\x01" + b"\x01" + b"\x00" + (30000).to_bytes(4, "big") + b"\x00" + b"\x00")
        resp = call_flexible(s, 19, 7, body, "creator", correlation_id=100 + i)
        throttle = int.from_bytes(resp[0:4], "big")
        # topics: compact array of 1; name compact string, topic id, error code.
        name_len = resp[5] - 1
        at = 6 + name_len + 16
        codes.append((int.from_bytes(resp[at:at + 2], "big", signed=True), throttle))
    # 10 partitions each against 2/s with a burst of the 11 s window (22): the first three pass,
    # the third taking the allowance below zero (throttled); the fourth, sent at once from the
    # other connection, is refused with THROTTLING_QUOTA_EXCEEDED and a throttle.
    assert [c for c, _ in codes] == [0, 0, 0, 89], codes
    assert codes[2][1] > 0 and codes[3][1] > 0, codes


def compact_string(s):
    b = s.encode()
    return bytes([len(b) + 1]) + b


def call_flexible(s, api_key, version, body, client_id, correlation_id):
    """A request with header v2 (flexible); the response body after its header v1."""
    cid = client_id.encode()
    header = (api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + correlation_id.to_bytes(4, "big")
              + len(cid).to_bytes(2, "big") + cid + b"\x00")
    payload = header + body
    s.sendall(len(payload).to_bytes(4, "big") + payload)
    size = int.from_bytes(recv(s, 4), "big")
    data = recv(s, size)
    assert int.from_bytes(data[0:4], "big") == correlation_id
    return data[5:]  # correlation id, then the header's tagged fields (none)


def recv(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out
