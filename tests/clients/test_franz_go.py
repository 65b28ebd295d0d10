"""franz-go (kgo + kadm) against a real ringlog node.

The checks live in tests/clients/go (main.go: kadm topic admin, an idempotent kgo producer per
codec, a kgo.ConsumePartitions consumer from the start verifying every field; groups.go, run as
`clientcheck groups`, checks consumer groups: three kgo.ConsumerGroup members joining one at a
time and sharing a topic, commits, and the group and its offsets through kadm). This wrapper
builds it with `go build` into tests/clients/go/bin/ (git-ignored; the Go build cache makes a
rebuild of unchanged sources take about a second), starts a broker and runs it; the program
exits 0 only when everything matched.
"""
import os
import shutil
import subprocess

import pytest
from stored_batches import stored_batches

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(HERE, "go")
BIN = os.path.join(MODULE, "bin", "clientcheck")



@pytest.fixture(scope="module")
def client_check():
    assert shutil.which("go"), "the go toolchain (1.26+, see go/go.mod) is needed on PATH"
    # -mod=readonly: go.mod/go.sum are committed as they are; the build must not rewrite them
    r = subprocess.run(["go", "build", "-mod=readonly", "-o", BIN, "."], cwd=MODULE,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"go build failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return [BIN]


def test_admin_produce_consume_every_codec(broker, client_check):
    try:
        r = subprocess.run(client_check + [broker.bootstrap, "franz-codecs"], capture_output=True, text=True,
                           timeout=120)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"clientcheck timed out:\n{e.stdout}\n{e.stderr}\n--- broker log ---\n{broker.read_log()}")
    assert r.returncode == 0, (f"clientcheck exited {r.returncode}\n--- stdout ---\n{r.stdout}\n"
                               f"--- stderr ---\n{r.stderr}\n--- broker log ---\n{broker.read_log()}")
    assert r.stdout.startswith("OK: 1250 records"), r.stdout
    # what the broker stored: each codec really used, v2 batches of the idempotent producer
    assert broker.stop() == 0, broker.read_log()
    batches = stored_batches(broker.data_dir, "franz-codecs")
    assert {b["codec"] for b in batches} == {"none", "gzip", "snappy", "lz4", "zstd"}, batches
    assert all(b["magic"] == 2 and b["producer_id"] >= 0 for b in batches), batches
    assert sum(b["records"] for b in batches) == 1250


def test_consumer_group_share_commit(make_broker, client_check):
    # no initial rebalance delay: the first JoinGroup completes at once
    broker = make_broker(settings={"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        r = subprocess.run(client_check + ["groups", broker.bootstrap, "franz-groups"], capture_output=True,
                           text=True, timeout=80)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"clientcheck groups timed out:\n{e.stdout}\n{e.stderr}\n--- broker log ---\n{broker.read_log()}")
    assert r.returncode == 0, (f"clientcheck groups exited {r.returncode}\n--- stdout ---\n{r.stdout}\n"
                               f"--- stderr ---\n{r.stderr}\n--- broker log ---\n{broker.read_log()}")
    assert r.stdout.startswith("OK: 600 records consumed exactly once by 3 group members"), r.stdout
    assert broker.stop() == 0, broker.read_log()
