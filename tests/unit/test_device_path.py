"""``backend_device_path``: the local device the data path exports and copies."""

import pytest

from driver_kit import GiB, VolumeNotFound, load_backend_config
from contrib.sparse_file_driver import SparseFileDriver
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.simulator import LVMSimulator
from tests.unit.memdriver import MemoryDriver


@pytest.fixture
def lvm(tmp_path):
    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    simulator.create_vg("dkvg", 12 * GiB)
    simulator.run(["lvcreate", "-T", "-L", "10g", "dkvg/pool"])
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides={
        "lvm_backend": "simulator", "lvm_simulator_state_file": str(tmp_path / "state.json"),
        "volume_group": "dkvg", "lvm_thin_pool_name": "pool",
        "lock_path": str(tmp_path / "locks")}))
    driver.do_setup()
    driver.create_volume("volume-a", 1)
    driver.create_snapshot("snap-a", "volume-a")
    return simulator, driver


def _active(simulator, name):
    return simulator.state()["vgs"]["dkvg"]["lvs"][name]["active"]


def test_lvm_gives_the_lv_path_and_activates_it_first(lvm):
    simulator, driver = lvm
    simulator.run(["lvchange", "-an", "dkvg/volume-a"])
    assert not _active(simulator, "volume-a")
    start = driver.executor.commands_run
    assert driver.backend_device_path("volume-a") == "/dev/dkvg/volume-a"
    assert _active(simulator, "volume-a")
    assert driver.executor.commands_run - start == 2  # lvs, lvchange
    start = driver.executor.commands_run
    assert driver.backend_device_path("volume-a") == "/dev/dkvg/volume-a"
    assert driver.executor.commands_run - start == 1  # already active: lvs only


@pytest.mark.parametrize("name", ["nope", "snap-a", "pool"])
def test_lvm_gives_no_path_for_what_is_not_a_volume(lvm, name):
    simulator, driver = lvm
    with pytest.raises(VolumeNotFound, match=name):
        driver.backend_device_path(name)


def test_sparse_file_driver_gives_the_volume_file(tmp_path):
    driver = SparseFileDriver(load_backend_config(
        extra_opts=SparseFileDriver.OPTIONS,
        overrides={"sparse_pool_dir": str(tmp_path / "pool"),
                   "lock_path": str(tmp_path / "locks")}))
    driver.do_setup()
    driver.create_volume("volume-a", 1)
    assert driver.backend_device_path("volume-a") == str(tmp_path / "pool" / "volume-a.img")
    with pytest.raises(VolumeNotFound):
        driver.backend_device_path("volume-b")


def test_a_driver_without_the_hook_says_it_has_no_local_device(tmp_path):
    driver = MemoryDriver(load_backend_config(overrides={"lock_path": str(tmp_path)}))
    with pytest.raises(NotImplementedError, match="no local device path"):
        driver.backend_device_path("volume-a")
