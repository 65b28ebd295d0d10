#!/usr/bin/env python3
"""What TLS and SASL cost, ringlog and Apache Kafka 4.1.1 side by side, and what ACL checks cost
on ringlog's data path.

  scripts/bench/bench-security.py [--seconds 20] [--rate 20000] [--size 1024] [--runs 3] [--out FILE]
  scripts/bench/bench-security.py --max-throughput [--seconds 60] [--runs 3] [--out FILE]

Each run: a confluent-kafka (librdkafka) producer sends --rate records/s of --size bytes for
--seconds to one partition (acks=all, idempotent, linger.ms=1; latency from each record's scheduled
send time to its acknowledgement), then a consumer reads them all back; the broker's CPU time over
the run is read from /proc. Runs per broker: PLAINTEXT, and SASL_SSL with
SCRAM-SHA-512 (TLS 1.3, the same certificates); on ringlog also PLAINTEXT with the StandardAuthorizer
on (the client allowed by an ACL, not a super user), the ACL-checked data path. Prints, per case,
the medians over --runs of publish p50/p99/p99.9 latency, consume MB/s (bound by the Python
consumer) and broker CPU seconds per GB while producing and while the records are read back (the
fetch path: zero-copy sends on PLAINTEXT, copies into TLS records on SASL_SSL), and writes them as a Markdown table to --out (default
target/bench-security.md).

With --max-throughput the load comes from `ringlog-bench` instead (perf/workloads/max-throughput.yaml:
2 producers, 2 consumers, 4 partitions, 1 KiB records, acks=1, as fast as they go; its Rust
client does TLS with rustls and SCRAM itself, given the same properties file Kafka's tools take):
per broker and listener the medians over --runs (after one uncounted warm-up run) of publish and
consume rates, publish p99.9, and broker and harness CPU seconds per GB; no ACL case.

The broker runs on CPU 1, the clients on CPU 0, as the other benchmarks here.
Single-node contract, stated as the README does: ringlog answers acks=all once the O_DIRECT write
completed; Kafka once the page cache holds the records; neither syncs (no flush settings).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "clients"))
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from support.broker import Broker, free_port_block  # noqa: E402
from support.certs import make_certs  # noqa: E402
from support.kafka import ApacheKafka, kafka_tool  # noqa: E402

PASSWORD = "bench-secret"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def client_conf(bootstrap, protocol, certs):
    conf = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if protocol == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": PASSWORD,
                     "ssl.ca.location": certs["ca"]})
    return conf


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def one_run(conf, pid, topic, a):
    """Produces at a fixed rate (latency from each record's scheduled send time to its
    acknowledgement: no coordinated omission), then reads everything back."""
    records = a.rate * a.seconds
    value = os.urandom(a.size)
    before = cpu_seconds(pid)
    latencies = []
    p = Producer({**conf, "acks": "all", "linger.ms": 1, "enable.idempotence": True})
    p.produce(topic, value, partition=0)  # connect and create the topic before timing
    p.flush(30)
    start = time.perf_counter()
    for i in range(records):
        due = start + i / a.rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            p.poll(min(due - now, 0.001))
        p.produce(topic, value, partition=0,
                  on_delivery=lambda err, m, due=due: latencies.append(
                      (time.perf_counter() - due) * 1000 if err is None else float("inf")))
        p.poll(0)
    if p.flush(60) != 0 or len(latencies) != records:
        raise SystemExit(f"{records - len(latencies)} records not acknowledged")
    latencies.sort()
    if latencies[-1] == float("inf"):
        raise SystemExit("some records failed")
    produced_cpu = cpu_seconds(pid) - before
    c = Consumer({**conf, "group.id": "bench-" + topic, "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, 0, 0)])
    got, first = 0, None
    deadline = time.time() + 120
    while got < records + 1 and time.time() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                first = first or time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - first
    c.close()
    cpu = cpu_seconds(pid) - before
    gb = records * a.size / 1e9
    return {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99),
            "p999": percentile(latencies, 0.999), "consume_mb_s": got * a.size / 1e6 / elapsed,
            "produce_cpu_s_per_gb": produced_cpu / gb, "fetch_cpu_s_per_gb": (cpu - produced_cpu) / gb}


def cases_for(name, bootstrap_of, pid, certs, a):
    out = {}
    for protocol, bootstrap in bootstrap_of.items():
        conf = client_conf(bootstrap, "PLAINTEXT" if protocol.startswith("PLAINTEXT") else protocol, certs)
        runs = [one_run(conf, pid, f"bench-{protocol.lower()}-{i}", a) for i in range(a.runs)]
        out[protocol] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(name, protocol, out[protocol], flush=True)
    return out


def sasl_ssl_properties(path, user, certs):
    """A Kafka client properties file: SASL_SSL, SCRAM-SHA-512 as `user`, the test CA trusted."""
    with open(path, "w") as f:
        f.write("\n".join([
            "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{PASSWORD}";',
            "ssl.truststore.type=PEM", f"ssl.truststore.location={certs['ca']}", ""]))
    return path


def bench_cases(name, bootstrap_of, pid, certs, a):
    """ringlog-bench's max-throughput workload against each listener."""
    props = sasl_ssl_properties(os.path.join(os.path.dirname(certs["ca"]), "bench-client.properties"), "bench", certs)
    bench = os.path.join(REPO, "target", "release", "ringlog-bench")
    out = {}
    for protocol, bootstrap in bootstrap_of.items():
        runs = []
        # one run first that is not counted: the JVM's JIT (and ringlog's caches) warm on it
        for i in range(-1, a.runs):
            result_file = os.path.join(os.path.dirname(certs["ca"]), f"{name}-{protocol}-{i}.json")
            cmd = [bench, "run", "--bootstrap", bootstrap, "--workload",
                   os.path.join(REPO, "perf", "workloads", "max-throughput.yaml"), "--out", result_file,
                   "--target", name, "--broker-pid", str(pid),
                   "--duration-minutes", str(a.seconds / 60), "--warmup-minutes", "0.1"]
            if protocol == "SASL_SSL":
                cmd += ["--command-config", props]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(r.stdout + r.stderr)
            res = json.load(open(result_file))
            if res["errors"]:
                # retried by the harness (e.g. NOT_LEADER_OR_FOLLOWER while a new topic's leaders
                # settle); counted in the table
                print(name, protocol, f"run {i}: {res['errors']} errors: {res.get('errorKinds')}", flush=True)
            # each run writes several GB: its topics go before the next (the disk is finite)
            admin = AdminClient({"bootstrap.servers": bootstrap_of["PLAINTEXT"]})
            names = [t for t in admin.list_topics(timeout=10).topics if t.startswith("max-throughput")]
            for f in admin.delete_topics(names).values():
                f.result(timeout=60)
            if i < 0:
                continue
            runs.append({"publish": statistics.mean(res["publishRate"]),
                         "consume": statistics.mean(res["consumeRate"]),
                         "p999": res["aggregatedPublishLatency999pct"],
                         "broker_cpu": res["brokerCpuSecondsPerGB"],
                         "harness_cpu": res["harnessCpuSecondsPerGB"], "errors": res["errors"]})
        out[protocol] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(name, protocol, out[protocol], flush=True)
    return out


def add_user(bootstrap):
    r = kafka_tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--alter", "--add-config",
                   f"'SCRAM-SHA-512=[iterations=4096,password={PASSWORD}]'", "--entity-type", "users",
                   "--entity-name", "bench")
    if r.returncode != 0:
        raise SystemExit(r.stdout + r.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--rate", type=int, default=20000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default=os.path.join(REPO, "target", "bench-security.md"))
    p.add_argument("--max-throughput", action="store_true",
                   help="ringlog-bench's max-throughput workload instead of the fixed-rate one")
    a = p.parse_args()
    measure = bench_cases if a.max_throughput else cases_for
    # the clients (this process, and the Java tools it runs) on CPU 0, the brokers on CPU 1
    os.sched_setaffinity(0, {0})
    tmp = tempfile.mkdtemp(prefix="bench-security-", dir=os.path.join(REPO, "target"))
    certs = make_certs(tmp)
    results = {}

    # ringlog: PLAINTEXT and SASL_SSL, then the same with the authorizer on
    for authorizer in (False,) if a.max_throughput else (False, True):
        sasl_port = free_port_block(1)
        b = Broker(shards=1)
        while abs(sasl_port - b.port) < 1:
            sasl_port = free_port_block(1)
        b.extra_ports = [sasl_port]
        b.command_prefix = ["taskset", "-c", "1"]
        b.settings.update({
            "listeners": f"SASL_SSL://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{b.port}",
            "ssl.keystore.location": certs["broker.pem"], "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "num.partitions": "1"})
        if authorizer:
            b.settings.update({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                               "super.users": "User:admin"})
            b.serve_args = ["--add-scram", f"SCRAM-SHA-512=[name=admin,password={PASSWORD}]"]
        b.start()
        try:
            if authorizer:
                # the bench client is not a super user: an ACL lets ANONYMOUS (PLAINTEXT) write,
                # read and create the bench topics and use any group
                admin_props = sasl_ssl_properties(os.path.join(tmp, "admin.properties"), "admin", certs)
                for acl in (["--topic", "bench-", "--resource-pattern-type", "prefixed", "--operation", "All"],
                            ["--group", "'*'", "--operation", "All"]):  # quoted: kafka_tool runs bash
                    r = kafka_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", f"127.0.0.1:{sasl_port}",
                                   "--command-config", admin_props, "--add", "--force",
                                   "--allow-principal", "User:ANONYMOUS", *acl)
                    if r.returncode != 0:
                        raise SystemExit(r.stdout + r.stderr)
                results[("ringlog", "PLAINTEXT, ACLs checked")] = cases_for(
                    "ringlog-acl", {"PLAINTEXT-acl": b.bootstrap}, b.proc.pid, certs, a)["PLAINTEXT-acl"]
            else:
                add_user(b.bootstrap)
                for k, v in measure("ringlog", {"PLAINTEXT": b.bootstrap, "SASL_SSL": f"127.0.0.1:{sasl_port}"},
                                    b.proc.pid, certs, a).items():
                    results[("ringlog", k)] = v
        finally:
            b.cleanup()

    kafka = ApacheKafka("\n".join([
        "listeners=PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{extra_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{extra_port}",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={certs['broker.pem']}",
    ]), prefix="kafka-bench-security-")
    try:
        subprocess.run(["taskset", "-c", "1", os.path.join(REPO, "scripts", "kafka", "kafka-start.sh")], env=kafka.env,
                       check=True, capture_output=True, timeout=180)
        pid = int(open(os.path.join(kafka.dir, "kafka.pid")).read())
        add_user(kafka.bootstrap)
        for k, v in measure("kafka", {"PLAINTEXT": kafka.bootstrap, "SASL_SSL": f"127.0.0.1:{kafka.extra_port}"},
                            pid, certs, a).items():
            results[("Apache Kafka 4.1.1", k)] = v
    finally:
        kafka.stop()

    if a.max_throughput:
        rows = [f"ringlog-bench, perf/workloads/max-throughput.yaml for {a.seconds} s; medians of {a.runs} runs "
                "(`scripts/bench/bench-security.py --max-throughput`)", "",
                "| broker | listener | publish msg/s | consume msg/s | publish p99.9 ms | broker CPU-s/GB | harness CPU-s/GB | retried errors |",
                "|---|---|---|---|---|---|---|---|"]
        for (broker, case), r in results.items():
            rows.append(f"| {broker} | {case} | {r['publish']:.0f} | {r['consume']:.0f} | {r['p999']:.1f} | "
                        f"{r['broker_cpu']:.2f} | {r['harness_cpu']:.2f} | {r['errors']:.0f} |")
    else:
        rows = [f"{a.rate} records/s of {a.size} B for {a.seconds} s, acks=all, one partition; medians of {a.runs} runs "
                "(`scripts/bench/bench-security.py`)", "",
                "| broker | listener | publish p50 ms | p99 ms | p99.9 ms | consume MB/s | broker CPU-s/GB producing | reading |",
                "|---|---|---|---|---|---|---|---|"]
        for (broker, case), r in results.items():
            rows.append(f"| {broker} | {case} | {r['p50']:.1f} | {r['p99']:.1f} | {r['p999']:.1f} | "
                        f"{r['consume_mb_s']:.0f} | {r['produce_cpu_s_per_gb']:.2f} | {r['fetch_cpu_s_per_gb']:.2f} |")
    table = "\n".join(rows)
    print(table)
    with open(a.out, "w") as f:
        f.write(table + "\n")


if __name__ == "__main__":
    main()
