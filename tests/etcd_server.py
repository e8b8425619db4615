"""A real etcd on random loopback ports for tests and benchmarks (Debian's etcd-server)."""

import contextlib
import socket
import subprocess
import time
import urllib.request
from typing import Iterator


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def run_etcd(data_dir: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start etcd with its data in ``data_dir``; yield (client URL, process); kill it at the end."""
    client, peer = f"http://127.0.0.1:{_port()}", f"http://127.0.0.1:{_port()}"
    proc = subprocess.Popen(
        ["etcd", "--name", "dk", "--data-dir", data_dir,
         "--listen-client-urls", client, "--advertise-client-urls", client,
         "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
         "--initial-cluster", f"dk={peer}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                with urllib.request.urlopen(client + "/health", timeout=1) as r:
                    if b"true" in r.read():
                        break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("etcd did not become healthy")
        yield client, proc
    finally:
        proc.kill()
        proc.wait()
