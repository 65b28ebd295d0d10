"""The Prometheus endpoint (`metrics.listen`): scraped by a real Prometheus (Debian's
`prometheus` package), its text checked by `promtool check metrics`, and its figures compared
with what real clients did (records produced per partition, offsets a group committed)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker import REPO, Broker, free_port_block
from support.metrics import http, parse, scrape, values
from support.waiting import wait_for

TOPIC = "metered"
SYNCED = "metered-synced"
GROUP = "metered-group"


def one(samples, name, **labels):
    found = values(samples, name, **labels)
    assert len(found) == 1, f"{name} {labels}: {found}"
    return found[0][1]


def produce(bootstrap, counts):
    """Produces counts[p] records to partition p of TOPIC, acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part, n in enumerate(counts):
        for i in range(n):
            p.produce(TOPIC, key=f"k{i}".encode(), value=b"v" * 100, partition=part)
    assert p.flush(30) == 0


def produce_synced(bootstrap, n):
    """Produces n records of 1 000 bytes to SYNCED one at a time, each acknowledged before the
    next: each waits for an fdatasync (flush.messages=1), and every few roll a segment."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(SYNCED, value=b"s" * 1000)
        assert p.flush(30) == 0


def commit(bootstrap, offsets):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in enumerate(offsets)], asynchronous=False)
    finally:
        c.close()


def promtool_check(text):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), \
        f"promtool check metrics: rc {r.returncode}\n{r.stdout}\n{r.stderr}"


class Prometheus:
    """A real Prometheus scraping one target every second."""

    def __init__(self, target):
        self.dir = tempfile.mkdtemp(prefix="prometheus-", dir=os.path.join(REPO, "target"))
        self.port = free_port_block(1)
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: ringlog\n    static_configs:\n"
                    f"      - targets: ['{target}']\n")
        self.log = open(os.path.join(self.dir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=self.log)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        status, body = http("GET", url)
        assert status == 200, body
        return json.loads(body)["data"]

    def wait_until(self, what, check, timeout=60):
        """Waits until `check()` returns True itself (any other value is only shown as the last
        one seen), while Prometheus runs; its API not answering yet counts as not yet."""
        last = None

        def attempt():
            nonlocal last
            assert self.proc.poll() is None, f"prometheus exited:\n{self.read_log()}"
            try:
                last = check()
            except (urllib.error.URLError, ConnectionError, socket.timeout) as e:
                last = e
            return last is True

        wait_for(lambda: f"prometheus: {what} (last: {last})\n{self.read_log()}", attempt, timeout, interval=0.5)

    def query(self, expr):
        """{labels-as-tuple: value} of an instant query."""
        data = self.api("query", query=expr)
        return {tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("job", "instance", "__name__"))):
                float(r["value"][1]) for r in data["result"]}

    def read_log(self):
        with open(os.path.join(self.dir, "prometheus.log"), "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def lag_by_partition(prom):
    got = prom.query(f'ringlog_consumer_group_lag{{group="{GROUP}",topic="{TOPIC}"}}')
    return {dict(k)["partition"]: v for k, v in got.items()}


def test_prometheus_scrapes_what_the_clients_did():
    metrics_port = free_port_block(1)
    b = Broker(shards=2, settings={"metrics.listen": f"127.0.0.1:{metrics_port}"}).start()
    prom = None
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])[TOPIC].result(30)
        synced = NewTopic(SYNCED, num_partitions=1, replication_factor=1,
                          config={"flush.messages": "1", "segment.bytes": "4096"})
        admin.create_topics([synced])[SYNCED].result(30)
        produce(b.bootstrap, [100, 100, 100])
        produce_synced(b.bootstrap, 10)
        commit(b.bootstrap, [40, 70, 100])

        text = scrape(metrics_port)
        promtool_check(text)
        s = parse(text)
        assert [v for _, v in values(s, "ringlog_shard_up")] == [1.0, 1.0], values(s, "ringlog_shard_up")
        for p, committed, lag in [(0, 40, 60), (1, 70, 30), (2, 100, 0)]:
            part = {"topic": TOPIC, "partition": str(p)}
            assert one(s, "ringlog_partition_log_end_offset", **part) == 100
            assert one(s, "ringlog_partition_high_watermark", **part) == 100
            assert one(s, "ringlog_partition_log_start_offset", **part) == 0
            assert one(s, "ringlog_partition_size_bytes", **part) > 100 * 100
            assert one(s, "ringlog_partition_leader", **part) == 1
            assert one(s, "ringlog_consumer_group_committed_offset", group=GROUP, **part) == committed
            assert one(s, "ringlog_consumer_group_lag", group=GROUP, **part) == lag
        assert one(s, "ringlog_consumer_group_members", group=GROUP) == 0
        assert one(s, "ringlog_consumer_group_state", group=GROUP, state="Empty") == 1
        # Every request counted once per API, its latency summary counting the same requests.
        produces = values(s, "ringlog_requests_total", request="Produce")
        assert sum(v for _, v in produces) >= 3, produces
        for labels, count in produces:
            assert one(s, "ringlog_request_latency_seconds_count", **labels) == count
            assert one(s, "ringlog_request_latency_seconds_sum", **labels) > 0
            p99 = one(s, "ringlog_request_latency_seconds", quantile="0.99", **labels)
            assert 0 < p99 < 30, p99
        assert sum(v for _, v in values(s, "ringlog_requests_total", request="OffsetCommit")) >= 1
        received = sum(v for _, v in values(s, "ringlog_network_received_bytes_total"))
        assert received > 300 * 100, received
        assert sum(v for _, v in values(s, "ringlog_network_sent_bytes_total")) > 0
        assert sum(v for _, v in values(s, "ringlog_connections_accepted_total")) >= 3
        # Quiet partitions' appends go through the page cache; busy ones' through io_uring.
        assert values(s, "ringlog_io_uring_file_writes_total"), "io_uring writes reported"
        assert sum(v for _, v in values(s, "ringlog_page_cache_file_writes_total")) >= 3
        assert sum(v for _, v in values(s, "ringlog_page_cache_file_written_bytes_total")) > 100 * 100
        assert len(values(s, "ringlog_read_cache_page_cache_reads_total")) == 2, "one per shard"
        assert len(values(s, "ringlog_read_cache_read_ahead_evicted_unread_total")) == 2
        # Where each shard's time went, how late a due task ran, how long the writes took.
        queues = values(s, "ringlog_shard_task_queue_busy_seconds_total")
        assert {l["queue"] for l, _ in queues} == {"requests", "maintenance", "stall-probe", "log-cleaner"}, queues
        assert sum(v for l, v in queues if l["queue"] == "requests") > 0, queues
        for shard in ("0", "1"):
            assert one(s, "ringlog_shard_stall_probe_lateness_seconds", shard=shard, quantile="0.5") >= 0
            stalls = values(s, "ringlog_shard_stalls_total", shard=shard)
            assert sorted(l["longer_than"] for l, _ in stalls) == ["0.001", "0.005", "0.02"], stalls
        assert sum(v for _, v in values(s, "ringlog_log_data_writes_total")) >= 3
        assert sum(v for _, v in values(s, "ringlog_log_data_write_seconds_total")) > 0
        assert len(values(s, "ringlog_log_slow_data_writes_total")) == 6, "three lengths, two shards"
        # Each synced produce waited for an fdatasync; its rolls' seals are counted apart.
        assert sum(v for _, v in values(s, "ringlog_log_syncs_total")) >= 10
        assert sum(v for _, v in values(s, "ringlog_log_sync_seconds_total")) > 0
        assert len(values(s, "ringlog_log_slow_syncs_total")) == 6, "three lengths, two shards"
        assert sum(v for _, v in values(s, "ringlog_log_seals_total")) >= 1
        assert max(v for _, v in values(s, "ringlog_log_seal_longest_seconds")) > 0
        assert one(s, "ringlog_request_budget_bytes") == 512 << 20
        assert one(s, "process_resident_memory_bytes") > 0
        assert sum(v for _, v in values(s, "ringlog_leader_partitions")) == 3 + 1 + 50  # and SYNCED, __consumer_offsets

        # A real Prometheus scrapes the endpoint and sees the same figures, and new ones as
        # clients go on.
        prom = Prometheus(f"127.0.0.1:{metrics_port}")
        prom.wait_until("the target up", lambda: [t["health"] for t in prom.api("targets")["activeTargets"]] == ["up"] or
                        prom.api("targets")["activeTargets"])
        prom.wait_until("lag 60/30/0", lambda: lag_by_partition(prom) == {"0": 60, "1": 30, "2": 0} or lag_by_partition(prom))
        total = prom.query(f'sum(ringlog_partition_log_end_offset{{topic="{TOPIC}"}})')
        assert total == {(): 300.0}, total
        produce(b.bootstrap, [30, 0, 0])
        prom.wait_until("lag 90 on partition 0", lambda: lag_by_partition(prom).get("0") == 90 or lag_by_partition(prom))
        rate = prom.query('sum(ringlog_requests_total{request="Produce"})')
        assert rate and list(rate.values())[0] >= 4, rate

        # Bad requests to the endpoint get HTTP errors; the endpoint and the broker go on.
        assert http("GET", f"http://127.0.0.1:{metrics_port}/nowhere")[0] == 404
        assert http("POST", f"http://127.0.0.1:{metrics_port}/metrics", data=b"x")[0] == 405
        with socket.create_connection(("127.0.0.1", metrics_port), timeout=10) as c:
            c.sendall(b"\x16\x03\x01\x00garbage\r\n\r\n")
            assert c.recv(100).startswith(b"HTTP/1.1 400"), "garbage gets 400"
        promtool_check(scrape(metrics_port))
        assert admin.list_topics(timeout=10).topics[TOPIC].partitions.keys() == {0, 1, 2}
    finally:
        if prom:
            prom.stop()
        b.cleanup()


def test_a_metrics_port_in_use_stops_the_start_with_its_address():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        b = Broker(shards=1, settings={"metrics.listen": f"127.0.0.1:{port}"})
        try:
            try:
                b.start(timeout=15)
                raise AssertionError("the broker started with its metrics port taken")
            except RuntimeError as e:
                assert f"metrics.listen 127.0.0.1:{port}: cannot listen" in str(e), str(e)
        finally:
            b.cleanup()


def test_a_bad_metrics_address_is_refused_with_its_value():
    b = Broker(shards=1, settings={"metrics.listen": "127.0.0.1:http"})
    try:
        try:
            b.start(timeout=15)
            raise AssertionError("the broker started with metrics.listen=127.0.0.1:http")
        except RuntimeError as e:
            assert "metrics.listen" in str(e) and "127.0.0.1:http" in str(e), str(e)
    finally:
        b.cleanup()


def test_a_paused_broker_shows_as_a_stall_of_its_shard():
    """The stall probe sees time a shard could not run: the process stopped for 300 ms (SIGSTOP,
    as a vCPU not scheduled or a long blocking call would hold it) is one probe run at least
    20 ms late, and the longest stall covers the pause."""
    metrics_port = free_port_block(1)
    b = Broker(shards=1, settings={"metrics.listen": f"127.0.0.1:{metrics_port}"}).start()
    try:
        before = parse(scrape(metrics_port))
        stalled = one(before, "ringlog_shard_stalls_total", shard="0", longer_than="0.02")
        os.kill(b.proc.pid, signal.SIGSTOP)
        time.sleep(0.3)
        os.kill(b.proc.pid, signal.SIGCONT)
        deadline = time.time() + 10
        while True:
            after = parse(scrape(metrics_port))
            if one(after, "ringlog_shard_stalls_total", shard="0", longer_than="0.02") > stalled or time.time() > deadline:
                break
            time.sleep(0.05)
        assert one(after, "ringlog_shard_stalls_total", shard="0", longer_than="0.02") >= stalled + 1
        assert one(after, "ringlog_shard_stall_longest_seconds", shard="0") >= 0.25
    finally:
        b.cleanup()
