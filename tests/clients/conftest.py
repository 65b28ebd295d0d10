"""Fixtures for client compatibility tests: start the real `ringlog` binary on loopback with a
fresh data dir and free ports, and stop it afterwards. Tests talk to it with real Kafka clients.

The binary is `target/release/ringlog` (built by scripts/test.sh); RINGLOG_BIN overrides it.
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("RINGLOG_BIN", os.path.join(REPO, "target", "release", "ringlog"))


def ephemeral_ports():
    """The kernel's range for outgoing connections' local ports (ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port_block(n):
    """A base port such that base..base+n-1 are all free on 127.0.0.1, chosen below the
    ephemeral range: a port in it may be taken, between this check and the broker's bind, as
    the local port of any outgoing connection (a shard's port after shard 0's was taken by a
    client's connection, as seen once in CI)."""
    low, _ = ephemeral_ports()
    top = min(low, 65535) - n
    for _ in range(500):
        base = random.randint(min(10000, top - 1), top)
        ok = True
        for p in range(base, base + n):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


def metric(port, name, default=None, **labels):
    """The value of one sample of the broker's metrics endpoint (`default`, when given, if the
    broker has no such sample yet)."""
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    if default is not None:
        return default
    raise AssertionError(f"no sample {name}{{{want}}}")


class Broker:
    """A running ringlog node."""

    def __init__(self, shards=2, settings=None, data_dir=None):
        self.shards = shards
        self.settings = dict(settings or {})
        self.own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="ringlog-test-", dir=os.path.join(REPO, "target"))
        self.port = free_port_block(shards)
        self.proc = None
        self.log_path = os.path.join(self.data_dir, "broker.log")
        # Run the binary through this (e.g. `ip netns exec NS`, which execs it: same pid).
        self.command_prefix = []
        # Options before `serve` (e.g. --log-format json).
        self.global_args = []
        # Extra environment of the broker process (e.g. RUST_LOG).
        self.env = {}
        # Options after `serve` (e.g. --add-scram).
        self.serve_args = []
        # Base ports of further listeners (set in settings["listeners"]) to wait for.
        self.extra_ports = []

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self, timeout=15):
        args = self.command_prefix + [BINARY] + self.global_args + ["serve", "--data-dir", self.data_dir, "--shards", str(self.shards)]
        # A test that names its listeners lists the PLAINTEXT one on self.port itself.
        if "listeners" not in self.settings:
            args += ["--listen", self.bootstrap]
        args += self.serve_args
        for k, v in self.settings.items():
            args += ["--set", f"{k}={v}"]
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, env={**os.environ, **self.env})
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ringlog exited with {self.proc.returncode}:\n{self.read_log()}")
            if all(self._port_open(base + i) for base in [self.port] + self.extra_ports for i in range(self.shards)):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"ringlog did not listen within {timeout} s:\n{self.read_log()}")

    def _port_open(self, port):
        with socket.socket() as s:
            s.settimeout(0.2)
            return s.connect_ex(("127.0.0.1", port)) == 0

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-5000:]

    def wait_for_log(self, text, timeout=10):
        """Waits until `text` is in the log's last 5000 characters; the broker may log what
        it did (a connection it closed) a moment after the client saw it."""
        deadline = time.monotonic() + timeout
        while text not in self.read_log():
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not logged within {timeout} s:\n{self.read_log()}")
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"ringlog did not stop on signal {sig} within {timeout} s")
        return self.proc.returncode if self.proc else None

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def cleanup(self):
        self.stop()
        if self.own_dir:
            keep = os.environ.get("RINGLOG_KEEP_DIRS")
            if keep:
                shutil.copytree(self.data_dir, os.path.join(keep, os.path.basename(self.data_dir)))
            shutil.rmtree(self.data_dir, ignore_errors=True)


def kafka_tool(*args):
    """Runs one of Apache Kafka's own command-line tools (kafka-tools 4.1.1 from Maven Central,
    fetched by scripts/fetch-kafka.sh; scripts/test.sh exports their folder)."""
    libs = os.environ.get("RINGLOG_KAFKA_LIBS") or subprocess.run(
        [os.path.join(REPO, "scripts", "fetch-kafka.sh")], capture_output=True, text=True, check=True
    ).stdout.strip().splitlines()[-1]
    cmd = f"source {REPO}/scripts/kafka-common.sh; kafka_tool " + " ".join(args)
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, KAFKA_LIBS=libs))


def kafka_libs():
    libs = os.environ.get("RINGLOG_KAFKA_LIBS")
    if libs:
        return libs
    out = subprocess.run([os.path.join(REPO, "scripts", "fetch-kafka.sh")], capture_output=True,
                         text=True, check=True).stdout
    return out.strip().splitlines()[-1]


class ApacheKafka:
    """Apache Kafka 4.1.1 (scripts/kafka-start.sh) on free loopback ports, its own data dir;
    `extra_props` are more server.properties lines (later lines win over the script's), where
    {port}, {controller_port} and {extra_port} stand for this broker's ports."""

    def __init__(self, extra_props, prefix="kafka-test-"):
        self.dir = tempfile.mkdtemp(prefix=prefix, dir=os.path.join(REPO, "target"))
        # the PLAINTEXT listener, the controller's, and one more a test may name
        port = free_port_block(3)
        self.extra_port = port + 2
        self.env = dict(os.environ, KAFKA_DATA_DIR=self.dir, KAFKA_PORT=str(port),
                        KAFKA_CONTROLLER_PORT=str(port + 1), KAFKA_LIBS=kafka_libs(),
                        KAFKA_HEAP_OPTS="-Xms256m -Xmx512m",
                        KAFKA_EXTRA_PROPS=extra_props.format(port=port, controller_port=port + 1,
                                                             extra_port=port + 2))
        self.bootstrap = f"127.0.0.1:{port}"

    def start(self):
        r = subprocess.run([os.path.join(REPO, "scripts", "kafka-start.sh")], env=self.env,
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, f"kafka-start.sh: {r.stdout}\n{r.stderr}"
        return self

    def stop(self):
        subprocess.run([os.path.join(REPO, "scripts", "kafka-stop.sh")], env=self.env,
                       capture_output=True, text=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


JAVA_PROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java")
JAVA_JAR = os.path.join(JAVA_PROJECT, "target", "client-check.jar")
JAVA_LIB = os.path.join(JAVA_PROJECT, "target", "lib")


def _newest_java_source_mtime():
    paths = [os.path.join(JAVA_PROJECT, "pom.xml")]
    for root, _dirs, files in os.walk(os.path.join(JAVA_PROJECT, "src")):
        paths += [os.path.join(root, f) for f in files]
    return max(os.path.getmtime(p) for p in paths)


def java_client_check():
    """The command that runs tests/clients/java's ClientCheck, built with Maven when its jar is
    missing or older than its sources (output in tests/clients/java/target/, git-ignored)."""
    assert shutil.which("java") and shutil.which("mvn"), "java and mvn needed: scripts/install-deps.sh installs them"
    fresh = os.path.exists(JAVA_JAR) and os.path.isdir(JAVA_LIB) and os.path.getmtime(JAVA_JAR) >= _newest_java_source_mtime()
    if not fresh:
        r = subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "package"], cwd=JAVA_PROJECT,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"mvn package failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        os.utime(JAVA_JAR)  # mvn keeps an unchanged jar's old mtime
    classpath = os.pathsep.join([JAVA_JAR] + sorted(os.path.join(JAVA_LIB, f) for f in os.listdir(JAVA_LIB) if f.endswith(".jar")))
    return ["java", "-cp", classpath, "ringlog.clientcheck.ClientCheck"]


def run_client_program(cmd, broker, timeout, name):
    """Runs a client check program against `broker`; fails the test with its output and the
    broker's log unless it exits 0. Returns its stdout."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} timed out:\n{e.stdout}\n{e.stderr}\n--- broker log ---\n{broker.read_log()}")
    assert r.returncode == 0, (f"{name} exited {r.returncode}\n--- stdout ---\n{r.stdout}\n"
                               f"--- stderr ---\n{r.stderr}\n--- broker log ---\n{broker.read_log()}")
    return r.stdout


@pytest.fixture
def broker():
    b = Broker().start()
    yield b
    b.cleanup()


@pytest.fixture
def make_broker():
    made = []

    def make(**kw):
        b = Broker(**kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.cleanup()
