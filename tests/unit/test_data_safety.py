"""The LVM driver never deletes what it did not make, never loses a volume and never
passes the cap through rounding or a stale read (simulator; the LVM-touching ones
also run on real LVM in tests/functional)."""

import json
import os
import re
import threading
import time

import pytest

from driver_kit import (AlreadyExists, BackendUnavailable, CapacityExceeded, GiB,
                        InvalidInput, NotManaged, VolumeBusy)
from driver_kit.admission import _STATES
from driver_kit.exceptions import BackendError
from lvm_driver.driver import REQUEST_TAG_PREFIX, VOLUME_TAG
from tests.unit import test_lvm_driver
from tests.unit.test_lvm_driver import sim  # noqa: F401 - the fixture: a 10 GiB pool

def make(tmp_path, **extra):
    """test_lvm_driver's driver at ratio 1.0 (cap = the pool's 10 GiB), thick offered."""
    return test_lvm_driver.make(tmp_path, **{
        "max_over_subscription_ratio": "1.0", "over_provisioning_calculation": "standard",
        "lvm_offer_thick": True, **extra})


def lvs(sim):
    return sim.state()["vgs"]["dkvg"]["lvs"]


def sim_lv_bytes(sim, name):
    lv = lvs(sim)[name]
    return lv["extents"] * sim.state()["vgs"]["dkvg"]["extent_size"]


def report_rows(sim, driver):
    """The rows of the driver's own ``lvs`` as the simulator prints them now."""
    return json.loads(sim.run(driver.vg.report_argv()).stdout)["report"][0]["lv"]


def serve_report(sim, rows, **only):
    """Every ``lvs`` from now on (``only``: of these) exits 0 printing ``rows``;
    LVM itself is unchanged."""
    sim.inject("lvs", exit_code=0, stderr="", times=None,
               stdout=json.dumps({"report": [{"lv": rows}]}), **only)


# ------------------------------------------------------------------ ownership

@pytest.mark.parametrize("argv", [
    ["lvcreate", "-L", "300m", "-n", "operator-linear", "dkvg"],
    ["lvcreate", "-T", "-V", "1g", "-n", "operator-thin", "dkvg/pool"],
])
def test_delete_refuses_an_lv_the_driver_did_not_make(sim, tmp_path, argv):
    driver = make(tmp_path)
    sim.run(argv)
    name = argv[argv.index("-n") + 1]
    before = set(lvs(sim))
    with pytest.raises(NotManaged, match="not managed by this driver.*nothing was deleted"):
        driver.delete_volume(name)
    assert set(lvs(sim)) == before
    # still counted, as the operator's volumes must be
    assert driver.backend_find_volume(name) is not None


def test_a_volume_with_snapshots_is_not_deleted(sim, tmp_path):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 2)
    driver.create_snapshot("snap-1", "volume-a")
    driver.create_snapshot("snap-2", "volume-a")
    with pytest.raises(VolumeBusy, match="snap-1, snap-2") as err:
        driver.delete_volume("volume-a")
    assert err.value.snapshots == ("snap-1", "snap-2")
    assert {"volume-a", "snap-1", "snap-2"} <= set(lvs(sim))
    with pytest.raises(InvalidInput, match="a volume, not a snapshot"):
        driver.delete_snapshot("volume-a")
    driver.delete_snapshot("snap-1")
    driver.delete_snapshot("snap-2")
    driver.delete_volume("volume-a")
    assert not {"volume-a", "snap-1", "snap-2"} & set(lvs(sim))


def test_a_snapshot_whose_origin_an_operator_removed_stays_a_snapshot(sim, tmp_path):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 2)
    driver.create_snapshot("snap-a", "volume-a")
    sim.run(["lvremove", "-f", "dkvg/volume-a"])  # the operator's, not the driver's
    pool = driver.get_volume_stats(refresh=True)["pools"][0]
    assert pool["provisioned_capacity_gb"] == 0  # a snapshot is never provisioned
    copy = driver.create_volume_from_snapshot("copy-a", "snap-a")
    assert copy.size_gb == 2
    driver.delete_snapshot("snap-a")
    assert "snap-a" not in lvs(sim) and "copy-a" in lvs(sim)


@pytest.mark.parametrize("thin", [False, True], ids=["thick", "thin"])
def test_a_volume_with_a_cow_snapshot_is_not_deleted(sim, tmp_path, thin):
    """lvremove --force of an origin removes its COW snapshots too: an operator's
    COW snapshot (lvcreate -s -L) of a thick or a thin volume makes the volume busy."""
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1, extra_specs={
        "provisioning:type": "thin" if thin else "thick"})
    sim.run(["lvcreate", "-s", "-L", "256m", "-n", "operator-cow", "dkvg/volume-a"])
    with pytest.raises(VolumeBusy, match="operator-cow"):
        driver.delete_volume("volume-a")
    assert {"volume-a", "operator-cow"} <= set(lvs(sim))
    assert sim.wipes() == []  # nothing of it was touched
    sim.run(["lvremove", "-f", "dkvg/operator-cow"])
    driver.delete_volume("volume-a")
    assert "volume-a" not in lvs(sim)


@pytest.mark.parametrize("only, why", [
    ({"argv_contains": "dkvg"}, "did not list 'volume-a', which LVM lists on its own"),
    ({}, "not that one LV"),  # the lvs of that one name is as wrong
])
def test_a_report_that_left_out_the_volume_does_not_make_its_delete_a_success(
        sim, tmp_path, only, why):
    """An lvs exiting 0 with the pool but not the volume (truncated): the delete asks
    LVM about that name and is refused; the volume stays."""
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    serve_report(sim, [row for row in report_rows(sim, driver)
                       if row["lv_name"] != "volume-a"], **only)
    with pytest.raises(BackendError, match=why):
        driver.delete_volume("volume-a")
    sim.clear_faults()
    assert VOLUME_TAG in lvs(sim)["volume-a"]["tags"]
    driver.delete_volume("volume-a")  # a missing name: LVM confirms it, still idempotent
    driver.delete_volume("volume-a")
    assert "volume-a" not in lvs(sim)


# ------------------------------------------------------------------ clean-up

def _wait_until_queued(driver, count):
    state = _STATES[os.path.abspath(driver.lock_file())]  # noqa: the gate's own count
    for _ in range(500):
        if state.waiting >= count:
            return
        time.sleep(0.01)
    raise AssertionError("the second create never queued for the admission lock")


def test_a_failed_retry_never_removes_the_volume_a_queued_thread_made(sim, tmp_path):
    """Thread 1 creates volume-x slowly; thread 2, queued behind it on the same
    shared read, retries volume-x and its lvcreate fails: volume-x must survive."""
    driver = make(tmp_path)
    driver.get_volume_stats(refresh=True)
    sim.inject("lvcreate", delay_s=1.0)          # thread 1's, slow but successful
    sim.inject("lvcreate", exit_code=5)          # thread 2's, fails
    errors = []

    def create():
        try:
            driver.create_volume("volume-x", 1)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)

    first = threading.Thread(target=create)
    first.start()
    key = os.path.abspath(driver.lock_file())
    for _ in range(500):  # thread 1 holds the admission lock (its lvcreate is slow)
        if key in _STATES and _STATES[key].thread_lock.locked():
            break
        time.sleep(0.01)
    second = threading.Thread(target=create)
    second.start()
    _wait_until_queued(driver, 1)
    first.join()
    second.join()
    assert len(errors) == 1 and isinstance(errors[0], (BackendError, AlreadyExists))
    assert "volume-x" in lvs(sim)
    assert VOLUME_TAG in lvs(sim)["volume-x"]["tags"]


def test_clean_up_removes_only_the_lv_of_that_very_request(sim, tmp_path):
    driver = make(tmp_path)
    sim.inject("lvcreate", fail_after_apply=True, exit_code=139)
    with pytest.raises(BackendError):
        driver.create_volume("volume-a", 1)
    assert "volume-a" not in lvs(sim)
    driver.create_volume("volume-a", 1)
    marker = [t for t in lvs(sim)["volume-a"]["tags"] if t.startswith(REQUEST_TAG_PREFIX)]
    assert len(marker) == 1  # one marker, unique to the request that made it
    # a failing create of the same name leaves the existing volume alone
    sim.inject("lvcreate", fail_after_apply=True, exit_code=139)
    with pytest.raises((BackendError, AlreadyExists)):
        driver.create_volume("volume-a", 1)
    assert lvs(sim)["volume-a"]["tags"] == sorted([VOLUME_TAG, *marker])


ALREADY_EXISTS = '  Logical volume "volume-a" already exists in volume group "dkvg"\n'


def test_a_crashed_create_saying_already_exists_is_cleaned_up(sim, tmp_path):
    """An lvcreate that made the LV, then failed printing "already exists": the
    marker on the LV proves this request made it, so it goes."""
    driver = make(tmp_path)
    sim.inject("lvcreate", fail_after_apply=True, exit_code=5, stderr=ALREADY_EXISTS)
    with pytest.raises(AlreadyExists):
        driver.create_volume("volume-a", 1)
    assert "volume-a" not in lvs(sim)


def test_after_a_failure_a_queued_create_reads_the_backend_anew(sim, tmp_path):
    """Cap 10 GiB. Thread 1's 6 GiB lvcreate crashes after making the LV and its
    clean-up fails, so 6 GiB stay; thread 2, queued meanwhile on the same driver,
    must not be admitted on the read taken before (6 + 6 > 10)."""
    driver = make(tmp_path)
    sim.inject("lvcreate", fail_after_apply=True, exit_code=5, stderr=ALREADY_EXISTS)
    sim.inject("lvremove", times=None)  # every clean-up round fails: the LV stays
    outcome = []

    def queued():
        try:
            driver.create_volume("volume-b", 6)
            outcome.append("admitted")
        except CapacityExceeded:
            outcome.append("refused")

    second = threading.Thread(target=queued)
    create_thin_volume = driver.vg.create_thin_volume

    def create_while_another_waits(*args, **kwargs):
        second.start()
        _wait_until_queued(driver, 1)
        create_thin_volume(*args, **kwargs)

    driver.vg.create_thin_volume = create_while_another_waits
    with pytest.raises(AlreadyExists):
        driver.create_volume("volume-a", 6)
    driver.vg.create_thin_volume = create_thin_volume
    second.join()
    sim.clear_faults()
    assert outcome == ["refused"]
    assert "volume-a" in lvs(sim) and "volume-b" not in lvs(sim)


# ------------------------------------------------------------------ exact bytes

def test_unaligned_extend_admits_the_bytes_it_really_adds(sim, tmp_path):
    """8 GiB + two operator LVs of 500 MiB in a 10 GiB pool at ratio 1.0: growing one
    of them to 2 GiB adds 1.51 GiB (10.49 GiB provisioned), over the cap."""
    driver = make(tmp_path)
    pool_bytes = sim_lv_bytes(sim, "pool")
    assert pool_bytes == 10 * GiB
    driver.create_volume("volume-a", 8)
    sim.run(["lvcreate", "-T", "-V", "500m", "-n", "operator-1", "dkvg/pool"])
    sim.run(["lvcreate", "-T", "-V", "500m", "-n", "operator-2", "dkvg/pool"])
    with pytest.raises(CapacityExceeded, match="provisioned_cap"):
        driver.extend_volume("operator-1", 2)
    assert sim_lv_bytes(sim, "operator-1") == 500 * 2**20
    driver.extend_volume("operator-1", 1)  # 0.51 GiB more: fits (9.49 GiB)


def test_a_copy_is_the_size_the_api_returns(sim, tmp_path):
    driver = make(tmp_path, max_over_subscription_ratio="20.0")
    sim.run(["lvcreate", "-T", "-V", "500m", "-n", "operator-1", "dkvg/pool"])
    copy = driver.create_cloned_volume("copy-1", "operator-1")
    assert copy.size_gb == 1 and sim_lv_bytes(sim, "copy-1") == GiB
    driver.create_snapshot("snap-1", "operator-1")
    copy = driver.create_volume_from_snapshot("copy-2", "snap-1", 3)
    assert copy.size_gb == 3 and sim_lv_bytes(sim, "copy-2") == 3 * GiB


def test_a_snapshot_has_the_exact_size_of_its_volume(sim, tmp_path):
    driver = make(tmp_path)
    sim.run(["lvcreate", "-T", "-V", "500m", "-n", "operator-1", "dkvg/pool"])
    snapshot = driver.create_snapshot("snap-1", "operator-1")
    assert (snapshot.size_gb, snapshot.size_bytes) == (1, 500 * 2**20)
    assert driver.backend_find_snapshot("snap-1") == snapshot


def test_a_shrinking_or_equal_extend_is_refused_by_bytes(sim, tmp_path):
    driver = make(tmp_path)
    sim.run(["lvcreate", "-T", "-V", "1500m", "-n", "operator-1", "dkvg/pool"])
    with pytest.raises(InvalidInput, match=r"1\.46 GiB \(1572864000 bytes\)"):
        driver.extend_volume("operator-1", 1)
    driver.extend_volume("operator-1", 2)
    assert sim_lv_bytes(sim, "operator-1") == 2 * GiB


# ------------------------------------------------------------------ reports

def _edit(name, **fields):
    return lambda rows: [dict(row, **fields) if row["lv_name"] == name else row
                         for row in rows]


@pytest.mark.parametrize("broken, why", [
    pytest.param(lambda rows: [], "thin pool 'pool' not found", id="empty"),
    pytest.param(_edit("pool", lv_attr="-wi-a-----"), "'pool' is not a thin pool",
                 id="pool-not-thin"),
    pytest.param(_edit("volume-a", origin="gone"), "origin 'gone', which is not listed",
                 id="origin-not-listed"),
    pytest.param(_edit("volume-a", pool_lv="gone"), "thin pool 'gone', which is not listed",
                 id="pool-not-listed"),
    pytest.param(lambda rows: [dict(row, vg_free=str(13 * GiB)) for row in rows],
                 f"VG free {13 * GiB} bytes, size {12 * GiB} bytes", id="free-over-size"),
    pytest.param(_edit("thick-a", lv_size=str(12 * GiB)), "its LVs hold", id="over-allocated"),
    pytest.param(_edit("thick-a", lv_size="-1073741824"), "should be a byte count",
                 id="negative-size"),
    pytest.param(lambda rows: [*rows, dict(rows[-1], vg_name="other", lv_name="x")],
                 "belongs to volume group 'other'", id="other-vg"),
])
def test_a_report_that_cannot_be_right_fails_closed(sim, tmp_path, broken, why):
    """lvs exits 0 with a report that cannot be right: every pool down saying why,
    creates and deletes refused, nothing changed."""
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    driver.create_volume("thick-a", 1, extra_specs={"provisioning:type": "thick"})
    serve_report(sim, broken(report_rows(sim, driver)))
    pools = driver.get_volume_stats(refresh=True)["pools"]
    assert [p["backend_state"] for p in pools] == ["down", "down"]
    assert all(why in p["down_reason"] for p in pools)
    with pytest.raises(BackendUnavailable, match=re.escape(why)):
        driver.create_volume("volume-b", 1)
    for name in ("volume-a", "thick-a"):
        with pytest.raises(BackendError, match=re.escape(why)):
            driver.delete_volume(name)
    sim.clear_faults()
    assert {"volume-a", "thick-a"} <= set(lvs(sim)) and "volume-b" not in lvs(sim)


def test_stats_slower_than_stats_timeout_fail_closed(sim, tmp_path):
    driver = make(tmp_path, stats_timeout=0.5)
    sim.run(["lvchange", "--addtag", "operator", "dkvg/pool"])  # the next read is an lvs
    sim.inject("lvs", delay_s=3.0)
    pools = driver.get_volume_stats(refresh=True)["pools"]
    assert all(p["backend_state"] == "down" for p in pools)
    assert all("stats_timeout" in p["down_reason"] or "0.5 s" in p["down_reason"]
               for p in pools)


def test_a_clean_up_that_fails_itself_is_tried_again(sim, tmp_path):
    driver = make(tmp_path)
    sim.inject("lvcreate", fail_after_apply=True, exit_code=139)
    sim.inject("lvs", exit_code=5)          # the clean-up's first read fails
    sim.inject("lvremove", exit_code=5)     # and its first removal
    with pytest.raises(BackendError):
        driver.create_volume("volume-a", 1)
    assert "volume-a" not in lvs(sim)


@pytest.mark.parametrize("fault", [
    pytest.param({"exit_code": 0, "stdout": '{"report": [{"lv": []}]}', "stderr": ""},
                 id="an empty report"),
    pytest.param({"malformed_output": True}, id="a truncated report")])
def test_a_clean_up_does_not_take_a_report_without_the_lv_for_its_absence(sim, tmp_path,
                                                                          fault):
    """The clean-up's read exits 0 but lists nothing: LVM has not said the LV is gone."""
    driver = make(tmp_path)
    sim.inject("lvcreate", fail_after_apply=True, exit_code=139)
    create_thin_volume = driver.vg.create_thin_volume

    def create_then_fault_the_next_read(*args, **kwargs):
        try:
            create_thin_volume(*args, **kwargs)
        finally:  # after the admission read: the clean-up's read meets the fault
            sim.inject("lvs", **fault)

    driver.vg.create_thin_volume = create_then_fault_the_next_read
    with pytest.raises(BackendError):
        driver.create_volume("volume-a", 1)
    assert "volume-a" not in lvs(sim)


def _create_failing_after_lvm_made_it(sim, driver, lvremove_failures: int) -> None:
    """A create whose lvcreate crashes after making the LV, and whose clean-up meets
    ``lvremove_failures`` failed removals in a row."""
    sim.inject("lvcreate", fail_after_apply=True, exit_code=139)
    sim.inject("lvremove", exit_code=5, times=lvremove_failures)
    with pytest.raises(BackendError):
        driver.create_volume("volume-a", 1)


def test_a_clean_up_outlasts_a_backend_failing_seven_times_in_a_row(sim, tmp_path):
    _create_failing_after_lvm_made_it(sim, make(tmp_path), 7)
    assert "volume-a" not in lvs(sim)


def test_a_clean_up_out_of_rounds_is_finished_by_the_next_create(sim, tmp_path):
    """LVM fails every round of the clean-up: the LV stays, counted, until the driver's
    next create removes it (the retried create of the same name succeeds)."""
    driver = make(tmp_path)
    _create_failing_after_lvm_made_it(sim, driver, 8)
    assert "volume-a" in lvs(sim)
    assert driver.get_volume_stats(refresh=True)["pools"][0]["provisioned_capacity_gb"] == 1
    driver.create_volume("volume-a", 2)  # the retry: the leftover goes first
    assert sim_lv_bytes(sim, "volume-a") == 2 * GiB


def test_an_unfinished_clean_up_never_removes_a_later_volume_of_that_name(sim, tmp_path):
    driver = make(tmp_path)
    _create_failing_after_lvm_made_it(sim, driver, 8)
    driver.delete_volume("volume-a")       # the errored volume's delete, as Cinder's
    driver.create_volume("volume-a", 3)    # a new volume of that name
    driver.create_volume("volume-b", 1)    # the next create finishes the clean-up
    assert sim_lv_bytes(sim, "volume-a") == 3 * GiB and driver._unfinished == {}
