"""TLS and SASL against the real ringlog binary, with real clients (confluent-kafka, kafka-python,
kcat, Apache Kafka's own Java tools): SCRAM-SHA-512 and SCRAM-SHA-256 over SASL_SSL, mutual TLS
on an SSL listener, SCRAM users created at start (`--add-scram`) and managed with
AlterUserScramCredentials, re-authentication (connections.max.reauth.ms), and every way in that
must fail: a wrong password, an unknown user, a mechanism not enabled, a plaintext client on a
TLS port, no, an untrusted or an expired client certificate — each with a clear error and no data
written.

Certificates are made fresh for the module with the `cryptography` package: a CA, the broker's
certificate (127.0.0.1), a client certificate, an expired one, and one from a CA the broker does
not trust.
"""
import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from support import wire
from support.broker import Broker, free_port_block
from support.certs import make_certs
from support.kafka import kafka_tool
from support.security import ADMIN_PASSWORD, secure_broker


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(str(tmp_path_factory.mktemp("certs")))


def full_log(b):
    with open(b.log_path, "rb") as f:
        return f.read().decode(errors="replace")


def log_shows(b, text, timeout=5):
    """Whether the broker's log shows `text` within `timeout` s (a connection's closing is logged
    just after the client sees it closed)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in full_log(b):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def broker(certs):
    b = secure_broker(certs)
    yield b
    b.cleanup()


def sasl_conf(b, certs, user="admin", password=ADMIN_PASSWORD, mechanism="SCRAM-SHA-512"):
    return {"bootstrap.servers": f"127.0.0.1:{b.sasl_ssl}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": certs["ca"]}


def mtls_conf(b, certs, cert="client"):
    return {"bootstrap.servers": f"127.0.0.1:{b.ssl}", "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"], "ssl.certificate.location": certs[cert + ".crt"],
            "ssl.key.location": certs[cert + ".key"]}


def produce(conf, topic, values, timeout=30):
    """Produces `values` (bytes) to partition 0 of `topic`; returns the delivery errors and the
    client errors seen."""
    failed, client_errors = [], []
    p = Producer({**conf, "error_cb": lambda e: client_errors.append(e), "message.timeout.ms": 10000,
                  "enable.idempotence": True})
    for v in values:
        p.produce(topic, v, partition=0,
                  on_delivery=lambda err, msg: failed.append(err) if err else None)
    left = p.flush(timeout)
    if left:
        failed.append(f"{left} records not delivered")
    return failed, client_errors


def consume(conf, topic, count, timeout=30):
    c = Consumer({**conf, "group.id": "g-" + uuid.uuid4().hex, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.time() + timeout
    while len(got) < count and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def raw_sasl_ssl(b, certs):
    ctx = ssl.create_default_context(cafile=certs["ca"])
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", b.sasl_ssl), timeout=10),
                           server_hostname="127.0.0.1")


def raw_scram_login(sock, user, password):
    """SaslHandshake v1 and SaslAuthenticate v1 with SCRAM-SHA-512, by hand (RFC 5802); returns
    the session lifetime the broker gives."""
    return _raw_scram(sock, user, password)[1]


def raw_scram_attempt(sock, user, password):
    """One SCRAM login by hand; the SaslAuthenticate error code of the final message."""
    return _raw_scram(sock, user, password)[0]


def _raw_scram(sock, user, password):
    r = wire.Reader(wire.call(sock, 17, 1, wire.string("SCRAM-SHA-512")))
    assert r.take(">h") == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}"
    r = wire.Reader(wire.call(sock, 36, 1, wire.bytes_field(f"n,,{first_bare}".encode())))
    assert r.take(">h") == 0, r.string()
    r.string()
    server_first = r.bytes().decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha512(client_key).digest(), auth, "sha512").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    r = wire.Reader(wire.call(sock, 36, 1, wire.bytes_field(f"{without_proof},p={proof}".encode())))
    error = r.take(">h")
    if error:
        return error, None
    r.string()
    server_final = r.bytes().decode()
    server_key = hmac.new(salted, b"Server Key", "sha512").digest()
    assert server_final == "v=" + base64.b64encode(hmac.new(server_key, auth, "sha512").digest()).decode()
    return 0, r.take(">q")


def test_a_sasl_listener_serves_nothing_before_authentication(broker, certs):
    sock = raw_sasl_ssl(broker, certs)
    assert wire.call(sock, 18, 0, b"")[:2] == b"\x00\x00"  # ApiVersions is served
    sock.sendall(wire.frame(struct.pack(">hhi", 3, 1, 12) + wire.string("raw") + struct.pack(">i", -1)))
    assert wire.read_response(sock) is None, "Metadata answered before authentication"
    assert log_shows(broker, "Metadata before authenticating on a SASL listener")
    # after a SCRAM login by hand (the server's signature checked), requests are served
    sock = raw_sasl_ssl(broker, certs)
    assert raw_scram_login(sock, "admin", ADMIN_PASSWORD) == 0  # no reauth limit: lifetime 0
    assert wire.call(sock, 3, 1, struct.pack(">i", -1))


def test_scram_over_sasl_ssl_produce_and_consume(broker, certs):
    # small and large records: large fetch responses go through the TLS copy path in pieces
    values = [f"v{i}".encode() for i in range(200)] + [os.urandom(300_000) for _ in range(6)]
    failed, errors = produce(sasl_conf(broker, certs), "sasl-topic", values)
    assert not failed and not errors, (failed, errors, broker.read_log())
    assert consume(sasl_conf(broker, certs), "sasl-topic", len(values)) == values
    # the PLAINTEXT listener serves the same data
    assert consume({"bootstrap.servers": broker.bootstrap}, "sasl-topic", len(values)) == values
    log = full_log(broker)
    assert "authenticated" in log and "user=admin" in log, log
    assert ADMIN_PASSWORD not in log


def test_scram_users_are_managed_with_alter_user_scram_credentials(broker, certs):
    admin = AdminClient(sasl_conf(broker, certs))
    f = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"bob-pw"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-pw"),
    ])
    for fut in f.values():
        fut.result(10)
    futures = admin.describe_user_scram_credentials(["bob", "carol", "admin"])
    described = {u: fut.result(10) for u, fut in futures.items()}
    infos = {u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos] for u, d in described.items()}
    assert infos == {"bob": [(ScramMechanism.SCRAM_SHA_256, 8192)],
                     "carol": [(ScramMechanism.SCRAM_SHA_512, 4096)],
                     "admin": [(ScramMechanism.SCRAM_SHA_512, 4096)]}, infos
    # bob logs in with SCRAM-SHA-256, and not with SCRAM-SHA-512 (no credential for it)
    failed, errors = produce(sasl_conf(broker, certs, "bob", "bob-pw", "SCRAM-SHA-256"), "bob-topic", [b"x"])
    assert not failed and not errors, (failed, errors)
    failed, errors = produce(sasl_conf(broker, certs, "bob", "bob-pw", "SCRAM-SHA-512"), "bob-topic", [b"y"], timeout=5)
    assert failed and any("Authentication failed" in e.str() for e in errors), (failed, errors)
    # deleting bob's credential locks him out; deleting one he does not have is RESOURCE_NOT_FOUND
    for fut in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)]).values():
        fut.result(10)
    missing = admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(Exception) as e:
        missing["bob"].result(10)
    assert "RESOURCE_NOT_FOUND" in str(e.value) or "not exist" in str(e.value), e.value
    failed, errors = produce(sasl_conf(broker, certs, "bob", "bob-pw", "SCRAM-SHA-256"), "bob-topic", [b"z"], timeout=5)
    assert failed, "bob still authenticates after his credential was deleted"
    # too few iterations: UNACCEPTABLE_CREDENTIAL
    bad = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")])
    with pytest.raises(Exception) as e:
        bad["dave"].result(10)
    assert "UNACCEPTABLE_CREDENTIAL" in str(e.value) or "iterations" in str(e.value), e.value
    assert consume(sasl_conf(broker, certs), "bob-topic", 1) == [b"x"]


def test_mutual_tls_produce_and_consume_as_the_certificate_subject(broker, certs):
    failed, errors = produce(mtls_conf(broker, certs), "mtls-topic", [b"a", b"b", b"c"])
    assert not failed and not errors, (failed, errors, broker.read_log())
    assert consume(mtls_conf(broker, certs), "mtls-topic", 3) == [b"a", b"b", b"c"]
    # Kafka's principal for a certificate: its subject as RFC 2253 writes it
    assert "principal=User:CN=client1,OU=eng,O=ringlog" in full_log(broker)


@pytest.mark.parametrize("case", ["wrong-password", "unknown-user", "mechanism-not-enabled", "plaintext-on-tls",
                                  "no-client-certificate", "untrusted-certificate", "expired-certificate"])
def test_refused_clients_get_a_clear_error_and_write_nothing(broker, certs, case):
    topic = f"denied-{case}"
    conf, expect = {
        "wrong-password": (sasl_conf(broker, certs, password="nope"), "Authentication failed"),
        "unknown-user": (sasl_conf(broker, certs, user="mallory", password="x"), "Authentication failed"),
        "mechanism-not-enabled": ({**sasl_conf(broker, certs), "sasl.mechanism": "PLAIN"}, "PLAIN"),
        "plaintext-on-tls": ({"bootstrap.servers": f"127.0.0.1:{broker.sasl_ssl}"}, "brokers are down"),
        "no-client-certificate": ({"bootstrap.servers": f"127.0.0.1:{broker.ssl}", "security.protocol": "SSL",
                                   "ssl.ca.location": certs["ca"]}, ""),
        "untrusted-certificate": (mtls_conf(broker, certs, "untrusted"), ""),
        "expired-certificate": (mtls_conf(broker, certs, "expired"), ""),
    }[case]
    failed, errors = produce(conf, topic, [b"must-not-be-stored"], timeout=6)
    assert failed, f"{case}: the record was delivered"
    messages = " | ".join(e.str() for e in errors)
    assert errors and expect in messages, f"{case}: {messages}"
    # nothing reached the broker: the topic was never even created
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert topic not in md.topics, f"{case}: {topic} exists"
    log = full_log(broker)
    assert "nope" not in log and ADMIN_PASSWORD not in log
    if case in ("wrong-password", "unknown-user"):
        assert "failed authentication" in log and "peer=127.0.0.1:" in log, log
    if case.endswith("certificate") or case == "plaintext-on-tls":
        assert "TLS handshake failed" in log, log


def newer_librdkafka(tmp_path):
    """A folder holding librdkafka.so.1 from the confluent-kafka wheel (librdkafka 2.16), for
    kcat: Debian bookworm's librdkafka 2.0.2 repeats the client nonce in SCRAM's final message
    (fixed in 2.6.1, librdkafka#4895), which Kafka 4.x refuses, and so does ringlog."""
    import confluent_kafka
    libs = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    lib = [f for f in os.listdir(libs) if f.startswith("librdkafka")][0]
    os.symlink(os.path.join(libs, lib), tmp_path / "librdkafka.so.1")
    return {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}


def test_kcat_over_sasl_ssl(broker, certs, tmp_path):
    x = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=admin",
         "-X", f"sasl.password={ADMIN_PASSWORD}", "-X", f"ssl.ca.location={certs['ca']}"]
    b = ["-b", f"127.0.0.1:{broker.sasl_ssl}"]
    env = newer_librdkafka(tmp_path)
    r = subprocess.run(["kcat", "-P", "-t", "kcat-sasl", "-p", "0"] + b + x, input="one\ntwo\nthree\n",
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["kcat", "-C", "-t", "kcat-sasl", "-p", "0", "-o", "beginning", "-c", "3", "-e"] + b + x,
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and r.stdout.split() == ["one", "two", "three"], (r.stdout, r.stderr)
    wrong = x[:-4] + ["-X", "sasl.password=wrong"] + x[-2:]
    r = subprocess.run(["kcat", "-L"] + b + wrong + ["-m", "5"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode != 0 and "Authentication failed" in r.stderr, r.stderr
    # Debian's own librdkafka (2.0.2) with the right password: refused for its nonce, as Kafka
    # 4.x refuses it (RFC 5802: the final message must carry exactly the server's nonce)
    r = subprocess.run(["kcat", "-L"] + b + x + ["-m", "5"], capture_output=True, text=True, timeout=60)
    if "2.0.2" in subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout:
        assert r.returncode != 0 and "Authentication failed" in r.stderr, r.stderr


def test_kcat_over_mutual_tls(broker, certs):
    """Debian's kcat (its own librdkafka: no SCRAM here) with a client certificate; one from a CA
    the broker does not trust is refused."""
    b = ["-b", f"127.0.0.1:{broker.ssl}"]
    x = lambda cert: ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certs['ca']}",
                      "-X", f"ssl.certificate.location={certs[cert + '.crt']}",
                      "-X", f"ssl.key.location={certs[cert + '.key']}"]
    r = subprocess.run(["kcat", "-P", "-t", "kcat-mtls", "-p", "0"] + b + x("client"), input="m1\nm2\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["kcat", "-C", "-t", "kcat-mtls", "-p", "0", "-o", "beginning", "-c", "2", "-e"] + b + x("client"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["m1", "m2"], (r.stdout, r.stderr)
    r = subprocess.run(["kcat", "-L", "-m", "5"] + b + x("untrusted"), capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout


def test_kafka_python_over_sasl_ssl_and_mutual_tls(broker, certs):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KTP
    from kafka.errors import KafkaError as KPError
    common = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
              "sasl_plain_username": "admin", "sasl_plain_password": ADMIN_PASSWORD,
              "ssl_cafile": certs["ca"], "ssl_check_hostname": True}
    for name, conf in [("sasl", {"bootstrap_servers": f"127.0.0.1:{broker.sasl_ssl}", **common}),
                       ("mtls", {"bootstrap_servers": f"127.0.0.1:{broker.ssl}", "security_protocol": "SSL",
                                 "ssl_cafile": certs["ca"], "ssl_certfile": certs["client.crt"],
                                 "ssl_keyfile": certs["client.key"]})]:
        topic = f"kp-{name}"
        p = KafkaProducer(**conf)
        for i in range(20):
            p.send(topic, f"{name}-{i}".encode(), partition=0).get(30)
        p.close()
        c = KafkaConsumer(**conf, consumer_timeout_ms=10000)
        c.assign([KTP(topic, 0)])
        c.seek_to_beginning()
        got = [m.value.decode() for m in c][:20]
        c.close()
        assert got == [f"{name}-{i}" for i in range(20)], got
    with pytest.raises(KPError):
        KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.sasl_ssl}",
                      **{**common, "sasl_plain_password": "wrong"}, max_block_ms=5000).send("kp-denied", b"x").get(10)


def test_java_tools_over_sasl_ssl(broker, certs, tmp_path):
    props = sasl_command_config(tmp_path / "client.properties", certs, ssl_truststore_type="PEM")
    bootstrap = f"127.0.0.1:{broker.sasl_ssl}"
    # kafka-configs: a SCRAM user through AlterUserScramCredentials
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--command-config", str(props),
                   "--alter", "--add-config", "'SCRAM-SHA-256=[iterations=8192,password=erin-pw]'",
                   "--entity-type", "users", "--entity-name", "erin")
    assert r.returncode == 0, r.stdout + r.stderr
    # a client quota on the SASL user (AlterClientQuotas), ample for what erin sends below
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--command-config", str(props),
                   "--alter", "--add-config", "producer_byte_rate=104857600", "--entity-type", "users",
                   "--entity-name", "erin")
    assert r.returncode == 0, r.stdout + r.stderr
    # kafka-configs --describe of users: SCRAM credentials (DescribeUserScramCredentials) and
    # client quotas (DescribeClientQuotas)
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--command-config", str(props),
                   "--describe", "--entity-type", "users", "--entity-name", "erin")
    assert r.returncode == 0 and "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-256=iterations=8192" \
        in r.stdout, r.stdout + r.stderr
    assert "Quota configs for user-principal 'erin' are producer_byte_rate=1.048576E8" in r.stdout, r.stdout
    # the Java producer as erin
    erin = sasl_command_config(tmp_path / "erin.properties", certs, "erin", "erin-pw",
                               sasl_mechanism="SCRAM-SHA-256", ssl_truststore_type="PEM")
    r = kafka_tool("org.apache.kafka.tools.ProducerPerformance", "--topic", "java-sasl", "--num-records", "2000",
                   "--record-size", "1000", "--throughput", "-1", "--producer.config", str(erin),
                   "--producer-props", "acks=all", f"bootstrap.servers={bootstrap}")
    assert r.returncode == 0 and "2000 records sent" in r.stdout, r.stdout + r.stderr
    r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bootstrap,
                   "--consumer.config", str(props), "--topic", "java-sasl", "--from-beginning",
                   "--max-messages", "2000", "--timeout-ms", "20000")
    assert r.returncode == 0 and "Processed a total of 2000 messages" in r.stdout + r.stderr, r.stdout + r.stderr
    # the Java client over mutual TLS: Kafka's PEM key store (key and chain in one file)
    mtls = command_config(tmp_path / "mtls.properties", security_protocol="SSL", ssl_keystore_type="PEM",
                          ssl_keystore_location=certs["client.pem"], ssl_truststore_type="PEM",
                          ssl_truststore_location=certs["ca"])
    r = kafka_tool("org.apache.kafka.tools.ProducerPerformance", "--topic", "java-mtls", "--num-records", "500",
                   "--record-size", "100", "--throughput", "-1", "--producer.config", str(mtls),
                   "--producer-props", "acks=all", f"bootstrap.servers=127.0.0.1:{broker.ssl}")
    assert r.returncode == 0 and "500 records sent" in r.stdout, r.stdout + r.stderr
    r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", f"127.0.0.1:{broker.ssl}",
                   "--consumer.config", str(mtls), "--topic", "java-mtls", "--from-beginning",
                   "--max-messages", "500", "--timeout-ms", "20000")
    assert r.returncode == 0 and "Processed a total of 500 messages" in r.stdout + r.stderr, r.stdout + r.stderr


def test_sessions_expire_and_clients_reauthenticate(certs):
    """connections.max.reauth.ms: librdkafka authenticates again on its connection before the
    session ends (KIP-368) and its records keep flowing; a connection that does not is closed at
    its first request after the session ended."""
    b = secure_broker(certs, {"connections.max.reauth.ms": "1500"}, shards=1)
    try:
        conf = sasl_conf(b, certs)
        p = Producer({**conf, "error_cb": lambda e: errors.append(e)})
        errors, delivered = [], []
        end = time.time() + 5
        while time.time() < end:
            p.produce("reauth", b"x", partition=0, on_delivery=lambda err, m: delivered.append(err))
            p.poll(0.1)
        p.flush(10)
        assert len(delivered) > 20 and not any(delivered) and not errors, (delivered, errors)
        log = full_log(b)
        assert log.count("authenticated") >= 3, log  # the first time and again every 1.5 s
        # a client that does not authenticate again is disconnected at its first request after
        # the session's lifetime (told to it in SaslAuthenticate v1)
        sock = raw_sasl_ssl(b, certs)
        lifetime = raw_scram_login(sock, "admin", ADMIN_PASSWORD)
        assert lifetime == 1500, lifetime
        assert wire.call(sock, 3, 1, struct.pack(">i", -1))  # Metadata v1, all topics: served
        time.sleep(2)
        sock.sendall(wire.frame(struct.pack(">hhi", 3, 1, 12) + wire.string("raw") + struct.pack(">i", -1)))
        assert wire.read_response(sock) is None, "served after the session expired"
        assert log_shows(b, "SASL session of admin expired"), full_log(b)[-3000:]
    finally:
        b.cleanup()


def test_ringlog_user_cli_manages_scram_users(broker, certs):
    from support.broker import BINARY
    user = lambda *a, **kw: subprocess.run([BINARY, "user", "--bootstrap-server", broker.bootstrap, *a],
                                           capture_output=True, text=True, timeout=30, **kw)
    r = user("set", "frank", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192", input="frank-pw\n")
    assert r.returncode == 0, r.stderr
    r = user("list", "frank")
    assert r.returncode == 0 and r.stdout.strip() == "frank\tSCRAM-SHA-256=iterations=8192", r.stdout + r.stderr
    failed, errors = produce(sasl_conf(broker, certs, "frank", "frank-pw", "SCRAM-SHA-256"), "frank-topic", [b"f"])
    assert not failed and not errors, (failed, errors)
    assert user("delete", "frank", "--mechanism", "SCRAM-SHA-256").returncode == 0
    r = user("list", "frank")
    assert r.returncode != 0 and "ResourceNotFound" in r.stderr, r.stdout + r.stderr
    r = user("set", "frank", "--mechanism", "SCRAM-SHA-1", "--password", "x")
    assert r.returncode != 0 and "SCRAM-SHA-1" in r.stderr, r.stderr
    assert "frank-pw" not in full_log(broker)


def test_failed_authentications_are_delayed_closed_and_logged_rate_limited(certs):
    b = secure_broker(certs, shards=1)
    try:
        started = time.time()
        for _ in range(25):
            sock = raw_sasl_ssl(b, certs)
            assert raw_scram_attempt(sock, "admin", "guess") == 58  # SASL_AUTHENTICATION_FAILED
            assert wire.read_response(sock) is None, "the connection stays open after a failure"
        # connection.failed.authentication.delay.ms (100) holds each answer
        assert time.time() - started >= 2.5
        lines = [l for l in full_log(b).splitlines() if "failed authentication" in l]
        assert len(lines) == 10, lines  # at most 10 per 10 s
        assert all("peer=127.0.0.1:" in l and "user=admin" in l for l in lines), lines
        assert "guess" not in full_log(b)
        time.sleep(10)
        sock = raw_sasl_ssl(b, certs)
        assert raw_scram_attempt(sock, "admin", "guess") == 58
        assert log_shows(b, "15 more failed authentications were not logged"), full_log(b)[-2000:]
    finally:
        b.cleanup()


def command_config(path, **props):
    with open(path, "w") as f:
        for k, v in props.items():
            f.write(f"{k.replace('_', '.')}={v}\n")
    return str(path)


def sasl_command_config(path, certs, user="admin", password=ADMIN_PASSWORD, **more):
    escaped = password.replace("\\", "\\\\").replace('"', '\\"')
    props = dict(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                 sasl_jaas_config=f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  f'username="{user}" password="{escaped}";',
                 ssl_truststore_location=certs["ca"])
    return command_config(path, **{**props, **more})


def test_ringlog_cli_over_sasl_ssl_and_mutual_tls_with_a_command_config(broker, certs, tmp_path):
    """`ringlog user|topic --command-config` (Kafka's client properties) over SASL_SSL with
    SCRAM-SHA-512 and over mutual TLS; a wrong password, an untrusted broker and a config that
    cannot work each end with a clear error."""
    from support.broker import BINARY

    def ringlog(port, config, *args, **kw):
        return subprocess.run([BINARY, *args[:1], "--bootstrap-server", f"127.0.0.1:{port}",
                               "--command-config", config, *args[1:]],
                              capture_output=True, text=True, timeout=30, **kw)

    sasl = sasl_command_config(tmp_path / "sasl.properties", certs)
    r = ringlog(broker.sasl_ssl, sasl, "user", "set", "grace", "--mechanism", "SCRAM-SHA-512",
                input="grace-pw\n")
    assert r.returncode == 0, r.stderr
    r = ringlog(broker.sasl_ssl, sasl, "user", "list", "grace")
    assert r.returncode == 0 and r.stdout.strip() == "grace\tSCRAM-SHA-512=iterations=4096", r.stdout + r.stderr
    grace = sasl_command_config(tmp_path / "grace.properties", certs, "grace", "grace-pw")
    r = ringlog(broker.sasl_ssl, grace, "topic", "create", "cli-sasl-topic", "--partitions", "1")
    assert r.returncode == 0, r.stderr
    failed, errors = produce(sasl_conf(broker, certs, "grace", "grace-pw"), "cli-sasl-topic", [b"g"])
    assert not failed and not errors, (failed, errors)

    # Mutual TLS: the client's key and certificate in one PEM file, as ssl.keystore.location.
    mtls = command_config(tmp_path / "mtls.properties", security_protocol="SSL",
                          ssl_keystore_location=certs["client.pem"], ssl_truststore_location=certs["ca"])
    r = ringlog(broker.ssl, mtls, "topic", "list")
    assert r.returncode == 0 and "cli-sasl-topic" in r.stdout, r.stdout + r.stderr
    assert log_shows(broker, "principal=User:CN=client1,OU=eng,O=ringlog"), full_log(broker)[-3000:]

    wrong = sasl_command_config(tmp_path / "wrong.properties", certs, "grace", "not-grace-pw")
    r = ringlog(broker.sasl_ssl, wrong, "topic", "list")
    assert r.returncode != 0 and "SCRAM-SHA-512 authentication failed" in r.stderr, r.stderr
    untrusting = sasl_command_config(tmp_path / "untrusting.properties", certs,
                                     ssl_truststore_location=certs["other-ca"])
    r = ringlog(broker.sasl_ssl, untrusting, "topic", "list")
    assert r.returncode != 0 and "TLS handshake" in r.stderr and "UnknownIssuer" in r.stderr, r.stderr
    no_ca = command_config(tmp_path / "no-ca.properties", security_protocol="SSL")
    r = ringlog(broker.ssl, no_ca, "topic", "list")
    assert r.returncode != 0 and "ssl.truststore.location" in r.stderr, r.stderr
    gssapi = command_config(tmp_path / "gssapi.properties", security_protocol="SASL_PLAINTEXT")
    r = ringlog(broker.sasl_ssl, gssapi, "topic", "list")
    assert r.returncode != 0 and "sasl.mechanism" in r.stderr and "GSSAPI" in r.stderr, r.stderr
    # The no-certificate client on the SSL listener (client certificates required).
    anonymous = command_config(tmp_path / "anon.properties", security_protocol="SSL",
                               ssl_truststore_location=certs["ca"])
    r = ringlog(broker.ssl, anonymous, "topic", "list")
    assert r.returncode != 0, r.stdout
    for secret in ("grace-pw", "not-grace-pw", ADMIN_PASSWORD):
        assert secret not in full_log(broker)


def test_ringlog_bench_runs_over_sasl_ssl(broker, certs, tmp_path):
    """The load generator's pipelined producers and consumers over SASL_SSL (TLS records sealed
    and opened by two threads on one connection): every message sent is acknowledged and read."""
    from support.broker import REPO
    bench = os.path.join(REPO, "target", "release", "ringlog-bench")
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "name: sasl-ssl-smoke\ntopics: 1\npartitionsPerTopic: 2\nmessageSize: 1024\n"
        "producersPerTopic: 1\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 1\n"
        "producerRate: 5000\nkeyDistributor: NO_KEY\ntestDurationMinutes: 0.1\n"
        "warmupDurationMinutes: 0.02\n"
        "producer: { acks: 1, batchSizeBytes: 131072, lingerMs: 1, compression: none, maxInFlight: 5 }\n")
    out = tmp_path / "result.json"
    r = subprocess.run([bench, "run", "--bootstrap", f"127.0.0.1:{broker.sasl_ssl}", "--workload", str(workload),
                        "--out", str(out), "--command-config", sasl_command_config(tmp_path / "b.properties", certs)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    import json
    result = json.load(open(out))
    assert sum(result["publishRate"]) > 0 and result["errors"] == 0, r.stdout
    assert sum(result["consumeRate"]) > 0, r.stdout


def test_per_listener_client_auth_and_mechanisms(certs):
    """Kafka's per-listener properties: a SASL_SSL listener that also wants a client
    certificate (listener.name.sasl_ssl.ssl.client.auth=required, which KIP-684 leaves off by
    default) and takes PLAIN only, beside a SASL_PLAINTEXT listener with the broker-wide
    SCRAM-SHA-512."""
    b = Broker(shards=1)
    b.sasl_ssl, b.internal = free_port_block(1), free_port_block(1)
    while len({b.sasl_ssl, b.internal, b.port}) < 3:
        b.sasl_ssl, b.internal = free_port_block(1), free_port_block(1)
    b.extra_ports = [b.sasl_ssl, b.internal]
    b.settings.update({
        "listeners": f"SASL_SSL://127.0.0.1:{b.sasl_ssl},INTERNAL://127.0.0.1:{b.internal},PLAINTEXT://127.0.0.1:{b.port}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "ssl.keystore.location": certs["broker.pem"], "ssl.truststore.location": certs["ca"],
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
    })
    b.serve_args = ["--add-scram", f"SCRAM-SHA-512=[name=admin,password={ADMIN_PASSWORD}]"]
    b.start()
    try:
        both = {**sasl_conf(b, certs, mechanism="PLAIN"), "ssl.certificate.location": certs["client.crt"],
                "ssl.key.location": certs["client.key"]}
        failed, errors = produce(both, "per-listener", [b"x"])
        assert not failed and not errors, (failed, errors)
        # no certificate: refused by TLS; SCRAM: not enabled on this listener
        for conf in (sasl_conf(b, certs, mechanism="PLAIN"), {**both, "sasl.mechanism": "SCRAM-SHA-512"}):
            failed, errors = produce(conf, "per-listener", [b"y"], timeout=15)
            assert failed or errors, conf
        internal = {"bootstrap.servers": f"127.0.0.1:{b.internal}", "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": ADMIN_PASSWORD}
        failed, errors = produce(internal, "per-listener", [b"z"])
        assert not failed and not errors, (failed, errors)
        failed, errors = produce({**internal, "sasl.mechanism": "PLAIN"}, "per-listener", [b"w"], timeout=15)
        assert failed or errors
        assert consume(internal, "per-listener", 2) == [b"x", b"z"]
    finally:
        b.cleanup()
