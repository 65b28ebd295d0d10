"""`ringlog topic ...` admin commands and `ringlog serve` argument errors."""
import subprocess

from support.broker import BINARY


def ringlog(*args):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=30)


def test_topic_create_list_describe_delete(broker):
    b = ["topic", "--bootstrap-server", broker.bootstrap]
    r = ringlog(*b, "create", "orders", "--partitions", "3", "--config", "retention.ms=3600000")
    assert r.returncode == 0 and "Created topic orders" in r.stdout, r.stderr
    r = ringlog(*b, "create", "orders")
    assert r.returncode == 1 and "TopicAlreadyExists" in r.stderr
    r = ringlog(*b, "create", "bad", "--config", "no.such=1")
    assert r.returncode == 1 and "InvalidConfig" in r.stderr and "no.such" in r.stderr
    assert ringlog(*b, "list").stdout.split() == ["orders"]
    r = ringlog(*b, "describe", "orders")
    assert "PartitionCount: 3" in r.stdout and "retention.ms=3600000" in r.stdout, r.stdout
    assert r.stdout.count("Partition: ") == 3
    assert ringlog(*b, "delete", "orders").returncode == 0
    assert ringlog(*b, "list").stdout.split() == []
    r = ringlog(*b, "describe", "orders")
    assert r.returncode == 1 and "UnknownTopicOrPartition" in r.stderr


def test_serve_rejects_bad_arguments_with_the_offending_value(tmp_path):
    r = ringlog("serve", "--data-dir", str(tmp_path), "--shards", "0")
    assert r.returncode == 2 and "--shards" in r.stderr
    r = ringlog("serve", "--data-dir", str(tmp_path), "--set", "log.segment.bytes=abc")
    assert r.returncode == 2 and "log.segment.bytes" in r.stderr and "abc" in r.stderr
    r = ringlog("serve", "--data-dir", str(tmp_path), "--set", "no.such.property=1")
    assert r.returncode == 2 and "no.such.property" in r.stderr
    cfg = tmp_path / "bad.toml"
    cfg.write_text('"listeners" = "nonsense"\n')
    r = ringlog("serve", "--config", str(cfg))
    assert r.returncode == 2 and "listeners" in r.stderr and "nonsense" in r.stderr
