"""A real etcd member (Debian's etcd-server) on free loopback ports, the metadata store of a
ringlog cluster; its data under target/, removed by `stop`."""
import os
import shutil
import subprocess
import tempfile
import time

from support.broker import REPO, free_port_block


class Etcd:
    def __init__(self, host="127.0.0.1"):
        """One etcd member; its client port on `host` (a bridge's address for nodes in network
        namespaces), its peer port on loopback."""
        self.dir = tempfile.mkdtemp(prefix="ringlog-etcd-", dir=os.path.join(REPO, "target"))
        self.client_port = free_port_block(1)
        self.peer_port = free_port_block(1)
        self.endpoint = f"http://{host}:{self.client_port}"
        assert shutil.which("etcd"), "etcd not found: scripts/install-deps.sh installs etcd-server"
        self.log = open(os.path.join(self.dir, "etcd.log"), "wb")
        self.restart()

    def wait_healthy(self):
        deadline = time.time() + 20
        while time.time() < deadline:
            r = subprocess.run(["etcdctl", "--endpoints", self.endpoint, "endpoint", "health"],
                               capture_output=True, env=dict(os.environ, ETCDCTL_API="3"))
            if r.returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("etcd did not become healthy")

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def restart(self):
        client, peer = self.endpoint, f"http://127.0.0.1:{self.peer_port}"
        self.proc = subprocess.Popen(
            ["etcd", "--name", "t", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"t={peer}"],
            stdout=self.log, stderr=self.log)
        self.wait_healthy()

    def stop(self):
        self.kill9()
        shutil.rmtree(self.dir, ignore_errors=True)
