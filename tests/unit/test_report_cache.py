"""The read path's reuse of an unchanged VG's report: hits cost no LVM process, every
change made by any process is seen by the next read, faults and doubts reuse nothing,
and the thin pool's figures are the same whether the report was reused or not."""

from __future__ import annotations

import errno
import subprocess
import sys

import pytest

from driver_kit import GiB, validate_stats
from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.policy import pool_facts
from lvm_driver.policy.tags import VOLUME_TAG
from lvm_driver.read import mda
from lvm_driver.read.report_cache import DeviceSources, PoolStatusError, sources_of
from lvm_driver.run.executor import LVMError
from lvm_driver.simulator import LVMSimulator
from tests.unit.test_lvm_driver import make, sim  # noqa: F401 - sim: the 10 GiB pool fixture

MiB = 1024 ** 2


def operator(state_file: str, *argv: str) -> None:
    """An operator's LVM command in a process of its own, on the same VG."""
    proc = subprocess.run([sys.executable, "-m", "lvm_driver.simulator", "--state", state_file,
                           *argv], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def pool_figures(stats: dict) -> tuple:
    pool = stats["pools"][0]
    return (pool["backend_state"], pool["total_capacity_gb"], pool["free_capacity_gb"],
            pool["provisioned_capacity_gb"])


def test_an_unchanged_vg_is_read_without_any_lvm_process(sim, tmp_path):
    driver = make(tmp_path)
    start = driver.executor.commands_run
    for _ in range(3):
        assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "up"
    assert driver.executor.commands_run == start
    stats = driver.vg.report_cache_stats
    assert (stats.hits, stats.misses, stats.doubts) == (3, 1, 0)


def test_an_admission_read_costs_no_lvm_process_when_nothing_changed(sim, tmp_path):
    driver = make(tmp_path)
    driver.get_volume_stats(refresh=True)
    start = len(driver.executor.history)
    driver.create_volume("volume-a", 1)
    # no read before the lvcreate; after it, one lvs of that LV confirms its marker
    # (with lvm_metadata_parse the metadata text does: no process)
    ran = driver.executor.history[start:]
    assert [argv[0] for argv in ran] == ["lvcreate", "lvs"] and ran[1][-1] == "dkvg/volume-a"


@pytest.mark.parametrize("argv, seen", [
    (["lvcreate", "-T", "-V", "1g", "-n", "theirs", "dkvg/pool"],
     lambda r: r.find_lv("theirs") is not None),
    (["lvcreate", "-L", "100m", "-n", "thick", "dkvg"],
     lambda r: r.find_lv("thick") is not None),
    (["lvextend", "-L", "2g", "dkvg/volume-a"],
     lambda r: r.get_lv("volume-a").size_bytes == 2 * GiB),
    (["lvremove", "-f", "dkvg/volume-a"], lambda r: r.find_lv("volume-a") is None),
    (["lvrename", "dkvg", "volume-a", "renamed"],
     lambda r: r.find_lv("renamed") is not None and r.find_lv("volume-a") is None),
    (["lvchange", "--addtag", "theirs", "dkvg/volume-a"],
     lambda r: "theirs" in r.get_lv("volume-a").tags),
    (["lvchange", "--deltag", VOLUME_TAG, "dkvg/volume-a"],
     lambda r: VOLUME_TAG not in r.get_lv("volume-a").tags),
    (["vgextend", "--setphysicalvolumesize", "2g", "{state}.pv-second"],
     lambda r: r.vg_size_bytes > 12 * GiB),
], ids=["lvcreate-thin", "lvcreate-linear", "lvextend", "lvremove", "lvrename", "addtag",
        "deltag", "vgextend"])
def test_every_change_by_another_process_is_seen_by_the_next_read(sim, tmp_path, argv, seen):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    before = driver.vg.report()
    assert not seen(before)
    state = str(tmp_path / "state.json")
    if argv[0] == "vgextend":
        open(f"{state}.pv-second", "wb").close()
        argv = ["vgextend", "dkvg", "--setphysicalvolumesize", "2g", f"{state}.pv-second"]
    operator(state, *argv)
    assert seen(driver.vg.report())
    if argv[0] == "vgextend":  # the PVs changed: learned again, then reused
        driver.vg.report()
        start = driver.executor.commands_run
        driver.vg.report()
        assert driver.executor.commands_run == start


def test_deactivating_an_lv_shows_in_its_live_read(sim, tmp_path):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    driver.vg.report()
    operator(str(tmp_path / "state.json"), "lvchange", "-an", "dkvg/volume-a")
    assert not driver.vg.lv_report("volume-a").is_active
    path = driver.backend_device_path("volume-a")  # activates it again, as it must
    assert path == "/dev/dkvg/volume-a" and driver.vg.lv_report("volume-a").is_active


def test_data_written_shows_in_the_next_read_although_the_report_is_reused(sim, tmp_path):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    before = driver.get_volume_stats(refresh=True)["pools"][0]
    hits = driver.vg.report_cache_stats.hits
    sim.write_data("dkvg", "volume-a", 900 * MiB)  # data, not metadata: headers unchanged
    after = driver.get_volume_stats(refresh=True)["pools"][0]
    assert driver.vg.report_cache_stats.hits == hits + 1
    assert after["free_capacity_gb"] < before["free_capacity_gb"]


def test_the_figures_are_the_same_reused_or_read_anew(sim, tmp_path):
    driver = make(tmp_path, lvm_offer_thick=True)
    driver.create_volume("volume-a", 2)
    sim.write_data("dkvg", "volume-a", 300 * MiB)
    fresh = driver.get_volume_stats(refresh=True)
    hits, misses = driver.vg.report_cache_stats.hits, driver.vg.report_cache_stats.misses
    assert misses == 2  # do_setup's, and this one after the lvcreate
    reused = driver.get_volume_stats(refresh=True)
    assert driver.vg.report_cache_stats.hits == hits + 1
    assert validate_stats(reused) == []
    assert [pool_figures({"pools": [p]}) for p in fresh["pools"]] == \
        [pool_figures({"pools": [p]}) for p in reused["pools"]]
    vg = VolumeGroup("dkvg", executor=sim.executor())  # another reader, read anew
    assert vg.report().get_lv("pool") == driver.vg.report().get_lv("pool")


def test_a_refresh_with_nothing_changed_recomputes_nothing_from_the_report(
        sim, tmp_path, monkeypatch):
    """What the report alone decides (its check, the sums over every LV, the thick
    pool) is computed once per report: a refresh reusing it only lays the pool's usage
    from device-mapper over it, so its cost does not grow with the LV count."""
    driver = make(tmp_path, lvm_offer_thick=True)
    for i in range(3):
        driver.create_volume(f"volume-{i}", 1)
    driver.get_volume_stats(refresh=True)
    computed = []
    for name in ("_implausible", "_thin_sums", "_thick_pool_facts"):
        real = getattr(pool_facts, name)
        monkeypatch.setattr(pool_facts, name,
                            lambda *a, _real=real, _name=name: computed.append(_name)
                            or _real(*a))
    before = driver.get_volume_stats(refresh=True)
    sim.write_data("dkvg", "volume-0", 500 * MiB)  # usage, not metadata
    after = driver.get_volume_stats(refresh=True)
    assert computed == []
    assert after["pools"][0]["free_capacity_gb"] < before["pools"][0]["free_capacity_gb"]
    operator(sim.state_file, "lvcreate", "-T", "-V", "1g", "-n", "theirs", "dkvg/pool")
    changed = driver.get_volume_stats(refresh=True)
    # a new report (the simulator's lvs): everything computed anew
    assert sorted(computed) == ["_implausible", "_thick_pool_facts", "_thin_sums"]
    assert changed["pools"][0]["provisioned_capacity_gb"] == \
        before["pools"][0]["provisioned_capacity_gb"] + 1


def test_a_report_changed_beyond_usage_computes_anew(sim):
    report = VolumeGroup("dkvg", executor=sim.executor()).report()
    index = [lv.name for lv in report.lvs].index("pool")
    pool = report.lvs[index]
    assert report.summary("size", lambda r: r.get_lv("pool").size_bytes) == pool.size_bytes
    usage = report.with_lvs({index: pool._replace(data_percent=50.0)})
    assert usage.summary("size", lambda r: 0) == pool.size_bytes  # kept: usage only
    grown = report.with_lvs({index: pool._replace(size_bytes=pool.size_bytes * 2)})
    assert grown.summary("size", lambda r: r.get_lv("pool").size_bytes) == \
        pool.size_bytes * 2


def test_a_faulted_read_reuses_nothing_afterwards(sim, tmp_path):
    driver = make(tmp_path)
    sim.run(["lvchange", "--addtag", "operator", "dkvg/pool"])
    sim.inject("lvs", exit_code=5)
    assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "down"
    start = driver.executor.commands_run
    assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "up"
    assert driver.executor.commands_run == start + 1  # read anew, not the old report


def test_an_implausible_report_is_never_reused(sim, tmp_path):
    driver = make(tmp_path)
    sim.run(["lvchange", "--addtag", "operator", "dkvg/pool"])
    sim.inject("lvs", exit_code=0, stderr="", stdout='{"report": [{"lv": [] }]}')
    assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "down"
    start = driver.executor.commands_run
    assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "up"
    assert driver.executor.commands_run > start


def test_an_unreadable_header_is_a_doubt_and_a_full_read(sim, tmp_path):
    driver = make(tmp_path)
    sim.inject_header_error(times=1)
    start = len(driver.executor.history)
    assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "up"
    assert [argv[0] for argv in driver.executor.history[start:]] == ["pvs", "lvs"]
    assert driver.vg.report_cache_stats.doubts == 1
    start = driver.executor.commands_run
    driver.get_volume_stats(refresh=True)
    assert driver.executor.commands_run == start  # readable again: reused


def test_an_inactive_pool_is_down_on_both_paths(sim, tmp_path):
    driver = make(tmp_path)
    sim.run(["lvchange", "-an", "dkvg/pool"])
    for _ in range(2):
        pool = driver.get_volume_stats(refresh=True)["pools"][0]
        assert pool["backend_state"] == "down" and "pool inactive" in pool["down_reason"]


def _sources(sim_: LVMSimulator, failure: OSError) -> DeviceSources:
    def status(vg_name: str, pool_name: str):
        raise failure
    return DeviceSources(read_block=sim_.read_pv_block, thin_pool_status=status)


def test_a_failing_device_mapper_fails_the_read_and_reuses_nothing(sim):
    vg = VolumeGroup("dkvg", executor=sim.executor(),
                     sources=_sources(sim, OSError(errno.EIO, "Input/output error")))
    with pytest.raises(PoolStatusError, match="device-mapper status of thin pool dkvg/pool"):
        vg.report()
    with pytest.raises(LVMError):
        vg.report()
    assert vg.report_cache_stats.hits == 0


def test_a_process_not_allowed_to_ask_device_mapper_asks_lvm_about_the_pool(sim):
    executor = sim.executor()
    vg = VolumeGroup("dkvg", executor=executor,
                     sources=_sources(sim, OSError(errno.EACCES, "Permission denied")))
    pool = vg.report().get_lv("pool")
    assert pool.data_percent == 0.0 and pool.metadata_percent is not None
    assert executor.history[-1][-1] == "dkvg/pool"  # the live lvs of the pool alone


def test_the_simulator_supplies_its_sources_and_real_lvm_the_kernels(sim):
    assert sources_of(sim.executor()).thin_pool_status == sim.thin_pool_status
    kernel = sources_of(VolumeGroup("dkvg", executor=sim.executor()).executor.__class__(
        timeout_s=1.0))
    assert kernel == DeviceSources()


def test_after_a_change_the_text_is_read_and_what_is_not_understood_goes_to_lvs(sim, tmp_path):
    driver = make(tmp_path, lvm_metadata_parse=True)
    driver.get_volume_stats(refresh=True)
    state = str(tmp_path / "state.json")
    operator(state, "lvcreate", "-T", "-V", "1g", "-n", "theirs", "dkvg/pool")
    start = driver.executor.commands_run
    assert driver.vg.report().find_lv("theirs") is not None
    assert driver.executor.commands_run == start  # read from the text, no process
    operator(state, "lvcreate", "-T", "-V", "1g", "-n", "second", "dkvg/pool")
    pv = mda.vg_fingerprint([(f"{state}.pv-dkvg", 1)])[0]
    with open(pv.path, "r+b") as image:  # the text no longer matches its checksum
        image.seek(pv.mdas[0][0] + pv.areas[0][0] + 10)
        image.write(b"garbage")
    report = driver.vg.report()
    assert report.find_lv("second") is not None
    assert driver.executor.commands_run > start  # through lvs
    stats = driver.vg.report_cache_stats
    assert (stats.parsed, stats.unparsed) == (1, 1)
    fresh = VolumeGroup("dkvg", executor=sim.executor()).report()
    assert report == fresh


def test_the_pools_row_follows_thin_creates_without_a_scan_of_every_row(
        sim, tmp_path, monkeypatch):
    """After a thin create (the pool's transaction id changes with it) the report read
    from the text finds the pool's row, moved by the new rows before it, among the
    rows that changed, not by a scan of every row; its usage lands on the pool."""
    from lvm_driver.read import report_cache

    driver = make(tmp_path, lvm_metadata_parse=True)
    operator(sim.state_file, "lvcreate", "-T", "-V", "1g", "-n", "volume-first", "dkvg/pool")
    driver.get_volume_stats(refresh=True)  # the text's first read: parsed whole
    scans = []
    real = report_cache._pool_rows
    monkeypatch.setattr(report_cache, "_pool_rows",
                        lambda report: scans.append(report) or real(report))
    for name in ("a-before-the-pool", "zz-after-the-pool", "b-before-it-too"):
        operator(sim.state_file, "lvcreate", "-T", "-V", "1g", "-n", name, "dkvg/pool")
        stats = driver.get_volume_stats(refresh=True)
        report = driver.vg.report()
        assert scans == [], name
        fresh = VolumeGroup("dkvg", executor=sim.executor()).report()  # through lvs
        assert report.get_lv("pool") == fresh.get_lv("pool")
        assert [lv.name for lv in report.lvs] == [lv.name for lv in fresh.lvs]
        assert pool_figures(stats)[0] == "up"
        scans.clear()  # the fresh read's own
    assert driver.vg.report_cache_stats.incremental == 3


@pytest.mark.parametrize("op", [("create", 3, 1), ("remove", 2, 0), ("rename", 5, 0),
                                ("tag", 4, 2), ("pool-size", 0, 1)])
def test_the_pools_rows_carried_over_a_change_are_those_a_scan_finds(op):
    """A thin create or remove changes the pool's transaction id with it (its row is
    redone): the pools' rows are still carried over the change, and are where a scan
    of every row finds them; a change of the pool itself is scanned anew."""
    from lvm_driver.read import report_cache
    from lvm_driver.read.vg_incremental import IncrementalReader
    from tests.benchmarks import vgmeta
    from tests.unit.test_vg_incremental import _apply, _layout, _uuids

    layout = _layout(300)
    reader = IncrementalReader()
    first = reader.report(vgmeta.metadata_text(layout), "incvg", _uuids(layout))
    first.summary("thin-pool-rows", report_cache._pool_rows, report_cache._pool_rows_after)
    report = reader.report(vgmeta.metadata_text(_apply(layout, op)), "incvg", _uuids(layout))
    assert reader.stats.incremental == 1
    scanned = []
    rows = report.summary("thin-pool-rows", lambda report: scanned.append(report)
                          or report_cache._pool_rows(report))
    assert bool(scanned) is (op[0] == "pool-size")
    assert rows == report_cache._pool_rows(report)
