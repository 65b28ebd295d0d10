#!/usr/bin/env python3
"""Replica reassignment under production traffic, ringlog vs Apache Kafka 4.1.1, both as 3-node
clusters on loopback growing to 4, driven by Kafka's own reassignment tool
(org.apache.kafka.tools.reassign.ReassignPartitionsCommand, i.e. kafka-reassign-partitions).

Contract, the same for both: topics with replication factor 3 and min.insync.replicas=2,
producers with acks=all, each broker at its default flush settings (no fsync per message: Kafka
leaves flushing to the OS, ringlog to its own default), one shard per ringlog node.

Per target (ROUNDS rounds, the targets alternating):
1. a 3-node cluster; topic `moving` (PARTITIONS partitions) filled with DATA_MB MiB of 1 KiB
   records as fast as one producer goes (acks=all, linger.ms=5, batch.size 1 MiB, no
   compression); topic `live` (3 partitions);
2. production traffic: an idempotent acks=all producer (own process, linger.ms=1) writes 1 KiB
   records to `live` at RATE msg/s for the whole run; each message's latency is the time from
   produce() to its delivery callback;
3. after 1 + BASELINE (10) s of baseline, node 4 joins (ringlog `scripts/cluster.sh up 4 1`, Kafka a broker-only
   node, `scripts/kafka/kafka-cluster.sh add 4`) and is waited for in the metadata;
4. every partition p of `moving` hands its replica on node (p % 3) + 1 to node 4: the tool's
   --execute (with --throttle THROTTLE bytes/s unless THROTTLE is 0/unset), then metadata polled
   every 0.5 s until every partition has exactly its target replicas, all in the ISR; then one
   --verify (which clears the throttles) must report every partition complete;
5. 5 s more traffic after --verify, then the cluster is torn down.

Move time = from the move's start to the first poll that sees it done (so +-0.5 s: a move of
seconds needs DATA_MB in the hundreds). The start is the first metadata poll (every 0.1 s while
the tool runs) listing node 4 among the replicas, or the tool's exit if that comes first: the
tool's JVM start-up (seconds here) is not counted. Bytes moved = the payload of `moving`
(DATA_MB MiB: each partition copies its log once to node 4). Latency windows, by send time:
baseline = the BASELINE s from 1 s after the first acknowledgement (connection and producer id set-up
excluded) to node 4's start; move = the move's start to done; after = from the end of --verify
(a JVM start-up on the same two cores) to the end, in the JSON only, as is a per-second series.
Failed = delivery errors plus messages still undelivered 60 s after the traffic stops.

Once per run (DEVICE_BW=0 skips it): fio's sequential O_DIRECT write bandwidth (1 MiB blocks,
4 in flight, a fresh 4 GiB file under target/, at most 8 s), to set the move's MiB/s against the
device's. (scripts/bench/device-floor.sh measures write latency at a fixed 10 MB/s, not
bandwidth; bench-raw-device.sh measures it among a minute of other runs.)

    scripts/bench/reassign-bench.sh [OUT_DIR]      (default target/reassign-bench)

Env: DATA_MB (1024), PARTITIONS (6), RATE (2000), THROTTLE (unset: none), ROUNDS (1),
REASSIGN_TARGETS ("ringlog kafka"), MOVE_TIMEOUT (s, 3600), DEVICE_BW (1), BASELINE (s, 10: a
longer one lets Kafka's freshly started JVMs warm up), KEEP_LOGS (1: copy every node's logs to
OUT_DIR/logs-TARGET-ROUND; on a failure they are always kept, in OUT_DIR/logs-TARGET).
Prints one Markdown table (also OUT_DIR/reassign.md) and writes OUT_DIR/reassign.json (settings,
device figure, per target and round every timestamp, the windows' percentiles, a per-second
latency series, the tool's output). Nothing is pinned: 2 cores are shared by every process of
the run (brokers, clients, the tools' JVMs).
"""
import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import statistics
import sys
import tempfile
import time

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
MOVING, LIVE = "moving", "live"
NEW_NODE = 4
AFTER_S, WARMUP_S = 5, 1
VALUE = b"r" * 1024


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


SETTINGS = {
    "DATA_MB": env_int("DATA_MB", 1024),
    "PARTITIONS": env_int("PARTITIONS", 6),
    "RATE": env_int("RATE", 2000),
    "THROTTLE": env_int("THROTTLE", 0),
    "ROUNDS": env_int("ROUNDS", 1),
    "BASELINE": env_int("BASELINE", 10),
}
MOVE_TIMEOUT = env_int("MOVE_TIMEOUT", 3600)
BASELINE_S = SETTINGS["BASELINE"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Target:
    """A loopback cluster driven through its script (scripts/cluster.sh or kafka-cluster.sh)."""

    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(REPO, "target", f"reassign-{name}")

    def script(self, *args, timeout=900):
        env = dict(os.environ)
        if self.name == "ringlog":
            env["RINGLOG_CLUSTER_DIR"] = self.dir
            cmd = [os.path.join(REPO, "scripts", "cluster.sh"), *args]
        else:
            env["KAFKA_CLUSTER_DIR"] = self.dir
            cmd = [os.path.join(REPO, "scripts", "kafka", "kafka-cluster.sh"), *args]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
        return r.stdout

    def broker(self, node):
        return node * 1000 if self.name == "ringlog" else node

    def bootstrap(self, nodes):
        base = (lambda i: 19000 + 100 * i) if self.name == "ringlog" else (lambda i: 29192 + 10 * (i - 1))
        return ",".join(f"127.0.0.1:{base(i)}" for i in nodes)

    def up(self):
        self.script("up", "3", "1") if self.name == "ringlog" else self.script("up", "3")
        return self.bootstrap((1, 2, 3))

    def add(self, node):
        # cluster.sh `up 4` starts only the nodes not running (node 4) and waits until every
        # node lists 4 nodes; kafka-cluster.sh `add 4` until broker 4 is registered, unfenced.
        self.script("up", str(node), "1") if self.name == "ringlog" else self.script("add", str(node))
        return self.bootstrap(range(1, node + 1))

    def down(self):
        # A client of the last cluster left connected refreshes its topics' metadata against
        # the next one on the same ports, and Kafka creates them there (auto.create.topics.enable):
        # `moving` with one partition before this run's CreateTopics.
        for nodes in (range(1, 4), range(1, NEW_NODE + 1)):
            _ADMINS.pop(self.bootstrap(nodes), None)
        try:
            self.script("down", timeout=300)
        except Exception as e:  # noqa: BLE001 - the run's own error matters more
            log(f"{self.name}: down failed: {e}")

    def log_files(self):
        """Every node's log files (ringlog node-I.log; Kafka kafka.out and server.log)."""
        if not os.path.isdir(self.dir):
            return []
        if self.name == "ringlog":
            return [os.path.join(self.dir, f) for f in sorted(os.listdir(self.dir))
                    if f.startswith("node-") and f.endswith(".log")]
        files = []
        for d in sorted(os.listdir(self.dir)):
            files += [os.path.join(self.dir, d, "kafka.out"), os.path.join(self.dir, d, "logs-app", "server.log")]
        return [f for f in files if os.path.exists(f)]

    def logs_tail(self, lines=25):
        out = []
        for f in self.log_files():
            with open(f, errors="replace") as fh:
                out.append(f"--- {f} (last {lines} lines)\n" + "".join(fh.readlines()[-lines:]))
        return "\n".join(out)

    def keep_logs(self, dest):
        """Copies the log files to dest (the cluster's folder goes with `down`)."""
        for f in self.log_files():
            rel = os.path.relpath(f, self.dir).replace(os.sep, "_")
            os.makedirs(dest, exist_ok=True)
            shutil.copy(f, os.path.join(dest, rel))


@contextlib.contextmanager
def step(target, what, out_dir):
    """Names the step in a failure, with the nodes' log tails; their logs kept in out_dir."""
    log(f"{target.name}: {what}")
    try:
        yield
    except Exception as e:
        kept = os.path.join(out_dir, f"logs-{target.name}")
        target.keep_logs(kept)
        raise RuntimeError(f"{target.name}: step '{what}' failed: {e}\n\n{target.logs_tail()}\n"
                           f"(the nodes' logs are kept in {kept})") from e


def wait_for(what, f, timeout, every=0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = f()
        if v:
            return v
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


_ADMINS = {}


def admin(bootstrap):
    """One AdminClient per bootstrap list, kept: polling metadata opens no new connections."""
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
    return _ADMINS[bootstrap]


def partitions(bootstrap, topic):
    """{partition: (replicas, isr)} from the metadata, or None if it does not answer."""
    try:
        md = admin(bootstrap).list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return None
        return {p.id: (list(p.replicas), sorted(p.isrs)) for p in t.partitions.values()}
    except Exception:  # noqa: BLE001 - a busy broker: poll again
        return None


def create_topic(bootstrap, topic, count):
    new = NewTopic(topic, num_partitions=count, replication_factor=3, config={"min.insync.replicas": "2"})
    try:
        admin(bootstrap).create_topics([new])[topic].result(timeout=60)
    except KafkaException as e:
        # A retry of a create whose answer a fresh broker's dropped connection lost (seen on
        # Kafka's second round): the topic is there; the wait below checks it.
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    wait_for(f"{topic}: {count} partitions, 3 replicas in sync",
             lambda: (lambda ps: ps and len(ps) == count and all(len(isr) == 3 for _, isr in ps.values()))(
                 partitions(bootstrap, topic)), 120)


def fill(bootstrap):
    """DATA_MB MiB of 1 KiB records into `moving`, round-robin over its partitions."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1 << 20,
                  "compression.type": "none"})
    errors = []
    n, parts = SETTINGS["DATA_MB"] * 1024, SETTINGS["PARTITIONS"]
    start = time.time()
    for i in range(n):
        while True:
            try:
                p.produce(MOVING, VALUE, partition=i % parts,
                          on_delivery=lambda err, _m: err is not None and errors.append(str(err)))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(300)
    seconds = time.time() - start
    if errors or left:
        raise RuntimeError(f"{len(errors)} failed, {left} undelivered: {errors[:3]}")
    return {"records": n, "seconds": seconds, "MiBps": SETTINGS["DATA_MB"] / seconds}


def traffic(bootstrap, rate, stop, delivered, out_path):
    """The production traffic (own process): RATE msg/s of 1 KiB to `live`; writes per message
    [send wall time, latency s or None] and the errors to out_path."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it (or kills it)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 1})
    sent, latency, errors = [], [], []

    def on_delivery(i, t0):
        def cb(err, _msg):
            if err is None:
                latency[i] = time.perf_counter() - t0
                with delivered.get_lock():
                    delivered.value += 1
            else:
                errors.append(str(err))
        return cb

    interval = 1.0 / rate
    next_at = time.perf_counter()
    i = 0
    while not stop.is_set():
        now = time.perf_counter()
        if now < next_at:
            # librdkafka's poll waits whole milliseconds: a shorter wait is no wait, and the
            # loop would spin a core the brokers under test need (it took 1.1 of the 2 here).
            # Messages due meanwhile go together, each timed from its own produce().
            p.poll(min(max(next_at - now, 0.001), 0.01))
            continue
        sent.append(time.time())
        latency.append(None)
        while True:
            try:
                p.produce(LIVE, VALUE, on_delivery=on_delivery(i, time.perf_counter()))
                break
            except BufferError:
                p.poll(0.01)
        i += 1
        next_at += interval
        p.poll(0)
    undelivered = p.flush(60)
    with open(out_path, "w") as f:
        json.dump({"sent": sent, "latency": latency, "errors": errors, "undelivered": undelivered}, f)


class Traffic:
    def __init__(self, bootstrap):
        ctx = multiprocessing.get_context("spawn")
        self.stop_event = ctx.Event()
        self.delivered = ctx.Value("l", 0)
        fd, self.path = tempfile.mkstemp(prefix="reassign-traffic-", suffix=".json")
        os.close(fd)
        self.proc = ctx.Process(target=traffic, args=(bootstrap, SETTINGS["RATE"], self.stop_event,
                                                      self.delivered, self.path), daemon=True)
        self.proc.start()

    def kill(self):
        """After a failure: no flush (its brokers may be gone), no results."""
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def finish(self):
        self.stop_event.set()
        self.proc.join(120)
        if self.proc.is_alive():
            self.proc.terminate()
            raise RuntimeError("the traffic process did not finish within 120 s")
        with open(self.path) as f:
            data = json.load(f)
        os.unlink(self.path)
        return data


def percentiles(latencies):
    """p50/p99/p99.9/max in ms (nearest rank) of a list of seconds."""
    if not latencies:
        return None
    s = sorted(latencies)
    rank = lambda q: s[min(len(s) - 1, max(0, int(q * len(s) + 0.999999) - 1))]  # noqa: E731
    return {"count": len(s), "p50": rank(0.5) * 1e3, "p99": rank(0.99) * 1e3, "p99.9": rank(0.999) * 1e3,
            "max": s[-1] * 1e3}


def window(data, start, end):
    return percentiles([lat for t, lat in zip(data["sent"], data["latency"]) if start <= t < end and lat is not None])


def per_second(data, origin):
    """[second since origin, messages sent, p50, p99, max ms] for every second of the traffic."""
    buckets = {}
    for t, lat in zip(data["sent"], data["latency"]):
        if lat is not None:
            buckets.setdefault(int(t - origin) if t >= origin else -1, []).append(lat)
    rows = []
    for sec in sorted(buckets):
        w = percentiles(buckets[sec])
        rows.append([sec, w["count"], round(w["p50"], 2), round(w["p99"], 2), round(w["max"], 2)])
    return rows


TOOL_TIMEOUT = 300


@contextlib.contextmanager
def kafka_tool_running(*args):
    """One of Kafka's tools (scripts/kafka/kafka-common.sh kafka_tool), started in a session of
    its own: yields (process, output file); on leaving, its JVM is killed if still running."""
    cmd = f"source {REPO}/scripts/kafka/kafka-common.sh; kafka_tool " + " ".join(args)
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(["bash", "-c", cmd], stdout=out, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            yield proc, out
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def tool_output(proc, out):
    """Waits for the tool (TOOL_TIMEOUT s at most): (exit code, its output)."""
    try:
        proc.wait(TOOL_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the tool still runs after {TOOL_TIMEOUT} s") from None
    out.seek(0)
    return proc.returncode, out.read()


def kafka_tool(*args):
    """Runs one of Kafka's tools to completion: (exit code, stdout + stderr)."""
    with kafka_tool_running(*args) as (proc, out):
        return tool_output(proc, out)


def plan(t, bootstrap):
    """{partition: target replicas}: node (p % 3) + 1 handed to node 4, the order kept."""
    current = wait_for(f"`{MOVING}`'s metadata", lambda: partitions(bootstrap, MOVING), 60)
    old = lambda p: t.broker((p % 3) + 1)  # noqa: E731
    return {p: [t.broker(NEW_NODE) if b == old(p) else b for b in replicas] for p, (replicas, _) in current.items()}


def moved(targets, now):
    return now is not None and all(now.get(p) and now[p][0] == r and now[p][1] == sorted(r)
                                   for p, r in targets.items())


def execute(t, bootstrap, plan_file):
    """--execute; polls the metadata while the tool runs. (tool launch, move start, how the start
    was seen, tool output)."""
    args = ["--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", plan_file]
    if SETTINGS["THROTTLE"] > 0:
        args += ["--throttle", str(SETTINGS["THROTTLE"])]
    new = t.broker(NEW_NODE)
    launched = time.time()
    with kafka_tool_running(REASSIGN, *args) as (proc, out):
        seen = None
        while proc.poll() is None and time.time() < launched + TOOL_TIMEOUT:
            now = partitions(bootstrap, MOVING)
            if seen is None and now and any(new in replicas for replicas, _ in now.values()):
                seen = time.time()
            time.sleep(0.1)
        rc, text = tool_output(proc, out)
        exited = time.time()
    if rc != 0 or "Successfully started partition reassignment" not in text:
        raise RuntimeError(f"--execute exited {rc}:\n{text}")
    start, source = (seen, "metadata") if seen is not None and seen < exited else (exited, "tool exit")
    return launched, start, source, exited, text


def verify(bootstrap, plan_file):
    rc, out = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", plan_file)
    complete = out.count(" is completed") + out.count(" is complete.")
    ok = rc == 0 and complete >= SETTINGS["PARTITIONS"] and "still in progress" not in out
    return ok, out


def run_target(name, rnd, out_dir):
    t = Target(name)
    t.down()  # leftovers of an interrupted run
    # The 1-minute load average before and after: the machine is shared, a busy one shows here.
    r = {"target": name, "round": rnd, "loadavgBefore": os.getloadavg()[0]}
    traffic_proc = None
    try:
        with step(t, "start the 3-node cluster", out_dir):
            started = time.time()
            bootstrap = t.up()
            r["upSeconds"] = time.time() - started
        with step(t, f"create `{MOVING}` ({SETTINGS['PARTITIONS']} partitions) and `{LIVE}` (3)", out_dir):
            create_topic(bootstrap, MOVING, SETTINGS["PARTITIONS"])
            create_topic(bootstrap, LIVE, 3)
        with step(t, f"fill `{MOVING}` with {SETTINGS['DATA_MB']} MiB", out_dir):
            r["fill"] = fill(bootstrap)
            log(f"{name}: filled at {r['fill']['MiBps']:.1f} MiB/s")
            wait_for(f"`{MOVING}` in sync", lambda: (lambda ps: ps and all(len(isr) == 3 for _, isr in ps.values()))(
                partitions(bootstrap, MOVING)), 300)
        with step(t, f"start the traffic ({SETTINGS['RATE']} msg/s on `{LIVE}`)", out_dir):
            traffic_proc = Traffic(bootstrap)
            wait_for("acknowledgements flowing", lambda: traffic_proc.delivered.value > 0, 120)
            r["trafficReady"] = time.time()
            time.sleep(WARMUP_S + BASELINE_S)
        with step(t, f"add node {NEW_NODE}", out_dir):
            r["addStarted"] = time.time()
            bootstrap = t.add(NEW_NODE)
            new = t.broker(NEW_NODE)
            wait_for(f"broker {new} in the metadata",
                     lambda: new in admin(bootstrap).list_topics(timeout=5).brokers, 300)
            r["addSeconds"] = time.time() - r["addStarted"]
        with step(t, "reassign --execute", out_dir):
            targets = plan(t, bootstrap)
            r["targets"] = {str(p): v for p, v in targets.items()}
            plan_file = os.path.join(t.dir, "reassign.json")
            with open(plan_file, "w") as f:
                json.dump({"version": 1, "partitions": [{"topic": MOVING, "partition": p, "replicas": v}
                                                        for p, v in sorted(targets.items())]}, f)
            launched, start, source, exited, out = execute(t, bootstrap, plan_file)
            r.update(executeLaunched=launched, moveStarted=start, moveStartSeenBy=source,
                     executeSeconds=exited - launched, executeOutput=out[-2000:])
        with step(t, "wait for the move (replicas as planned, all in the ISR)", out_dir):
            done = wait_for("the move", lambda: moved(targets, partitions(bootstrap, MOVING)) and time.time(),
                            MOVE_TIMEOUT, every=0.5)
            r["moveDone"] = done
            r["moveSeconds"] = done - start
            r["movedMiB"] = SETTINGS["DATA_MB"]
            r["moveMiBps"] = SETTINGS["DATA_MB"] / r["moveSeconds"] if r["moveSeconds"] > 0 else None
            log(f"{name}: moved {SETTINGS['DATA_MB']} MiB in {r['moveSeconds']:.1f} s")
        with step(t, "reassign --verify", out_dir):
            ok, out = verify(bootstrap, plan_file)
            r["verifyOutput"], r["verifyAttempts"] = out[-2000:], 1
            # One --verify is the check; if it does not report every move complete although the
            # metadata does, that is logged (and counted in verifyAttempts) and it is tried again.
            while not ok and r["verifyAttempts"] < 30:
                log(f"{name}: --verify does not report every partition complete yet:\n{out}")
                time.sleep(2)
                ok, out = verify(bootstrap, plan_file)
                r["verifyOutput"], r["verifyAttempts"] = out[-2000:], r["verifyAttempts"] + 1
            if not ok:
                raise RuntimeError(f"--verify never reported every partition complete:\n{out}")
            r["throttlesCleared"] = "Clearing" in out if SETTINGS["THROTTLE"] else None
            r["verifyDone"] = time.time()
        with step(t, "traffic after the move, then stop it", out_dir):
            time.sleep(AFTER_S)
            data = traffic_proc.finish()
            traffic_proc = None
            r["stopped"] = time.time()
        sent = data["sent"]
        r["messages"] = len(sent)
        r["failed"] = len(data["errors"]) + data["undelivered"]
        r["errors"] = data["errors"][:10]
        r["baseline"] = window(data, r["trafficReady"] + WARMUP_S, r["addStarted"])
        r["during"] = window(data, r["moveStarted"], r["moveDone"])
        r["after"] = window(data, r["verifyDone"], r["stopped"])
        r["perSecond"] = per_second(data, r["trafficReady"])
        r["loadavgAfter"] = os.getloadavg()[0]
        if os.environ.get("KEEP_LOGS") == "1":
            t.keep_logs(os.path.join(out_dir, f"logs-{name}-{rnd}"))
        return r
    finally:
        if traffic_proc is not None:
            traffic_proc.kill()
        t.down()


def fio(d, *jobs):
    """fio's JSON for `jobs` (each a list of job options) run together in directory d."""
    args = ["fio", "--output-format=json"]
    for j in jobs:
        args += j
    r = subprocess.run(args, capture_output=True, text=True, timeout=180, cwd=d)
    if r.returncode != 0:
        log(f"fio failed, no device figure: {r.stderr.strip()}")
        return None
    return json.loads(r.stdout[r.stdout.index("{"):])


def device_write_bandwidth():
    """fio, sequential O_DIRECT 1 MiB blocks, 4 in flight: {write: MiB/s written alone; copyRead,
    copyWrite: MiB/s read from one file and written to another at once — what a move between
    two nodes on one device (this machine's loopback clusters) can do at most}."""
    if os.environ.get("DEVICE_BW", "1") == "0":
        return None
    base = os.path.join(REPO, "target")
    os.makedirs(base, exist_ok=True)
    common = ["--bs=1m", "--direct=1", "--ioengine=io_uring", "--iodepth=4", "--size=4g", "--runtime=8"]
    with tempfile.TemporaryDirectory(prefix="reassign-fio.", dir=base) as d:
        alone = fio(d, ["--name=seqwrite", "--filename=a", "--rw=write", *common])
        both = alone and fio(d, ["--name=read", "--filename=a", "--rw=read", *common],
                             ["--name=write", "--filename=b", "--rw=write", *common])
    if not alone or not both:
        return None
    mib = lambda job, side: job[side]["bw_bytes"] / 2**20  # noqa: E731
    return {"write": mib(alone["jobs"][0], "write"), "copyRead": mib(both["jobs"][0], "read"),
            "copyWrite": mib(both["jobs"][1], "write")}


def fmt(w):
    return "–" if not w else f"{w['p50']:.1f} / {w['p99']:.1f} / {w['p99.9']:.1f} / {w['max']:.0f}"


def report(results, device):
    """The Markdown table, with a line on the settings above it."""
    s = SETTINGS
    lines = []
    lines.append(f"Reassignment of {s['DATA_MB']} MiB ({s['PARTITIONS']} partitions, one replica each to a new node) "
          f"under {s['RATE']} msg/s acks=all traffic; throttle "
          f"{str(s['THROTTLE']) + ' B/s' if s['THROTTLE'] else 'none'}; device (fio, O_DIRECT 1 MiB): "
          + (f"{device['write']:.0f} MiB/s written alone, {device['copyWrite']:.0f} MiB/s written while "
             f"{device['copyRead']:.0f} MiB/s are read" if device else "not measured") + ".\n")
    lines.append("| target | round | moved (MiB) | move (s) | MiB/s | baseline p50/p99/p99.9/max (ms) | "
                 "during move p50/p99/p99.9/max (ms) | messages | failed |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        mibps = f"{r['moveMiBps']:.1f}" if r["moveMiBps"] else "–"
        lines.append(f"| {r['target']} | {r['round']} | {r['movedMiB']} | {r['moveSeconds']:.1f} | {mibps} | "
                     f"{fmt(r['baseline'])} | {fmt(r['during'])} | {r['messages']} | {r['failed']} |")
    lines.append("\nMedians over rounds:\n")
    lines.append("| target | runs | move (s) | MiB/s | during move p99.9 (ms) | baseline p99.9 (ms) |")
    lines.append("|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["target"] for r in results):
        rs = [r for r in results if r["target"] == name]
        med = lambda f: statistics.median(f(r) for r in rs)  # noqa: E731
        lines.append(f"| {name} | {len(rs)} | {med(lambda r: r['moveSeconds']):.1f} | "
                     f"{med(lambda r: r['moveMiBps'] or 0):.1f} | {med(lambda r: r['during']['p99.9']):.1f} | "
                     f"{med(lambda r: r['baseline']['p99.9']):.1f} |")
    return "\n".join(lines) + "\n"


def main():
    # SIGTERM (the wrapper's trap, a CI timeout) unwinds through the finally blocks: clusters down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "target", "reassign-bench")
    os.makedirs(out_dir, exist_ok=True)
    names = (os.environ.get("REASSIGN_TARGETS") or "ringlog kafka").split()
    log(f"settings: {SETTINGS}")
    device = device_write_bandwidth()
    if device:
        log(f"device: {device}")
    results = []
    for rnd in range(1, SETTINGS["ROUNDS"] + 1):
        for name in (names if rnd % 2 else names[::-1]):
            try:
                results.append(run_target(name, rnd, out_dir))
            except RuntimeError as e:
                sys.exit(f"reassign-bench: FAILED (round {rnd}) - {e}")
            with open(os.path.join(out_dir, "reassign.json"), "w") as f:
                json.dump({"settings": SETTINGS, "device": device, "results": results}, f, indent=2)
    table = report(results, device)
    sys.stdout.write(table)
    with open(os.path.join(out_dir, "reassign.md"), "w") as f:
        f.write(table)
    if any(r["failed"] for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
