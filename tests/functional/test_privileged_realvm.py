"""The privileged daemon on real LVM and real devices (the VM lane), started through
privsep-helper: what only a real host has, the thick wipe's O_DIRECT zeros on the
LV's device-mapper device, the PV header reads from a loop device, the pool's
device-mapper status, and their refusals.

Run inside the VM: tests/realvm/run_in_vm.sh -- .venv/bin/python -m pytest
tests/functional/test_privileged_realvm.py -m realvm
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from driver_kit import load_backend_config, make_conf
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.privileged import PrivilegeRefused, devices
from lvm_driver.privsep_runner import PrivsepRunner, forget_helper
from lvm_driver.read import mda
from lvm_driver.run.executor import LVMExecutor

pytestmark = pytest.mark.realvm
REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("runs inside the VM lane: tests/realvm/run_in_vm.sh -- .venv/bin/python "
                    "-m pytest tests/functional/test_privileged_realvm.py -m realvm")
    vg = os.environ["DK_REAL_LVM_VG"]
    root = tmp_path_factory.mktemp("privsep-real")
    conf = root / "driver.conf"
    conf.write_text(f"""[DEFAULT]
enabled_backends = real1
[real1]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = {vg}
lvm_thin_pool_name = ppool
lvm_thin_pool_size_percent = 50
lvm_privilege = privsep
lvm_offer_thick = true
lvm_metadata_parse = true
volume_clear_size = 4
lock_path = {root / 'locks'}
lvm_root_helper = env PYTHONPATH={REPO} PATH={Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin
""")
    conf.chmod(0o644)
    driver = ThinLVMDriver(load_backend_config(make_conf([str(conf)]), "real1",
                                               extra_opts=LVM_OPTS))
    try:
        driver.do_setup()
        driver.check_for_setup_error()
        yield driver
    finally:
        forget_helper()
        LVMExecutor().run(["lvremove", "-f", "-y", vg], readonly=False)


def test_the_thick_wipe_zeroes_the_lv_through_the_daemon(driver):
    assert isinstance(driver.executor.runner, PrivsepRunner)
    vg = driver.vg_name
    driver.create_volume("thick-w", 1, extra_specs={"provisioning:type": "thick"})
    with open(f"/dev/{vg}/thick-w", "r+b", buffering=0) as device:
        device.write(b"\xab" * 8 * MiB)
        os.fsync(device.fileno())
    with pytest.raises(PrivilegeRefused):  # past the LV's end
        devices.zero("real1", "thick-w", 2 << 30, 60)
    with pytest.raises(PrivilegeRefused):  # the pool
        devices.zero("real1", "ppool", MiB, 60)
    assert devices.zero("real1", "thick-w", 4 * MiB, 60)["exit_code"] == 0
    with open(f"/dev/{vg}/thick-w", "rb", buffering=0) as device:
        data = device.read(8 * MiB)
    assert data[:4 * MiB].count(0) == 4 * MiB and data[4 * MiB:].count(0) == 0
    driver.delete_volume("thick-w")
    assert driver.backend_find_volume("thick-w") is None


def test_a_refresh_after_an_operators_lvcreate_reads_the_pv_through_the_daemon(driver):
    vg = driver.vg_name
    driver.create_volume("volume-a", 1)
    driver.get_volume_stats(refresh=True)
    LVMExecutor().run(["lvcreate", "-T", "-V", "1g", "-n", "by-operator", f"{vg}/ppool"],
                      readonly=False)
    started, stats = driver.executor.commands_run, driver.vg.report_cache_stats
    pool = driver.get_volume_stats(refresh=True)["pools"][0]
    assert driver.executor.commands_run == started  # no LVM process asked for
    assert driver.vg.report_cache_stats.parsed == stats.parsed + 1
    assert pool["provisioned_capacity_gb"] == 2
    assert driver.executor.runner.thin_pool_status(vg, "ppool").mode == "rw"


def test_block_reads_of_the_real_pv_stay_in_its_headers(driver):
    pv = os.environ["DK_REAL_LVM_PV"]
    runner = driver.executor.runner
    identity, head = runner.read_block(pv, 0, mda.FIRST_READ_BYTES)
    assert identity == os.stat(pv).st_rdev
    label = mda.parse_label(head)
    start, size = label.metadata_areas[0]
    for path, offset in ((pv, start + size), (pv, label.data_areas[0][0]),
                         (pv.replace("/dev/", "/dev/./"), 0), ("/etc/shadow", 0),
                         (f"/dev/mapper/{driver.vg_name}-ppool-tpool", 0)):
        with pytest.raises(PermissionError):
            runner.read_block(path, offset, 4096)
