"""The Apache Kafka Java client (kafka-clients 4.1.1) against a real ringlog node.

The checks live in tests/clients/java (a small Maven project, ClientCheck.java: admin, an
idempotent producer per codec, an assign()+seekToBeginning() consumer verifying every field;
GroupCheck.java, run as `ClientCheck groups`, checks consumer groups: three subscribe()d
consumers sharing a topic with commitSync, the committed offsets and the group through the Admin
API, and a static member rejoining with the same group.instance.id). This wrapper builds it with
Maven when its jar is missing or older than its sources (output in tests/clients/java/target/,
git-ignored), starts a broker and runs it; the program exits 0 only when everything matched.
"""
import os
import shutil
import subprocess

import pytest
from conftest import run_client_program
from stored_batches import assert_idempotent_batches

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.join(HERE, "java")
JAR = os.path.join(PROJECT, "target", "client-check.jar")
LIB = os.path.join(PROJECT, "target", "lib")



def newest_source_mtime():
    paths = [os.path.join(PROJECT, "pom.xml")]
    for root, _dirs, files in os.walk(os.path.join(PROJECT, "src")):
        paths += [os.path.join(root, f) for f in files]
    return max(os.path.getmtime(p) for p in paths)


@pytest.fixture(scope="module")
def client_check():
    assert shutil.which("java") and shutil.which("mvn"), "java and mvn needed: scripts/install-deps.sh installs them"
    fresh = os.path.exists(JAR) and os.path.isdir(LIB) and os.path.getmtime(JAR) >= newest_source_mtime()
    if not fresh:
        r = subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "package"], cwd=PROJECT,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"mvn package failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        os.utime(JAR)  # mvn keeps an unchanged jar's old mtime
    classpath = os.pathsep.join([JAR] + sorted(os.path.join(LIB, f) for f in os.listdir(LIB) if f.endswith(".jar")))
    return ["java", "-cp", classpath, "ringlog.clientcheck.ClientCheck"]


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
