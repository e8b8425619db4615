"""Hosts for the cross-host admission tests: forked processes on one shared backend file.

Each host has its OWN lock_path (file locks cannot help) and its own etcd
session; the backend is a file of "name GiB" lines every host appends to, with
a cap of 20 GiB (10 GiB at ratio 2.0). A create's backend command takes
``command_delay_s`` and, when asked, touches a flag file first, so a test knows the
command is running (its reservation committed, its lease just renewed).
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from driver_kit import CapacityExceeded, load_backend_config
from driver_kit.coordination import stop_coordinators
from driver_kit.exceptions import CoordinationError
from tests.etcd_server import EtcdServer
from tests.unit.test_driver import FileDriver

CTX = multiprocessing.get_context("fork")
CAP_GB = 20
LEASE_S = 3

requires_etcd = pytest.mark.skipif(
    shutil.which("etcd") is None,
    reason="NO REAL ETCD: the etcd binary is missing (apt-get install etcd-server, as "
           "tools/run-tests.sh does as root); the cross-host admission proof did not run")


class SlowFileDriver(FileDriver):
    """A shared-file backend whose create takes ``delay_s``, so a race window is real."""

    command_delay_s = 0.5
    flag: str | None = None

    def backend_create_volume(self, name, size_gb, *, pool_name, thin):
        if self.flag:
            Path(self.flag).touch()  # the command runs: tell the test
        time.sleep(self.command_delay_s)
        super().backend_create_volume(name, size_gb, pool_name=pool_name, thin=thin)


def make_driver(workdir: Path, index: Any, url: str | None, *, delay_s: float = 0.5,
                ratio: str = "2.0", flag: str | None = None) -> SlowFileDriver:
    overrides = {"lock_path": str(workdir / f"locks-{index}"),  # each host its own
                 "max_over_subscription_ratio": ratio, "coordination_backend_url": url}
    driver = SlowFileDriver(load_backend_config(overrides=overrides), str(workdir / "vols"))
    driver.command_delay_s, driver.flag = delay_s, flag
    return driver


def volumes(workdir: Path) -> dict[str, int]:
    return {name: int(size) for name, size in
            (line.split() for line in (workdir / "vols").read_text().splitlines()
             if line.strip())}


def over_commit_gb(workdir: Path) -> int:
    return max(0, sum(volumes(workdir).values()) - CAP_GB)


def try_create(driver: SlowFileDriver, name: str, size_gb: int) -> str:
    """'ok', 'refused' (capacity) or the error a test fails on."""
    try:
        driver.create_volume(name, size_gb)
        return "ok"
    except CapacityExceeded:
        return "refused"
    except CoordinationError as exc:
        return f"coordination: {exc}"


def _host(workdir, index, url, sizes, delay_s, flag, barrier, queue, linger_s, prefix, ratio):
    faulthandler.dump_traceback_later(45, exit=True)  # a stuck host says where
    driver = make_driver(workdir, index, url, delay_s=delay_s, flag=flag, ratio=ratio)
    if barrier is not None:
        barrier.wait()
    for j, size in enumerate(sizes):
        queue.put((index, try_create(driver, f"{prefix}{index}-{j}", size), time.monotonic()))
    time.sleep(linger_s)  # a live host keeps its session (and heartbeat) going


def start_hosts(workdir: Path, url: str | None, count: int, sizes: list[int], *,
                delay_s: float = 0.3, flag: str | None = None, linger_s: float = 0,
                together: bool = True, prefix: str = "h", ratio: str = "2.0",
                ) -> tuple[list[Any], Any]:
    """``count`` host processes, each creating volumes of ``sizes``; (processes, queue)."""
    barrier = CTX.Barrier(count) if together and count > 1 else None
    queue = CTX.Queue()
    procs = [CTX.Process(target=_host, args=(workdir, i, url, sizes, delay_s, flag,
                                             barrier, queue, linger_s, prefix, ratio), daemon=True)
             for i in range(count)]
    for proc in procs:
        proc.start()
    return procs, queue


def outcomes(procs: list[Any], queue: Any, expected: int, timeout_s: float = 60
             ) -> list[tuple[int, str, float]]:
    """The ``expected`` answers of the hosts, within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    answers = []
    while len(answers) < expected:
        answers.append(queue.get(timeout=max(0.1, deadline - time.monotonic())))
    return answers


def stop_hosts(procs: list[Any]) -> None:
    """Kill every host still running and reap it (bounded)."""
    for proc in procs:
        if proc.is_alive():
            proc.kill()
        proc.join(5)


def wait_for(path: str, proc: Any, within_s: float = 30) -> None:
    deadline = time.monotonic() + within_s
    while not os.path.exists(path):
        assert proc.is_alive(), "the host died before its command"
        assert time.monotonic() < deadline, "the host's command never started"
        time.sleep(0.02)


@pytest.fixture
def etcd_server(tmp_path):
    """A real etcd (stoppable, wipeable, restartable on its ports); yields (server, url)."""
    server = EtcdServer(str(tmp_path / "etcd-data"))
    server.start()
    url = f"etcd3+{server.client}/?timeout={LEASE_S}"
    try:
        yield server, url
    finally:
        stop_coordinators(url, timeout_s=3)  # bounded, whatever state etcd is in
        server.stop()
