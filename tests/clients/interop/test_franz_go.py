"""franz-go (kgo + kadm) against a real ringlog node.

The checks live in tests/clients/go (main.go: kadm topic admin, an idempotent kgo producer per
codec, a kgo.ConsumePartitions consumer from the start verifying every field; groups.go, run as
`clientcheck groups`, checks consumer groups: three kgo.ConsumerGroup members joining one at a
time and sharing a topic, commits, and the group and its offsets through kadm). This wrapper
builds it with `go build` into tests/clients/go/bin/ (git-ignored; the Go build cache makes a
rebuild of unchanged sources take about a second), starts a broker and runs it; the program
exits 0 only when everything matched.
"""
import subprocess

import pytest
from support.batches import assert_idempotent_batches
from support.kafka import go_client_check, run_client_program




@pytest.fixture(scope="module")
def client_check():
    return go_client_check()


def test_admin_produce_consume_every_codec(broker, client_check):
    out = run_client_program(client_check + [broker.bootstrap, "franz-codecs"], broker, 120, "clientcheck")
    assert out.startswith("OK: 1250 records"), out
    # what the broker stored: each codec really used, v2 batches of the idempotent producer
    assert broker.stop() == 0, broker.read_log()
    assert_idempotent_batches(broker.data_dir, "franz-codecs", {"none", "gzip", "snappy", "lz4", "zstd"}, 1250)


def test_consumer_group_share_commit(make_broker, client_check):
    # no initial rebalance delay: the first JoinGroup completes at once
    broker = make_broker(settings={"group.initial.rebalance.delay.ms": "0"}).start()
    out = run_client_program(client_check + ["groups", broker.bootstrap, "franz-groups"], broker, 80,
                             "clientcheck groups")
    assert out.startswith("OK: 600 records consumed exactly once by 3 group members"), out
    assert broker.stop() == 0, broker.read_log()


def test_consumer_group_with_the_consumer_protocol(make_broker, client_check):
    """The same check with KIP-848 (kgo.ServerSideBalancer, which franz-go uses only when the
    broker advertises ConsumerGroupHeartbeat v1): the broker assigns, the members reconcile one
    heartbeat at a time, kadm's DescribeConsumerGroups (ConsumerGroupDescribe) shows each member
    at the assignment epoch with the partitions its client owns."""
    from support.consumer_groups import CONSUMER_PROTOCOL
    broker = make_broker(settings=CONSUMER_PROTOCOL).start()
    out = run_client_program(client_check + ["groups848", broker.bootstrap, "franz-groups848"], broker, 80,
                             "clientcheck groups848")
    assert out.startswith("OK: 600 records consumed exactly once by 3 group members"), out
    assert broker.stop() == 0, broker.read_log()
    with open(broker.log_path, errors="replace") as f:
        joins = f.read().count("joined the consumer group")
    assert joins >= 3, f"{joins} consumer-protocol joins in the broker's log: franz-go used the classic protocol"


def test_sasl_ssl_scram_and_mutual_tls_produce_consume_and_refusal(client_check, tmp_path):
    """franz-go over TLS with SCRAM-SHA-512 (kgo's DialTLSConfig + sasl/scram) and over mutual
    TLS: 100 records written and read back each way; a wrong password is refused
    (SASL_AUTHENTICATION_FAILED) and writes nothing, and so is a certificate from a CA the broker
    does not trust (a TLS alert)."""
    from support.certs import make_certs
    from support.security import ADMIN_PASSWORD, secure_broker
    certs = make_certs(str(tmp_path))
    broker = secure_broker(certs, shards=1)
    try:
        bootstrap = f"127.0.0.1:{broker.sasl_ssl}"
        out = run_client_program(client_check + ["secure", bootstrap, "franz-secure", certs["ca"], "SCRAM-SHA-512",
                                                 "admin", ADMIN_PASSWORD], broker, 90, "clientcheck secure")
        assert out.startswith("OK: 100 records over TLS with SCRAM-SHA-512"), out
        r = subprocess.run(client_check + ["secure", bootstrap, "franz-denied", certs["ca"], "SCRAM-SHA-512",
                                           "admin", "wrong"], capture_output=True, text=True, timeout=90)
        assert r.returncode == 3 and "REFUSED" in r.stdout, (r.returncode, r.stdout, r.stderr)
        assert ADMIN_PASSWORD not in open(broker.log_path).read()
        # mutual TLS on the SSL listener (client certificates required)
        mtls = f"127.0.0.1:{broker.ssl}"
        out = run_client_program(client_check + ["secure", mtls, "franz-mtls", certs["ca"], "MTLS",
                                                 certs["client.crt"], certs["client.key"]], broker, 90, "clientcheck secure")
        assert out.startswith("OK: 100 records over TLS with MTLS"), out
        r = subprocess.run(client_check + ["secure", mtls, "franz-mtls-denied", certs["ca"], "MTLS",
                                           certs["untrusted.crt"], certs["untrusted.key"]],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode == 3 and "REFUSED" in r.stdout, (r.returncode, r.stdout, r.stderr)
    finally:
        broker.cleanup()


def test_group_transact_session_copies_exactly_once(broker, client_check):
    """franz-go's GroupTransactSession: consume-transform-produce with the group's offsets
    committed in each transaction, every fourth transaction aborted (issue 45)."""
    out = run_client_program(client_check + ["txn", broker.bootstrap], broker, 180, "clientcheck txn")
    assert out.startswith("OK: 2000 records copied exactly once"), out
