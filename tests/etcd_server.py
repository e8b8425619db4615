"""A real etcd on random loopback ports for tests and benchmarks (Debian's etcd-server)."""

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from typing import Iterator


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdServer:
    """One etcd member that can be stopped, wiped and started again on the same ports."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.client = f"http://127.0.0.1:{_port()}"
        self.peer = f"http://127.0.0.1:{_port()}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Start etcd and wait (at most 20 s) until it reports healthy."""
        self.proc = subprocess.Popen(
            ["etcd", "--name", "dk", "--data-dir", self.data_dir,
             "--listen-client-urls", self.client, "--advertise-client-urls", self.client,
             "--listen-peer-urls", self.peer, "--initial-advertise-peer-urls", self.peer,
             "--initial-cluster", f"dk={self.peer}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.client + "/health", timeout=1) as r:
                    if b"true" in r.read():
                        return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("etcd did not become healthy")

    def stop(self) -> None:
        """Kill etcd (as a crash would) and reap it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def wipe(self) -> None:
        """Lose every key and lease: the data directory goes (etcd must be stopped)."""
        shutil.rmtree(self.data_dir, ignore_errors=True)


@contextlib.contextmanager
def run_etcd(data_dir: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start etcd with its data in ``data_dir``; yield (client URL, process); kill it after."""
    server = EtcdServer(data_dir)
    server.start()
    try:
        yield server.client, server.proc
    finally:
        server.stop()
