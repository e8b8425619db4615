"""Two hosts on one thin pool admit through a real etcd: the cap holds, as ``lvs`` shows.

Each "host" is a process with its own lock_path, so file locks cannot help; the
coordination service is a real etcd started here (in the VM lane, the host's
Debian etcd-server binary, seen through the shared root filesystem). On the
simulator it runs everywhere; marked ``realvm`` it runs on a real thin pool.
"""

from __future__ import annotations

import shutil

import pytest

from driver_kit import GiB
from tests.etcd_server import run_etcd
from tests.functional.conftest import POOL_GB
from tests.functional.test_scenarios import ground_truth, race

HOSTS = 2


@pytest.fixture
def etcd_url(tmp_path):
    if shutil.which("etcd") is None:
        pytest.skip("NO REAL ETCD: the etcd binary is missing (apt-get install etcd-server, "
                    "as tools/run-tests.sh does as root)")
    import tooz.drivers.etcd3gw  # noqa: F401 - once here, not in each forked host (slow in TCG)
    with run_etcd(str(tmp_path / "etcd-data")) as (client, _):
        yield f"etcd3+{client}/?timeout=120"  # a lease past lvm_command_timeout


def test_two_hosts_on_etcd_never_pass_the_cap(lab, etcd_url):
    # ratio 2.0, 2 of the 4 GiB cap taken: room for two of the four 1 GiB creates
    lab.lvm("lvcreate", "-T", "-V", "2g", "-n", "base", f"{lab.vg_name}/pool")
    made = race([lab.overrides(lock_path=str(lab.tmp / f"locks-{i}"),
                               coordination_backend_url=etcd_url) for i in range(HOSTS)])
    truth = ground_truth(lab)  # from lvs, parsed apart from the driver
    assert truth["provisioned"] == 2 * POOL_GB * GiB  # the cap reached, never passed
    assert {n for n in lab.lv_names() if n.startswith("race-")} == set(made)
    assert len(made) == 2
