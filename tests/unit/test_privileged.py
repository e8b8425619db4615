"""The driver's privileged daemon, started for real through privsep-helper (a separate
root process, tests/unit/privsep_lab.py) on the simulator: the driver's whole
lifecycle through it, its fast reads, and the refusal of every request outside the
configured backend, with nothing changed on the decoy VG."""

from __future__ import annotations

import json
import os

import pytest

from driver_kit import GiB
from lvm_driver.commands import lvm_argv
from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.privileged import PrivilegeRefused, commands, devices
from lvm_driver.privsep_runner import PrivsepRunner
from lvm_driver.read import mda
from lvm_driver.run.executor import LVMAlreadyExistsError, LVMExecutor, LVMNotFoundError
from tests.unit.privsep_lab import POOL, SECTION, VG, close_lab, make_lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = make_lab(tmp_path_factory.mktemp("privsep"))
    yield lab
    close_lab()


@pytest.fixture(scope="module")
def driver(lab):
    driver = lab.driver()
    driver.do_setup()
    driver.check_for_setup_error()
    return driver


def decoy(lab) -> str:
    """The decoy VG as the operator sees it (must never change)."""
    return json.dumps(lab.sim.state()["vgs"]["othervg"], sort_keys=True)


def test_the_lifecycle_runs_through_the_daemon(lab, driver):
    before = decoy(lab)
    assert isinstance(driver.executor.runner, PrivsepRunner)
    driver.create_volume("volume-a", 1)
    driver.create_volume("thick-a", 1, extra_specs={"provisioning:type": "thick"})
    driver.extend_volume("volume-a", 2)
    driver.create_snapshot("snap-a", "volume-a")
    driver.create_volume_from_snapshot("from-snap", "snap-a", 3)
    driver.create_cloned_volume("clone-a", "volume-a")
    driver.revert_to_snapshot("volume-a", "snap-a")
    driver.unmanage("thick-a")
    driver.manage_existing("managed-a", {"source-name": "thick-a"})
    assert {"volume-a", "snap-a", "from-snap", "clone-a", "managed-a"} <= lab.lv_names()
    for name in ("managed-a", "from-snap", "clone-a"):
        driver.delete_volume(name)
    driver.delete_snapshot("snap-a")
    driver.delete_volume("volume-a")
    assert lab.lv_names() == {POOL}
    assert lab.sim.wipes() == [{"device": "/dev/dkvg/managed-a", "bytes": GiB}]
    pools = driver.get_volume_stats(refresh=True)["pools"]
    assert [p["pool_name"] for p in pools] == [POOL, VG]
    assert decoy(lab) == before


def test_a_refresh_after_an_operators_change_starts_no_lvm_process(lab, driver):
    driver.get_volume_stats(refresh=True)
    lab.sim.run(["lvcreate", "-T", "-V", "1g", "-n", "by-operator", f"{VG}/{POOL}"])
    for command in ("lvs", "pvs", "vgs", "lvm"):  # anything LVM would run now fails
        lab.sim.inject(command, times=None)
    try:
        started, stats = driver.executor.commands_run, driver.vg.report_cache_stats
        pool = driver.get_volume_stats(refresh=True)["pools"][0]
        assert driver.executor.commands_run == started
        assert driver.vg.report_cache_stats.parsed == stats.parsed + 1
        assert pool["provisioned_capacity_gb"] == 1
        assert pool["backend_state"] == "up"
    finally:
        lab.sim.clear_faults()
        lab.sim.run(["lvremove", "-f", f"{VG}/by-operator"])


BAD_NAMES = ["../x", "-x", "a\nb", "a/b", ".", "..", "", "x\0", "othervg/precious", 7, None]
BAD_SIZES = [0, -512, 1.5, 2 ** 63 - 1, 2 ** 64 - 1, True, "1073741824", 1000, None]
CALLS = {
    "create_thin": lambda **k: commands.create_thin(
        **{"section": SECTION, "name": "v", "size_bytes": GiB, "pool": POOL, "tags": [],
           "timeout_s": 30, **k}),
    "create_thick": lambda **k: commands.create_thick(
        **{"section": SECTION, "name": "v", "size_bytes": GiB, "tags": [], "timeout_s": 30,
           **k}),
    "create_snapshot": lambda **k: commands.create_snapshot(
        **{"section": SECTION, "name": "s", "origin": "v", "tags": [], "activate": False,
           "timeout_s": 30, **k}),
    "extend": lambda **k: commands.extend(
        **{"section": SECTION, "name": "v", "size_bytes": GiB, "timeout_s": 30, **k}),
    "remove": lambda **k: commands.remove(
        **{"section": SECTION, "name": "v", "timeout_s": 30, **k}),
    "rename": lambda **k: commands.rename(
        **{"section": SECTION, "old": "v", "new": "w", "timeout_s": 30, **k}),
    "activate": lambda **k: commands.activate(
        **{"section": SECTION, "name": "v", "timeout_s": 30, **k}),
    "deactivate": lambda **k: commands.deactivate(
        **{"section": SECTION, "name": "v", "timeout_s": 30, **k}),
    "merge": lambda **k: commands.merge(
        **{"section": SECTION, "name": "v", "timeout_s": 30, **k}),
    "add_tags": lambda **k: commands.add_tags(
        **{"section": SECTION, "name": "v", "tags": ["driver_kit_volume"], "timeout_s": 30,
           **k}),
    "zero": lambda **k: devices.zero(
        **{"section": SECTION, "name": "v", "nbytes": GiB, "timeout_s": 30, **k}),
}
NAMED = {"create_thin": "name", "create_thick": "name", "create_snapshot": "origin",
         "extend": "name", "remove": "name", "rename": "old", "activate": "name",
         "deactivate": "name", "merge": "name", "add_tags": "name", "zero": "name"}
SIZED = {"create_thin": "size_bytes", "create_thick": "size_bytes", "extend": "size_bytes",
         "zero": "nbytes"}


def refused(lab, call, **kwargs) -> None:
    before = json.dumps(lab.sim.state(), sort_keys=True)
    with pytest.raises(PrivilegeRefused):
        call(**kwargs)
    assert json.dumps(lab.sim.state(), sort_keys=True) == before


@pytest.mark.parametrize("operation", sorted(NAMED))
def test_every_write_refuses_bad_names(lab, driver, operation):
    for name in BAD_NAMES:
        refused(lab, CALLS[operation], **{NAMED[operation]: name})


@pytest.mark.parametrize("operation", sorted(SIZED))
def test_every_sized_write_refuses_bad_sizes(lab, driver, operation):
    for size in BAD_SIZES:
        refused(lab, CALLS[operation], **{SIZED[operation]: size})


@pytest.mark.parametrize("operation", sorted(CALLS))
def test_every_write_refuses_sections_that_are_not_served(lab, driver, operation):
    for section in ("nosuch", "notours", "disabled", "DEFAULT", "backend_defaults",
                    "badconf", "lvm1]\n[x", ""):
        refused(lab, CALLS[operation], section=section)


def test_the_caller_names_no_vg_config_dir_env_or_option(lab, driver):
    for extra in ({"vg": "othervg"}, {"lvm_system_dir": "/tmp/x"}, {"env": {"A": "1"}},
                  {"config": "global/thin_check_executable=/tmp/x"}):
        with pytest.raises(TypeError):
            CALLS["remove"](**extra)
    runner = driver.executor.runner
    for argv in (["lvremove", "--force", "othervg/precious"],
                 ["lvremove", "--force", "--config", "global{}", "dkvg/v"],
                 ["lvs", "--config", "log/file=/etc/passwd", "dkvg"],
                 ["vgremove", "-f", VG], ["pvcreate", "/dev/sdb"], ["lvm"],
                 ["dd", "if=/dev/zero", "of=/dev/othervg/precious", "count=512", "bs=1M",
                  "iflag=count_bytes", "oflag=direct", "conv=fdatasync"]):
        with pytest.raises(PrivilegeRefused):
            runner(argv, {"LVM_SYSTEM_DIR": "/tmp/x"}, 10.0)


def test_pools_and_tags_must_be_the_backends(lab, driver):
    refused(lab, CALLS["create_thin"], pool="otherpool")
    refused(lab, CALLS["create_thin"], tags=["mytag"])
    refused(lab, CALLS["create_thin"], tags="driver_kit_volume")
    refused(lab, CALLS["add_tags"], tags=["driver_kit_request_xyz"])
    for operation in ("remove", "deactivate", "merge", "zero"):
        refused(lab, CALLS[operation], name=POOL)
    refused(lab, CALLS["rename"], new=POOL)
    refused(lab, CALLS["create_snapshot"], origin=POOL)
    refused(lab, lambda **k: commands.create_thin_pool(
        section=SECTION, name="pool2", size_bytes=GiB, metadata_size_bytes=None,
        timeout_s=30))
    refused(lab, lambda **k: commands.lvm_query(section=SECTION, what="pvcreate",
                                                timeout_s=30))
    for timeout in (0, -1, 1e9, float("nan"), "10"):
        refused(lab, CALLS["remove"], timeout_s=timeout)


def test_the_pv_report_lists_the_backends_pvs_only(lab, driver):
    reply = commands.pv_report(SECTION, timeout_s=30)
    rows = json.loads(reply["stdout"])["report"][0]["pv"]
    assert [row["vg_name"] for row in rows] == [VG]


def test_block_reads_only_inside_the_backends_pv_headers(lab, driver):
    pv = lab.sim.pv_path(VG)
    identity, head = driver.executor.runner.read_block(pv, 0, mda.FIRST_READ_BYTES)
    label = mda.parse_label(head)
    assert identity == mda.identity_of(os.stat(pv))
    start, size = label.metadata_areas[0]
    area = driver.executor.runner.read_block(pv, start, size)[1]
    assert mda.parse_mda_header(area[:512]).start == start  # a sparse file ends early
    decoy_pv = lab.sim.pv_path("othervg")
    link = lab.root / "link-to-pv"
    link.symlink_to(pv)
    for path, offset, length in [
            (pv, start + size, 4096),                  # the data area
            (pv, start + size - 512, 1024),            # straddling the end of the area
            (pv, 0, devices.MAX_READ_BYTES + 1), (pv, -4096, 4096), (pv, 0, 0),
            (decoy_pv, 0, 4096), ("/etc/shadow", 0, 4096), ("/dev/./sda", 0, 4096),
            (str(link), 0, 4096), (pv.replace("/", "//", 1), 0, 4096),
            (f"{lab.root}/../{lab.root.name}/state.json.pv-{VG}", 0, 4096),
            ("relative", 0, 4096)]:
        with pytest.raises(PrivilegeRefused):
            devices.read_pv_block(SECTION, path, offset, length)
        with pytest.raises(PermissionError):
            driver.executor.runner.read_block(path, offset, length)


def test_pool_status_of_the_configured_pool_only(lab, driver):
    assert driver.executor.runner.thin_pool_status(VG, POOL).mode == "rw"
    for vg, pool in ((VG, "otherpool"), ("othervg", "otherpool"), (VG, "../x")):
        with pytest.raises(PermissionError):
            driver.executor.runner.thin_pool_status(vg, pool)
    with pytest.raises(PrivilegeRefused):
        devices.thin_pool_status(SECTION, "otherpool")


def test_a_refresh_with_nothing_changed_is_one_round_trip(lab, driver, monkeypatch):
    driver.get_volume_stats(refresh=True)
    calls = []
    call = PrivsepRunner._call

    def counted(self, entrypoint, *args, **kwargs):
        calls.append(entrypoint)
        return call(self, entrypoint, *args, **kwargs)

    monkeypatch.setattr(PrivsepRunner, "_call", counted)
    hits = driver.vg.report_cache_stats.hits
    pool = driver.get_volume_stats(refresh=True)["pools"][0]
    assert driver.vg.report_cache_stats.hits == hits + 1
    assert calls == [devices.read_refresh]  # the PV headers and the pool status together
    assert pool["backend_state"] == "up"


def test_a_failed_batch_of_refresh_reads_is_read_one_by_one_and_counted(
        lab, driver, monkeypatch):
    """A daemon refusing the whole batch (as it refuses one past its caps) costs the
    refresh its single round trip, not its answer: the reads go one by one."""
    driver.get_volume_stats(refresh=True)
    runner = driver.executor.runner
    failures = runner.batch_failures

    def refused(*args, **kwargs):
        raise PrivilegeRefused("a batch of refresh reads is at most 64 PV reads")

    monkeypatch.setattr(devices, "read_refresh", refused)
    calls = []
    call = PrivsepRunner._call
    monkeypatch.setattr(PrivsepRunner, "_call", lambda self, entrypoint, *a, **k: (
        calls.append(entrypoint), call(self, entrypoint, *a, **k))[1])
    hits, commands = driver.vg.report_cache_stats.hits, driver.executor.commands_run
    pool = driver.get_volume_stats(refresh=True)["pools"][0]
    assert pool["backend_state"] == "up"
    assert driver.vg.report_cache_stats.hits == hits + 1
    assert driver.executor.commands_run == commands  # still no LVM process
    assert runner.batch_failures == failures + 1
    assert calls == [refused, devices.read_pv_block, devices.thin_pool_status]


def test_a_batch_of_refresh_reads_checks_each_read_as_if_alone(lab, driver):
    pv, decoy_pv = lab.sim.pv_path(VG), lab.sim.pv_path("othervg")
    reply = devices.read_refresh(
        SECTION, [[pv, 0, mda.FIRST_READ_BYTES], ["/etc/shadow", 0, 4096],
                  [decoy_pv, 0, 4096], [pv, 0, -4096]], [POOL, "otherpool", "../x"])
    assert "value" in reply["blocks"][0]
    assert all("refused" in item for item in reply["blocks"][1:])
    assert reply["pools"][0]["value"]["mode"] == "rw"
    assert all("refused" in item for item in reply["pools"][1:])
    whole = [pv, 0, devices.MAX_READ_BYTES]
    for blocks, pools in [("x", []), ([], "x"), ([[pv, 0]], []), ([[pv, 0, 4096, 0]], []),
                          ([[pv, 0, 4096]] * 65, []), ([], [POOL] * 65),
                          ([whole, whole], []), ([[pv, 0, True]], []),
                          ([[pv, 0, "4096"]], [])]:
        with pytest.raises(PrivilegeRefused):
            devices.read_refresh(SECTION, blocks, pools)
    with pytest.raises(PrivilegeRefused):
        devices.read_refresh("nosuch", [[pv, 0, 4096]], [POOL])


def test_the_wipe_takes_only_an_active_linear_lv_of_the_vg_up_to_its_size(lab, driver):
    driver.create_volume("thin-w", 1)
    driver.create_volume("thick-w", 1, extra_specs={"provisioning:type": "thick"})
    try:
        refused(lab, CALLS["zero"], name="thin-w")               # a thin volume
        refused(lab, CALLS["zero"], name="thick-w", nbytes=2 * GiB)  # past its end
        refused(lab, CALLS["zero"], name="absent")
        reply = devices.zero(SECTION, "thick-w", 4096, 30)
        assert reply["exit_code"] == 0
        assert lab.sim.wipes()[-1] == {"device": "/dev/dkvg/thick-w", "bytes": 4096}
    finally:
        driver.delete_volume("thick-w")
        driver.delete_volume("thin-w")


def test_every_argv_the_builders_make_maps_to_its_entrypoint():
    argvs = [lvm_argv.create_thin(VG, "v", GiB, pool=POOL, tags=["driver_kit_volume"]),
             lvm_argv.create_snapshot(VG, "s", "v", activate=True),
             lvm_argv.zero(VG, "v", 4096), lvm_argv.live_report(VG, "v"),
             lvm_argv.remove_tags(VG, "v", ["driver_kit_volume"])]
    for argv in argvs:
        operation, vg, kwargs = lvm_argv.parse(argv)
        assert vg == VG and lvm_argv.BUILDERS[operation](vg, **kwargs) == argv
    for argv in (["lvcreate", "--type", "thin", "--virtualsize", "1g", "--thinpool", POOL,
                  "--name", "v", "--yes", VG],
                 [*lvm_argv.remove(VG, "v"), "--yes"], ["lvremove", VG],
                 ["lvs", "-o", "lv_name", VG], ["dd", "if=/dev/sda", "of=/dev/dkvg/v"]):
        with pytest.raises(ValueError):
            lvm_argv.parse(argv)


def test_lvms_failures_come_back_as_the_same_typed_errors_as_directly(lab, driver):
    direct = VolumeGroup(VG, executor=LVMExecutor(runner=lab.sim))
    driver.create_volume("twice", 1)
    try:
        for vg in (driver.vg, direct):
            with pytest.raises(LVMAlreadyExistsError) as exists:
                vg.create_thin_volume("twice", GiB, pool=POOL)
            with pytest.raises(LVMNotFoundError) as missing:
                vg.delete("never-made")
            assert (exists.value.exit_code, missing.value.exit_code) == (5, 5)
        assert driver.vg.lv_report("never-made") is None
    finally:
        driver.delete_volume("twice")
