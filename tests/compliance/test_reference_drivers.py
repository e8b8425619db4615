"""Reference users of the harness pass every check: the unit tests' memory driver,
the contrib sparse-file driver and the LVM driver on its simulator."""

import math
import os

from driver_kit import load_backend_config
from driver_kit.loading import DEFAULT_BACKEND, default_overrides
from driver_kit.compliance import CATALOGUE, DriverSpec, run_checks
from tests.compliance.drivers import (HAND_WRITTEN_OPERATIONS_HOOKS, LVM_HOOKS, MEMORY_HOOKS,
                                      HandWrittenOperations, SnapMemoryDriver, memory_factory,
                                      sparse_config)
from tests.unit.memdriver import MemoryDriver

ALL = {c.id for c in CATALOGUE} | {"driver.setup"}


def test_memory_driver_passes(tmp_path):
    report = run_checks(memory_factory(tmp_path, MemoryDriver), hooks=MEMORY_HOOKS,
                        timeout_s=20)
    assert report.by_status("failed", "errored") == set()
    skipped = {r.id: r.reason for r in report.results if r.status == "skipped"}
    assert set(skipped) == {"provisioned.excludes-snapshots", "admission.parallel-processes"}
    assert "does not support snapshots" in skipped["provisioned.excludes-snapshots"]
    assert report.profile["snapshots_supported"] is False
    assert report.exit_code == 0


def test_a_driver_not_built_on_the_kit_passes_with_the_room_worked_out(tmp_path):
    """Its pools report neither capacity factors nor max_volume_size_gb, so the
    harness works out the room from each pool's numbers, as the kit would."""
    config = load_backend_config(overrides={"lock_path": str(tmp_path / "locks"),
                                            "max_over_subscription_ratio": "2.0",
                                            "reserved_percentage": 10})
    made = []

    def factory():
        made.append(HandWrittenOperations(SnapMemoryDriver(config)))
        return made[-1]
    report = run_checks(factory, hooks=HAND_WRITTEN_OPERATIONS_HOOKS, timeout_s=20)
    assert report.by_status("failed", "errored") == set(), [
        (r.id, r.status, r.reason) for r in report.results if r.status != "passed"]
    assert report.by_status("skipped") == {"admission.parallel-processes"}
    pool = made[0].get_volume_stats(refresh=True)["pools"][0]
    assert "capacity_factors" not in pool and "max_volume_size_gb" not in pool
    # the room the harness worked out is the kit's own figure: (100 - 10) * 2.0 GiB
    kit_pool = made[0].inner.get_volume_stats(refresh=True)["pools"][0]
    [thin] = kit_pool["capacity_factors"]
    room = math.floor(thin["virtual_free_capacity"])
    assert room == kit_pool["max_volume_size_gb"] == 180
    reasons = {r.id: r.reason for r in report.results}
    assert reasons["admission.create-over-cap"].startswith(
        f"a create of {room + 1} GiB, past the over-subscription cap "
        f"(max_volume_size_gb {room}): CapacityExceeded")
    assert f" with room for {room} GiB: " in reasons["admission.parallel-threads"]


def test_sparse_file_driver_passes_every_check(tmp_path):
    spec = DriverSpec(driver="contrib.sparse_file_driver:SparseFileDriver",
                      config_files=(sparse_config(tmp_path),))
    report = run_checks(spec=spec, timeout_s=30)  # hooks: the module's COMPLIANCE_HOOKS
    assert report.by_status("passed") == ALL, [
        (r.id, r.status, r.reason) for r in report.results if r.status != "passed"]
    assert os.listdir(tmp_path / "pool") == [".snapshots"]  # nothing left behind
    assert os.listdir(tmp_path / "pool" / ".snapshots") == []
    profile = report.profile
    assert profile["thin_provisioning"] is True and profile["thick_provisioning"] is False
    assert profile["ratio_enforced"] == {"create": True, "extend": True}
    assert profile["parallel_safe"] == {"threads": True, "processes": True}
    assert profile["out_of_band_counted"] and profile["snapshots_apart"]
    assert profile["snapshot_capacity_reported"] is True


def test_lvm_driver_on_the_simulator_passes_every_check(tmp_path):
    spec = DriverSpec(backend=DEFAULT_BACKEND,
                      overrides=default_overrides(str(tmp_path / "simulator.json")))
    report = run_checks(spec=spec, hooks=LVM_HOOKS, timeout_s=30)
    assert report.by_status("passed") == ALL, [
        (r.id, r.status, r.reason) for r in report.results if r.status != "passed"]


def test_sparse_snapshot_copies_the_data_and_keeps_the_holes(tmp_path):
    from contrib.sparse_file_driver import SparseFileDriver
    from driver_kit import load_backend_config
    driver = SparseFileDriver(load_backend_config(
        extra_opts=SparseFileDriver.OPTIONS, overrides={
            "sparse_pool_dir": str(tmp_path / "pool"), "lock_path": str(tmp_path / "locks")}))
    driver.do_setup()
    driver.create_volume("vol", 1)
    with open(driver.path("vol"), "r+b") as image:
        image.seek(512 * 1024 * 1024)
        image.write(b"written")
    driver.create_snapshot("snap", "vol")
    copy = driver.path("snap", snapshot=True)
    assert os.stat(copy).st_size == 1024 ** 3
    assert os.stat(copy).st_blocks * 512 < 1024 ** 2  # sparse, like its origin
    with open(copy, "rb") as image:
        image.seek(512 * 1024 * 1024)
        assert image.read(7) == b"written"
    pool = driver.get_volume_stats(refresh=True)["pools"][0]
    assert pool["provisioned_capacity_gb"] == 1 and pool["snapshot_capacity_gb"] == 1
