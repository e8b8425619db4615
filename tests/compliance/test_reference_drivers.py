"""Reference users of the harness pass every check: the unit tests' memory driver, the
contrib sparse-file and shared-capacity drivers and the LVM driver on its simulator,
with fixed ratios and 'auto', one pool and several, and the unusual but legal set-ups
of real arrays (a 16 GiB allocation unit, a backend serving some of an array's pools
beside other tenants' volumes, a thick-only pool, thin+thick pools with data written);
hooks are found for a vendor's subclass defined in another module."""

import dataclasses
import json
import os
import types

import pytest

from contrib.shared_pool_driver import DiskGroupArray
from driver_kit import GiB, MiB, load_backend_config
from driver_kit.compliance import (CATALOGUE, REQUIRED_HOOKS, ComplianceHooks, DriverSpec,
                                   find_hooks, register_hooks, run_checks)
from driver_kit.loading import DEFAULT_BACKEND, default_overrides
from tests.compliance.drivers import (HAND_WRITTEN_OPERATIONS_HOOKS, SNAP_MEMORY_HOOKS,
                                      HandWrittenOperations, SnapMemoryDriver, memory_factory,
                                      shared_config, sparse_config)
from tests.compliance.vendor import VendorSparseDriver
from tests.unit.memdriver import MemoryDriver

ALL = {c.id for c in CATALOGUE} | {"driver.setup"}
#: a memory array is not shared with the child processes racing for it (forked from the
#: factory): the check skips, saying so
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
    # a missing operation is reported as such, never as a lack of room
    assert reasons["ops.copy-readback"].startswith(
        "not supported by the driver: a 2 GiB clone of a 1 GiB volume on pool 'mem' (thin) "
        "(NotImplementedError")
    if ratio == "2.0":
        assert "not shared between processes" in reasons["admission.parallel-processes"]
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
    """Two pools on one disk group, thin+thick and thick-only, with data written."""
    spec = DriverSpec(config_files=(shared_config(tmp_path, **options),))
    reasons = passes(run_checks(spec=spec, timeout_s=30), NO_PATH)
    assert "pool 'bulk' (thick)" in reasons["admission.create-over-cap"]
    # used space is followed where writes move it, and agrees where they cannot
    assert "pool 'fast' (thin): 17 states agree" in reasons["data.used-capacity"]
    assert "pool 'fast' (thick): used agrees" in reasons["data.used-capacity"]
    assert "allocated when made" in reasons["data.used-capacity"]
    assert json.loads((tmp_path / "array" / "array.json").read_text())["volumes"] == {}


@pytest.mark.parametrize("options", [{}, {"max_over_subscription_ratio": "auto",
                                         "over_provisioning_calculation": "cinder",
                                         "reserved_percentage": 5}],
                         ids=["ratio-2", "auto-cinder-calculation-reserved"])
def test_an_array_with_16_gib_allocation_units_passes_every_check(tmp_path, options):
    """It lists a volume asked for as 1 GiB at 16 GiB: the checks size in whole units."""
    spec = DriverSpec(config_files=(shared_config(
        tmp_path, shared_capacity_gb=1024, shared_allocation_unit_mb=16384,
        shared_round_sizes=True, **options),))
    reasons = passes(run_checks(spec=spec, timeout_s=60), NO_PATH)
    assert "pool 'fast' (thin): 16 -> 48 -> 80 GiB" in reasons["ops.extend-readback"]
    assert json.loads((tmp_path / "array" / "array.json").read_text())["volumes"] == {}


def _other_tenant_volume(array_dir):
    """A 5 GiB thick volume of another backend on the array's pool 'bulk'."""
    array = DiskGroupArray(str(array_dir), capacity_bytes=100 * GiB, unit_bytes=768 * MiB)
    os.makedirs(array_dir)
    array.create("tenant-b-lun", pool="bulk", size_bytes=5 * GiB, thin=False)
    return array


@pytest.mark.parametrize("served", ["fast", "bulk"], ids=["thin-thick-pool", "thick-only"])
def test_a_backend_serving_some_of_the_arrays_pools_passes_every_check(tmp_path, served):
    """The truth lists every pool of the array, the report only those served; another
    tenant's volume on the disk group counts in provisioned (and total_volumes)."""
    _other_tenant_volume(tmp_path / "array")
    spec = DriverSpec(config_files=(shared_config(tmp_path, shared_pools=served),))
    reasons = passes(run_checks(spec=spec, timeout_s=30), NO_PATH)
    assert reasons["truth.pools"].startswith("the pools the backend serves, up")
    assert f"pool {served!r}" in reasons["admission.create-over-cap"]
    left = json.loads((tmp_path / "array" / "array.json").read_text())["volumes"]
    assert list(left) == ["tenant-b-lun"]


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


class PlainConfiguration(SnapMemoryDriver):
    """Its configuration is a plain object (not the kit's dataclass) that cannot be
    copied with a shorter stats_timeout."""

    def __init__(self, configuration=None, **kwargs):
        super().__init__(configuration, **kwargs)
        conf = self.configuration
        self.configuration = types.SimpleNamespace(
            get=conf.get, **{f.name: getattr(conf, f.name) for f in dataclasses.fields(conf)})


def test_a_slow_backend_check_that_would_outlast_the_run_is_skipped_saying_why(tmp_path):
    report = run_checks(memory_factory(tmp_path, PlainConfiguration), hooks=SNAP_MEMORY_HOOKS,
                        only=["failclosed.slow-backend"], timeout_s=20)
    slow = report.results[-1]
    assert (slow.status, slow.reason) == ("skipped", (
        "stats_timeout = 120 s cannot be shortened (the configuration of "
        "PlainConfiguration is not the kit's): a backend slower than it would outlast "
        "the check"))
