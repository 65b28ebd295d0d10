"""The Apache Kafka Java client (kafka-clients 4.1.1) against a real ringlog node.

The checks live in tests/clients/java (a small Maven project, ClientCheck.java: admin, an
idempotent producer per codec, an assign()+seekToBeginning() consumer verifying every field;
GroupCheck.java, run as `ClientCheck groups`, checks consumer groups: three subscribe()d
consumers sharing a topic with commitSync, the committed offsets and the group through the Admin
API, and a static member rejoining with the same group.instance.id); MigrationCheck.java, run as
`ClientCheck migrate`, rolls a group from classic to the consumer protocol (KIP-848) and back while
records flow, judging ownership on one clock. This wrapper builds it with
Maven when its jar is missing or older than its sources (output in tests/clients/java/target/,
git-ignored), starts a broker and runs it; the program exits 0 only when everything matched.
"""
import pytest
from support.batches import assert_idempotent_batches
from support.kafka import java_client_check, run_client_program


@pytest.fixture(scope="module")
def client_check():
    return java_client_check()


def test_admin_produce_consume_every_codec(broker, client_check):
    out = run_client_program(client_check + [broker.bootstrap, "java-codecs"], broker, 120, "ClientCheck")
    assert out.startswith("OK: 1250 records"), out
    # what the broker stored: each codec really used, v2 batches of the idempotent producer
    assert broker.stop() == 0, broker.read_log()
    assert_idempotent_batches(broker.data_dir, "java-codecs", {"none", "gzip", "snappy", "lz4", "zstd"}, 1250)


def test_consumer_group_share_commit_static_rejoin(make_broker, client_check):
    # no initial rebalance delay: the first JoinGroup of each group completes at once
    broker = make_broker(settings={"group.initial.rebalance.delay.ms": "0"}).start()
    out = run_client_program(client_check + ["groups", broker.bootstrap, "java-groups"], broker, 80,
                             "ClientCheck groups")
    assert out.startswith("OK: 600 records consumed exactly once by 3 members"), out
    assert broker.stop() == 0, broker.read_log()


def test_a_group_migrates_between_classic_and_consumer_protocols(make_broker, client_check):
    from support.consumer_groups import CONSUMER_PROTOCOL
    broker = make_broker(shards=2, settings={**CONSUMER_PROTOCOL, "group.initial.rebalance.delay.ms": "0"}).start()
    out = run_client_program(client_check + ["migrate", broker.bootstrap, "java-migrate"], broker, 240,
                             "ClientCheck migrate")
    assert out.startswith("OK: ") and "classic -> consumer -> classic" in out, out
    assert int(out.split()[1]) > 100, out
    log = broker.read_log()
    assert "classic group upgraded to a consumer group" in log and "consumer group turned classic" in log
