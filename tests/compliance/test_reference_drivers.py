"""Reference users of the harness pass every check: the unit tests' memory driver, the
contrib sparse-file and shared-capacity drivers and the LVM driver on its simulator,
with fixed ratios and 'auto', one pool and several; hooks are found for a vendor's
subclass defined in another module."""

import json
import os

import pytest

from driver_kit import load_backend_config
from driver_kit.compliance import (CATALOGUE, REQUIRED_HOOKS, ComplianceHooks, DriverSpec,
                                   find_hooks, register_hooks, run_checks)
from driver_kit.loading import DEFAULT_BACKEND, default_overrides
from tests.compliance.drivers import (HAND_WRITTEN_OPERATIONS_HOOKS, SNAP_MEMORY_HOOKS,
                                      HandWrittenOperations, SnapMemoryDriver, memory_factory,
                                      shared_config, sparse_config)
from tests.compliance.vendor import VendorSparseDriver
from tests.unit.memdriver import MemoryDriver

ALL = {c.id for c in CATALOGUE} | {"driver.setup"}
#: a driver given as a factory cannot be rebuilt in another process
NO_SPEC = {"admission.parallel-processes"}
#: what a driver without snapshots or copies cannot be tested on
NO_COPIES = {"provisioned.excludes-snapshots", "admission.snapshot-over-cap",
             "admission.copy-over-cap", "ops.copy-readback", "ops.snapshot-existing",
             "ops.delete-snapshot", "ops.delete-missing-snapshot"}
#: what needs the optional hooks that reach the data path, fail a write or put strays
NO_DATA = {"data.used-capacity", "data.snapshot-copy", "failclosed.failed-write",
           "provisioned.ignores-strays"}
#: a driver that gives no local device path
NO_PATH = {"ops.device-path"}


def passes(report, skipped=frozenset()):
    problems = [(r.id, r.status, r.reason) for r in report.results
                if r.status != "passed" and r.id not in skipped]
    assert report.by_status("passed") == ALL - set(skipped), problems
    assert report.exit_code == 0
    return {r.id: r.reason for r in report.results}


@pytest.mark.parametrize("ratio", ["2.0", "auto"])
def test_memory_driver_passes(tmp_path, ratio):
    report = run_checks(memory_factory(tmp_path, MemoryDriver,
                                       max_over_subscription_ratio=ratio), timeout_s=20)
    # under 'auto' the cap of a pool nothing is written to grows with every create:
    # threads cannot be made to race for it
    races = {"admission.parallel-threads"} if ratio == "auto" else set()
    reasons = passes(report, NO_SPEC | NO_COPIES | NO_DATA | NO_PATH | races)
    assert "does not support snapshots" in reasons["provisioned.excludes-snapshots"]
    assert report.profile["snapshots_supported"] is False
    if ratio == "auto":
        assert "grows with every create" in reasons["truth.ratio"]


def test_memory_driver_with_snapshots_and_reserved_space_passes(tmp_path):
    reasons = passes(run_checks(memory_factory(tmp_path, reserved_percentage=10),
                                timeout_s=20), NO_SPEC | NO_PATH)
    # the cap is (100 - 10) * 2.0 GiB
    assert reasons["admission.create-over-cap"].startswith("a 181 GiB create on pool 'mem'")


def test_a_driver_not_built_on_the_kit_passes_with_its_settings_from_the_report(tmp_path):
    """Its pools report neither capacity factors nor max_volume_size_gb and it shows no
    configuration: the harness takes the ratio and reserved space from its report."""
    config = load_backend_config(overrides={"lock_path": str(tmp_path / "locks"),
                                            "max_over_subscription_ratio": "2.0",
                                            "reserved_percentage": 10})
    made = []

    def factory():
        made.append(HandWrittenOperations(SnapMemoryDriver(config), settings=False))
        return made[-1]
    # without a configuration, a slow backend cannot be timed against its stats_timeout
    report = run_checks(factory, hooks=HAND_WRITTEN_OPERATIONS_HOOKS, timeout_s=20,
                        only=["stats.*", "truth.*", "admission.*", "ops.*"])
    reasons = passes(report, NO_SPEC | NO_PATH | (ALL - {c.id for c in report.results}))
    pool = made[0].get_volume_stats(refresh=True)["pools"][0]
    assert "capacity_factors" not in pool and "max_volume_size_gb" not in pool
    assert reasons["admission.create-over-cap"].startswith("a 181 GiB create")


def test_sparse_file_driver_passes_every_check(tmp_path):
    spec = DriverSpec(driver="contrib.sparse_file_driver:SparseFileDriver",
                      config_files=(sparse_config(tmp_path),))
    report = run_checks(spec=spec, timeout_s=30)  # hooks: the module's COMPLIANCE_HOOKS
    # it has no copies, and no request counter (its backend is the file system)
    passes(report, {"admission.copy-over-cap", "ops.copy-readback", "hooks.calls-counted"})
    assert os.listdir(tmp_path / "pool") == [".snapshots"]  # nothing left behind
    assert os.listdir(tmp_path / "pool" / ".snapshots") == []
    profile = report.profile
    assert profile["thin_provisioning"] is True and profile["thick_provisioning"] is False
    assert profile["parallel_safe"] == {"threads": True, "processes": True}
    assert profile["out_of_band_counted"] and profile["snapshots_apart"]
    assert profile["snapshot_capacity_reported"] is True
    assert profile["hooks"]["read_truth"]["found_in"] == \
        "contrib.sparse_file_driver.SparseFileDriver"


def test_a_vendor_subclass_in_another_module_inherits_the_hooks(tmp_path):
    spec = DriverSpec(driver="tests.compliance.vendor:VendorSparseDriver",
                      config_files=(sparse_config(tmp_path),))
    report = run_checks(spec=spec, only=["hooks.required", "hooks.independent", "truth.*",
                                         "failclosed.*"], timeout_s=30)
    assert report.by_status("passed") == {c.id for c in report.results}
    hooks, origin = find_hooks(VendorSparseDriver)
    assert hooks.missing(REQUIRED_HOOKS) == []
    assert origin["read_truth"] == "contrib.sparse_file_driver.SparseFileDriver"


def test_registered_hooks_apply_to_subclasses_nearest_first():
    class Base(MemoryDriver):
        pass

    class Vendor(Base):
        COMPLIANCE_HOOKS = ComplianceHooks(backend_calls=lambda driver: 0)

    register_hooks(Base, ComplianceHooks(read_truth=SNAP_MEMORY_HOOKS.read_truth))
    hooks, origin = find_hooks(Vendor)
    assert hooks.read_truth is SNAP_MEMORY_HOOKS.read_truth  # registered on Base
    assert origin["backend_calls"].endswith("Vendor")
    assert origin["break_backend"] == "tests.unit.memdriver.MemoryDriver"  # the module's
    with pytest.raises(TypeError, match="ComplianceHooks"):
        register_hooks(Base, object())


def test_a_driver_without_hooks_is_not_certified(tmp_path):
    report = run_checks(memory_factory(tmp_path), hooks=ComplianceHooks(), timeout_s=20)
    failed = {r.id: r.reason for r in report.results if r.status == "failed"}
    assert set(failed) == {"hooks.required"} and report.exit_code == 1
    assert "not certified" in failed["hooks.required"]
    assert all(name in failed["hooks.required"] for name in REQUIRED_HOOKS)
    skipped = {r.id for r in report.results if r.status == "skipped"}
    assert {c.id for c in CATALOGUE if c.id.startswith("truth.")} <= skipped


@pytest.mark.parametrize("options", [{}, {"max_over_subscription_ratio": "auto"},
                                     {"reserved_percentage": 5,
                                      "shared_allocation_unit_mb": 1000}],
                         ids=["ratio-2", "auto", "reserved-and-odd-units"])
def test_shared_pool_driver_passes_every_check(tmp_path, options):
    spec = DriverSpec(config_files=(shared_config(tmp_path, **options),))
    reasons = passes(run_checks(spec=spec, timeout_s=30), NO_DATA | NO_PATH)
    assert "pool 'bulk' (thick)" in reasons["admission.create-over-cap"]
    assert json.loads((tmp_path / "array" / "array.json").read_text())["volumes"] == {}


@pytest.mark.parametrize("ratio", ["20.0", "auto"])
def test_lvm_driver_on_the_simulator_passes_every_check(tmp_path, ratio):
    spec = DriverSpec(backend=DEFAULT_BACKEND, overrides={
        **default_overrides(str(tmp_path / "simulator.json")),
        "max_over_subscription_ratio": ratio})
    # hooks: the driver module's; the simulator has no data path
    reasons = passes(run_checks(spec=spec, timeout_s=30), NO_DATA)
    # the thin pool and the thick pool (the VG's free extents) are both tested
    assert "pool 'dkvg' (thick)" in reasons["ops.create-readback"]
    assert "pool 'pool' (thin)" in reasons["ops.create-readback"]


def test_sparse_snapshot_copies_the_data_and_keeps_the_holes(tmp_path):
    from contrib.sparse_file_driver import SparseFileDriver
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



class OpensOneFileOnce(SnapMemoryDriver):
    """A correct driver in a busy process: another part of it opens a file (a log, a
    socket) while the harness measures, twice in all, then no more."""

    opened: list = []

    def backend_create_volume(self, name, size_gb, **kwargs):
        super().backend_create_volume(name, size_gb, **kwargs)
        if len(OpensOneFileOnce.opened) < 2:
            OpensOneFileOnce.opened.append(open(os.devnull, "rb"))


def test_files_opened_a_few_times_by_another_part_of_the_process_are_no_leak(tmp_path):
    try:
        report = run_checks(memory_factory(tmp_path, OpensOneFileOnce),
                            hooks=SNAP_MEMORY_HOOKS, only=["resources.*"], timeout_s=30)
        status = {r.id: r.status for r in report.results}
        assert status["resources.no-fd-leak"] == "passed"
    finally:
        for handle in OpensOneFileOnce.opened:
            handle.close()
