"""ThinLVMDriver on the simulator: faults, process counts, validation."""

import pytest

from driver_kit import (AlreadyExists, CapacityExceeded, ConfigError, GiB, InvalidInput,
                        InvalidName, InvalidSize, SetupError, SnapshotNotFound, VolumeNotFound,
                        load_backend_config, validate_stats)
from driver_kit.config import make_conf
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
    driver = make(tmp_path)  # do_setup read the VG: pvs, lvs
    start = driver.executor.commands_run
    driver.get_volume_stats(refresh=True)
    assert driver.executor.commands_run - start == 0  # nothing changed: reused
    start = driver.executor.commands_run
    driver.create_volume("volume-a", 1)
    # the admission read reused; after the lvcreate, one lvs of that LV confirms its
    # marker (no metadata text is parsed here)
    assert driver.executor.commands_run - start == 2
    start = driver.executor.commands_run
    driver.get_volume_stats(refresh=True)
    assert driver.executor.commands_run - start == 1  # after the lvcreate: one lvs
    assert driver.vg.report_cache_stats.misses == 2


def test_create_confirmed_from_metadata_text_costs_no_process(sim, tmp_path):
    driver = make(tmp_path, lvm_metadata_parse=True)
    driver.get_volume_stats(refresh=True)
    start = driver.executor.commands_run
    driver.create_volume("volume-a", 1)
    driver.create_snapshot("snap-a", "volume-a")
    driver.create_cloned_volume("copy-a", "volume-a")
    # one lvcreate each: the markers were read from the metadata text
    assert [argv[0] for argv in driver.executor.history[-3:]] == ["lvcreate"] * 3
    assert driver.executor.commands_run - start == 3


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
    sim.run(["lvchange", "--addtag", "operator", "dkvg/pool"])  # the next read is an lvs
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
    # find (one lvs: the snapshot was made since), the fresh read (nothing changed:
    # reused), lvcreate, then LVM's word on that name after the failure
    assert driver.executor.commands_run - before == 3
    with pytest.raises(AlreadyExists):
        driver.create_cloned_volume("volume-a", "volume-a")
    with pytest.raises(AlreadyExists):
        driver.create_volume_from_snapshot("snap-a", "snap-a")


# -- deletes touch only the driver's volumes and snapshots ------------------------------


@pytest.fixture
def crowded(sim, tmp_path):
    """A volume and its snapshot, plus an operator's second pool with a volume in it."""
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    driver.create_snapshot("snap-a", "volume-a")
    sim.run(["lvcreate", "-T", "-L", "512m", "dkvg/other"])
    sim.run(["lvcreate", "-T", "-V", "1g", "-n", "other-vol", "dkvg/other"])
    assert names(sim) >= {"pool", "volume-a", "snap-a", "other", "other-vol"}
    return driver


@pytest.mark.parametrize("name, what", [
    ("pool", "the driver's thin pool"),
    ("other", "a thin pool"),
    ("snap-a", "a snapshot, not a volume"),
    ("other-vol", "thin pool 'other', not of 'pool'"),
])
def test_delete_volume_refuses_what_is_not_a_volume(sim, crowded, name, what):
    before = names(sim)
    with pytest.raises(InvalidInput, match="nothing was deleted") as err:
        crowded.delete_volume(name)
    assert what in str(err.value) and f"dkvg/{name}" in str(err.value)
    assert names(sim) == before
    assert crowded.backend_find_volume(name) is None


@pytest.mark.parametrize("name, what", [
    ("volume-a", "a volume, not a snapshot"),
    ("pool", "the driver's thin pool"),
    ("other-vol", "thin pool 'other'"),
])
def test_delete_snapshot_refuses_what_is_not_a_snapshot(sim, crowded, name, what):
    before = names(sim)
    with pytest.raises(InvalidInput, match="nothing was deleted") as err:
        crowded.backend_delete_snapshot(name)
    assert what in str(err.value)
    # the public delete is refused the same way: not taken for a missing snapshot
    with pytest.raises(InvalidInput, match="nothing was deleted"):
        crowded.delete_snapshot(name)
    assert names(sim) == before


def test_deletes_of_missing_lvs_and_their_process_counts(sim, crowded):
    with pytest.raises(VolumeNotFound):
        crowded.backend_delete_volume("nope")
    with pytest.raises(SnapshotNotFound):
        crowded.backend_delete_snapshot("nope")
    start = crowded.executor.commands_run
    crowded.delete_snapshot("snap-a")
    assert crowded.executor.commands_run - start == 1  # lvremove (the read reused)
    start = crowded.executor.commands_run
    crowded.delete_volume("volume-a")
    assert crowded.executor.commands_run - start == 2  # lvs, lvremove
    start = crowded.executor.commands_run
    crowded.delete_volume("volume-a")
    # lvs, then lvs of that name: LVM itself says it is gone
    assert crowded.executor.commands_run - start == 2
    assert names(sim) == {"pool", "other", "other-vol"}


# -- clean-up after failed creates -----------------------------------------------------


def test_timeout_after_lvcreate_made_the_lv_leaves_nothing(sim, tmp_path):
    driver = make(tmp_path, lvm_command_timeout=0.3)
    sim.inject("lvcreate", hang=True, fail_after_apply=True)
    with pytest.raises(BackendTimeout):
        driver.create_volume("volume-a", 1)
    assert "volume-a" not in names(sim)
    driver.create_volume("volume-a", 1)


@pytest.mark.parametrize("fault", [{"hang": True}, {"exit_code": 139}])
def test_failed_create_never_removes_an_lv_that_was_there_before(sim, tmp_path, fault):
    driver = make(tmp_path, lvm_command_timeout=0.3)
    driver.create_volume("volume-a", 1)
    sim.inject("lvcreate", **fault)  # fails before LVM's own "already exists" check
    with pytest.raises(BackendError):
        driver.create_volume("volume-a", 1)
    assert "volume-a" in names(sim)


@pytest.mark.parametrize("fault", [{"exit_code": 5}, {"hang": True}])
@pytest.mark.parametrize("copy", ["clone", "from_snapshot"])
def test_failed_lvextend_of_a_bigger_copy_removes_the_copy(sim, tmp_path, fault, copy):
    driver = make(tmp_path, lvm_command_timeout=0.3)
    driver.create_volume("volume-a", 1)
    driver.create_snapshot("snap-a", "volume-a")
    sim.inject("lvextend", **fault)
    with pytest.raises(BackendError):
        if copy == "clone":
            driver.create_cloned_volume("volume-b", "volume-a", 2)
        else:
            driver.create_volume_from_snapshot("volume-b", "snap-a", 2)
    assert names(sim) == {"pool", "volume-a", "snap-a"}


# -- setup and configuration -------------------------------------------------------------


def test_do_setup_process_counts(tmp_path):
    sim = LVMSimulator(state_file=str(tmp_path / "state.json"))
    sim.create_vg("dkvg", 10 * GiB)
    # empty VG: pvs, lvs, the vgs an LV-less report needs, lvcreate of the pool
    assert make(tmp_path).executor.commands_run == 4
    sim.run(["lvremove", "--force", "dkvg/pool"])
    sim.run(["lvcreate", "-L", "1g", "-n", "thick-a", "dkvg"])
    # a new driver learns the PVs first: pvs, lvs, lvcreate
    assert make(tmp_path).executor.commands_run == 3
    assert make(tmp_path).executor.commands_run == 2  # pvs, lvs: the pool is there


def test_do_setup_creates_the_simulators_vg_then_the_pool(tmp_path):
    driver = make(tmp_path, lvm_simulator_vg_size_gb=4)
    # pvs, lvs (no VG), pvs, lvs, vgs (VG without LVs), lvcreate
    assert driver.executor.commands_run == 6
    driver.check_for_setup_error()
    assert 3.5 < driver.get_volume_stats()["pools"][0]["total_capacity_gb"] <= 3.8


def test_do_setup_on_a_missing_vg_leaves_it_to_check_for_setup_error(tmp_path):
    sim = LVMSimulator(state_file=str(tmp_path / "state.json"))
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides={
        "volume_group": "dkvg", "lock_path": str(tmp_path / "locks")}),
        executor=sim.executor())
    driver.do_setup()
    assert driver.executor.commands_run == 2  # pvs, lvs
    with pytest.raises(SetupError, match="vgcreate dkvg"):
        driver.check_for_setup_error()


def backend_conf(tmp_path, line):
    path = tmp_path / "kit.conf"
    path.write_text(f"[DEFAULT]\nenabled_backends = fast\n[fast]\nlvm_backend = simulator\n"
                    f"lvm_simulator_state_file = {tmp_path / 'state.json'}\n{line}\n")
    return load_backend_config(make_conf([str(path)]), "fast", extra_opts=LVM_OPTS)


def test_thin_pool_size_percent_of_100_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="lvm_thin_pool_size_percent"):
        ThinLVMDriver(backend_conf(tmp_path, "lvm_thin_pool_size_percent = 100"))
    with pytest.raises(ConfigError, match="lvm_thin_pool_size_percent = 100"):
        load_backend_config(extra_opts=LVM_OPTS,
                            overrides={"lvm_thin_pool_size_percent": 100})
    driver = ThinLVMDriver(backend_conf(tmp_path, "lvm_thin_pool_size_percent = 99"))
    assert driver.pool_size_percent == 99


def test_lvm_conf_file_must_be_named_lvm_conf(tmp_path):
    bad = str(tmp_path / "dk-lvm.conf")
    with pytest.raises(ConfigError) as err:
        ThinLVMDriver(backend_conf(tmp_path, f"lvm_conf_file = {bad}"))
    assert f"[fast] lvm_conf_file = {bad!r}" in str(err.value)
    driver = ThinLVMDriver(backend_conf(tmp_path, f"lvm_conf_file = {tmp_path / 'lvm.conf'}"))
    driver.executor.runner.create_vg("cinder-volumes", 4 * GiB)
    driver.do_setup()
    assert driver.executor.runner.last_env["LVM_SYSTEM_DIR"] == str(tmp_path)
