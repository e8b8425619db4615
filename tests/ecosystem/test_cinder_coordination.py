"""The adapter in an active-active Cinder cluster takes Cinder's coordination lock.

Three cinder-volume hosts (separate processes, each with its own cinder.conf,
lock_path and database) run the adapter over one shared array near its cap
and create at once. With Cinder's ``[coordination] backend_url`` on a real etcd
and ``cluster`` set, the kit's admission lock is Cinder's etcd (no option of
the kit's own) and the cap holds; with each host's coordination on its own
directory (Cinder's file URL) the same race over-commits.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from contrib.shared_pool_driver import DiskGroupArray
from driver_kit import GiB
from tests.ecosystem.support import (CINDER_INSTALLED, HERE, IN_CI, NO_CINDER, REPO,
                                     requires_cinder, write_cinder_conf)
from tests.etcd_server import run_etcd

HOSTS = 3
CAP_GIB = 20  # a 10 GiB disk group at ratio 2.0

pytestmark = [requires_cinder, pytest.mark.skipif(
    shutil.which("etcd") is None and not IN_CI,
    reason="NO REAL ETCD: apt-get install etcd-server (tools/run-tests.sh does, as root)")]


def _section(array: Path) -> dict[str, Any]:
    return {"volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
            "driver_kit_driver": "contrib.shared_pool_driver:SharedPoolDriver",
            "volume_backend_name": "kit-shared", "shared_array_dir": array,
            "shared_capacity_gb": 10, "shared_allocation_unit_mb": 1024,
            "max_over_subscription_ratio": "2.0", "reserved_percentage": 0}


def _race(tmp: Path, *, etcd_url: str | None) -> tuple[list[dict[str, Any]], int]:
    """HOSTS services create 2 GiB each at once with 18 of 20 GiB taken: (answers, GiB over)."""
    array = DiskGroupArray(str(tmp / "array"), capacity_bytes=10 * GiB, unit_bytes=GiB)
    (tmp / "array").mkdir()
    array.create("base", pool="fast", size_bytes=18 * GiB, thin=True)
    procs = []
    for index in range(HOSTS):
        workdir = tmp / f"host{index}"
        workdir.mkdir()
        write_cinder_conf(workdir, {"kit-shared": _section(tmp / "array")},
                          defaults={"cluster": "kit-cluster"} if etcd_url else None,
                          coordination_url=etcd_url)
        procs.append(subprocess.Popen(
            [sys.executable, str(HERE / "cinder_coordination_side.py"), str(workdir)],
            cwd=REPO, stderr=subprocess.PIPE, text=True))
    try:
        for index, proc in enumerate(procs):
            while not (tmp / f"host{index}" / "ready").exists():
                if proc.poll() is not None:
                    pytest.fail(f"host{index} failed to start:\n{proc.stderr.read()[-4000:]}")
                time.sleep(0.05)
        array.set_faults(delay_s=0.3)  # every array request slow: a real race window
        (tmp / "go").touch()
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-4000:]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
            proc.stderr.close()
    answers = [json.loads((tmp / f"host{i}" / "answer.json").read_text())
               for i in range(HOSTS)]
    provisioned = sum(v["size_bytes"] for v in array.load()["volumes"].values())
    return answers, max(0, provisioned // GiB - CAP_GIB)


def test_the_adapter_admits_under_cinders_coordination_lock(tmp_path: Path) -> None:
    if not CINDER_INSTALLED:
        pytest.fail(NO_CINDER)
    with run_etcd(str(tmp_path / "etcd-data")) as (client, _):
        url = f"etcd3+{client}/?timeout=5"
        (tmp_path / "etcd").mkdir()
        answers, over = _race(tmp_path / "etcd", etcd_url=url)
    assert {a["url"] for a in answers} == {url}  # Cinder's URL, no option of the kit's
    assert all(a["initialized"] for a in answers)  # clustered: the adapter allows A/A
    errors = [a["error"] for a in answers]
    assert errors.count(None) == 1
    for error in filter(None, errors):  # the others: refused for capacity, rescheduled
        assert error["type"] == "VolumeBackendAPIException" and error["has_decision"]
    assert over == 0

    (tmp_path / "local").mkdir()
    answers, over = _race(tmp_path / "local", etcd_url=None)
    # each host's own file:// coordination: no lock in common, the race is real
    assert all(a["url"].startswith("file://") for a in answers)
    assert over > 0
