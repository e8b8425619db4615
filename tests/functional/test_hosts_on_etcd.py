"""Two hosts on one thin pool admit through a real etcd: the cap holds, as ``lvs`` shows.

Each "host" is a process with its own lock_path, so file locks cannot help; the
coordination service is a real etcd started here (in the VM lane, the host's
Debian etcd-server binary, seen through the shared root filesystem). On the
simulator it runs everywhere; marked ``realvm`` it runs on a real thin pool.
"""

from __future__ import annotations

import multiprocessing
import shutil

import pytest

from driver_kit import CapacityExceeded, GiB
from tests.etcd_server import run_etcd
from tests.functional.conftest import POOL_GB
from tests.functional.test_scenarios import ground_truth

HOSTS, TRIES = 2, 2
RATIO = 2.0


@pytest.fixture
def etcd_url(tmp_path):
    if shutil.which("etcd") is None:
        pytest.skip("NO REAL ETCD: the etcd binary is missing (apt-get install etcd-server, "
                    "as tools/run-tests.sh does as root)")
    with run_etcd(str(tmp_path / "etcd-data")) as (client, _):
        yield f"etcd3+{client}/?timeout=10"


def _host(lab, index, url, barrier, queue):
    driver = lab.driver(lock_path=str(lab.tmp / f"locks-{index}"),
                        coordination_backend_url=url,
                        max_over_subscription_ratio=str(RATIO))
    barrier.wait()
    made = []
    for attempt in range(TRIES):
        try:
            driver.create_volume(f"host{index}-{attempt}", 1)
            made.append(f"host{index}-{attempt}")
        except CapacityExceeded:
            pass
    queue.put(made)


def test_two_hosts_on_etcd_never_pass_the_cap(lab, etcd_url):
    # 2 of the 4 GiB cap taken: room for two of the four 1 GiB creates
    lab.lvm("lvcreate", "-T", "-V", "2g", "-n", "base", f"{lab.vg_name}/pool")
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(HOSTS), ctx.Queue()
    procs = [ctx.Process(target=_host, args=(lab, i, etcd_url, barrier, queue))
             for i in range(HOSTS)]
    for p in procs:
        p.start()
    made = [name for _ in procs for name in queue.get(timeout=600)]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    truth = ground_truth(lab)  # from lvs, parsed apart from the driver
    assert truth["provisioned"] == int(RATIO * POOL_GB * GiB)  # full, never past
    assert {n for n in lab.lv_names() if n.startswith("host")} == set(made)
    assert len(made) == 2
