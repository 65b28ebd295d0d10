"""Apache Kafka and its clients, run as programs: a real Apache Kafka broker (`ApacheKafka`),
Kafka's own command-line tools (`kafka_tool`), and the Java and franz-go client check programs in
tests/clients/java and tests/clients/go (`java_client_check`, `GO_MODULE`, `run_client_program`)."""
import os
import shutil
import subprocess
import tempfile

import pytest

from support.broker import REPO, free_port_block


def kafka_tool(*args):
    """Runs one of Apache Kafka's own command-line tools (kafka-tools 4.1.1 from Maven Central,
    fetched by scripts/kafka/fetch-kafka.sh; scripts/test.sh exports their folder)."""
    libs = os.environ.get("RINGLOG_KAFKA_LIBS") or subprocess.run(
        [os.path.join(REPO, "scripts", "kafka", "fetch-kafka.sh")], capture_output=True, text=True, check=True
    ).stdout.strip().splitlines()[-1]
    cmd = f"source {REPO}/scripts/kafka/kafka-common.sh; kafka_tool " + " ".join(args)
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, KAFKA_LIBS=libs))


def kafka_libs():
    libs = os.environ.get("RINGLOG_KAFKA_LIBS")
    if libs:
        return libs
    out = subprocess.run([os.path.join(REPO, "scripts", "kafka", "fetch-kafka.sh")], capture_output=True,
                         text=True, check=True).stdout
    return out.strip().splitlines()[-1]


class ApacheKafka:
    """Apache Kafka 4.1.1 (scripts/kafka/kafka-start.sh) on free loopback ports, its own data dir;
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
        r = subprocess.run([os.path.join(REPO, "scripts", "kafka", "kafka-start.sh")], env=self.env,
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, f"kafka-start.sh: {r.stdout}\n{r.stderr}"
        return self

    def stop(self):
        subprocess.run([os.path.join(REPO, "scripts", "kafka", "kafka-stop.sh")], env=self.env,
                       capture_output=True, text=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


# The client programs stay in tests/clients/java and tests/clients/go, one level above this package.
CLIENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAVA_PROJECT = os.path.join(CLIENTS, "java")
JAVA_JAR = os.path.join(JAVA_PROJECT, "target", "client-check.jar")
JAVA_LIB = os.path.join(JAVA_PROJECT, "target", "lib")
# franz-go checks (main.go, groups.go, security.go, chaos.go, txn.go, txnwriter.go), built with
# `go build` into bin/
GO_MODULE = os.path.join(CLIENTS, "go")
GO_BIN = os.path.join(GO_MODULE, "bin", "clientcheck")


def go_client_check():
    """The command that runs tests/clients/go's clientcheck, built first (the Go build cache
    makes a rebuild of unchanged sources take about a second)."""
    assert shutil.which("go"), "the go toolchain (1.26+, see go/go.mod) is needed on PATH"
    # -mod=readonly: go.mod/go.sum are committed as they are; the build must not rewrite them
    r = subprocess.run(["go", "build", "-mod=readonly", "-o", GO_BIN, "."], cwd=GO_MODULE,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"go build failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return [GO_BIN]


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
