"""ThinLVMDriver on the simulator: faults, process counts, validation."""

import pytest

from driver_kit import (AlreadyExists, CapacityExceeded, GiB, InvalidInput, InvalidName,
                        InvalidSize, SetupError, VolumeNotFound, load_backend_config,
                        validate_stats)
from driver_kit.exceptions import BackendError, BackendTimeout, BackendUnavailable
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.simulator import LVMSimulator


@pytest.fixture
def sim(tmp_path):
    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    simulator.create_vg("dkvg", 12 * GiB)
    simulator.run(["lvcreate", "-T", "-L", "10g", "dkvg/pool"])
    return simulator


def make(tmp_path, **extra):
    overrides = {"lvm_backend": "simulator", "lvm_simulator_state_file":
                 str(tmp_path / "state.json"), "volume_group": "dkvg",
                 "lvm_thin_pool_name": "pool", "lock_path": str(tmp_path / "locks"),
                 "max_over_subscription_ratio": "2.0", "lvm_command_timeout": 5.0}
    overrides.update(extra)
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides=overrides))
    driver.do_setup()
    return driver


def names(sim):
    return set(sim.state()["vgs"]["dkvg"]["lvs"])


def test_constructor_does_no_io(tmp_path):
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides={
        "lvm_backend": "simulator", "lvm_simulator_state_file": str(tmp_path / "s.json"),
        "lock_path": str(tmp_path)}))
    assert driver.executor.commands_run == 0
    assert not (tmp_path / "s.json").exists()


def test_process_counts(sim, tmp_path):
    driver = make(tmp_path)
    start = driver.executor.commands_run
    driver.get_volume_stats(refresh=True)
    assert driver.executor.commands_run - start == 1
    start = driver.executor.commands_run
    driver.create_volume("volume-a", 1)
    assert driver.executor.commands_run - start == 2


def test_thick_pool_when_offered(sim, tmp_path):
    driver = make(tmp_path, lvm_offer_thick=True)
    info = driver.create_volume("thick-a", 1, extra_specs={"provisioning:type": "thick"})
    assert (info.pool_name, info.thin) == ("dkvg", False)
    stats = driver.get_volume_stats(refresh=True)
    assert validate_stats(stats) == []
    thick = next(p for p in stats["pools"] if p["pool_name"] == "dkvg")
    assert thick["thick_provisioning_support"] and not thick["thin_provisioning_support"]
    assert thick["provisioned_capacity_gb"] == 1
    with pytest.raises(InvalidInput, match="thick"):
        make(tmp_path).create_volume("thick-b", 1, extra_specs={"provisioning:type": "thick"})


def test_failure_after_lvcreate_leaves_nothing_and_leaks_no_claim(sim, tmp_path):
    driver = make(tmp_path)
    largest = driver.get_volume_stats(refresh=True)["pools"][0]["max_volume_size_gb"]
    sim.inject("lvcreate", fail_after_apply=True, exit_code=139)
    with pytest.raises(BackendError):
        driver.create_volume("volume-a", 1)
    assert "volume-a" not in names(sim)
    # the claim is gone: everything admissible before is admissible again
    assert driver.get_volume_stats(refresh=True)["pools"][0]["max_volume_size_gb"] == largest
    driver.create_volume("volume-a", largest)


def test_failing_and_hanging_lvm(sim, tmp_path):
    driver = make(tmp_path, lvm_command_timeout=0.5)
    sim.inject("lvcreate", exit_code=5, stderr="  Internal error: boom\n")
    with pytest.raises(BackendError, match="boom"):
        driver.create_volume("volume-a", 1)
    sim.inject("lvcreate", hang=True)
    with pytest.raises(BackendTimeout):
        driver.create_volume("volume-b", 1)
    assert not {"volume-a", "volume-b"} & names(sim)
    driver.create_volume("volume-c", 1)  # and the lock was released


@pytest.mark.parametrize("fault", [{"malformed_output": True}, {"exit_code": 5},
                                   {"hang": True}])
def test_stats_fail_closed_on_bad_reports(sim, tmp_path, fault):
    driver = make(tmp_path, lvm_command_timeout=0.5)
    sim.inject("lvs", times=None, **fault)
    stats = driver.get_volume_stats(refresh=True)
    assert validate_stats(stats) == []
    assert stats["pools"][0]["backend_state"] == "down"
    assert stats["pools"][0]["free_capacity_gb"] == 0
    with pytest.raises(BackendUnavailable):
        driver.create_volume("volume-a", 1)
    sim.clear_faults()
    assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "up"


def test_lvs_crash_is_retried(sim, tmp_path):
    driver = make(tmp_path)
    sim.inject("lvs", exit_code=139)
    assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "up"


@pytest.mark.parametrize("name", ["-rf", "a;b", "$(x)", "a b", "..", "snapshot",
                                  "x_tdata", "a" * 128, "vol/../x", ""])
def test_bad_names_run_no_command(sim, tmp_path, name):
    driver = make(tmp_path)
    before = driver.executor.commands_run
    with pytest.raises(InvalidName):
        driver.create_volume(name, 1)
    assert driver.executor.commands_run == before


def test_sizes_and_existence(sim, tmp_path):
    driver = make(tmp_path)
    with pytest.raises(InvalidSize):
        driver.create_volume("volume-a", 0)
    driver.create_volume("volume-a", 2)
    with pytest.raises(AlreadyExists):
        driver.create_volume("volume-a", 1)
    with pytest.raises(InvalidSize, match="must exceed"):
        driver.extend_volume("volume-a", 1)
    with pytest.raises(VolumeNotFound):
        driver.extend_volume("nope", 3)
    driver.delete_volume("nope")


def test_clone_and_from_snapshot_count_as_volumes(sim, tmp_path):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 2)
    driver.create_snapshot("snap-a", "volume-a")
    driver.create_volume_from_snapshot("volume-b", "snap-a", 3)
    driver.create_cloned_volume("volume-c", "volume-a")
    pool = driver.get_volume_stats(refresh=True)["pools"][0]
    assert pool["provisioned_capacity_gb"] == 2 + 3 + 2
    assert pool["snapshot_capacity_gb"] == 2
    driver.delete_snapshot("snap-a")
    driver.delete_snapshot("snap-a")
    assert driver.get_volume_stats(refresh=True)["pools"][0]["snapshot_capacity_gb"] == 0


def test_clone_past_the_cap_is_refused(sim, tmp_path):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 12)
    with pytest.raises(CapacityExceeded):
        driver.create_cloned_volume("volume-b", "volume-a")
    assert "volume-b" not in names(sim)


def test_setup_errors(tmp_path):
    sim = LVMSimulator(state_file=str(tmp_path / "state.json"))
    sim.create_vg("dkvg", 4 * GiB)
    driver = make(tmp_path, lvm_create_thin_pool=False)
    with pytest.raises(SetupError, match="lvcreate -T -L <size> dkvg/pool"):
        driver.check_for_setup_error()
    sim.inject("segtypes", times=None, stdout="striped\nlinear\n",
               exit_code=0)
    with pytest.raises(SetupError, match="thin-provisioning-tools"):
        driver.check_for_setup_error()


def test_do_setup_creates_the_pool(tmp_path):
    sim = LVMSimulator(state_file=str(tmp_path / "state.json"))
    sim.create_vg("dkvg", 10 * GiB)
    driver = make(tmp_path, lvm_thin_pool_size_percent=50)
    driver.check_for_setup_error()
    assert 4.9 < driver.get_volume_stats()["pools"][0]["total_capacity_gb"] <= 5


def test_snapshot_and_copy_names_are_checked_by_lvm_itself(sim, tmp_path):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    driver.create_snapshot("snap-a", "volume-a")
    before = driver.executor.commands_run
    with pytest.raises(AlreadyExists):
        driver.create_snapshot("snap-a", "volume-a")
    assert driver.executor.commands_run - before == 3  # find, fresh read, lvcreate
    with pytest.raises(AlreadyExists):
        driver.create_cloned_volume("volume-a", "volume-a")
    with pytest.raises(AlreadyExists):
        driver.create_volume_from_snapshot("snap-a", "snap-a")
