"""A real `ringlog` node on loopback with a fresh data dir and free ports.

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

# tests/clients/support/broker.py -> the repository's root, three levels up
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
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
