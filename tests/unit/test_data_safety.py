"""The LVM driver never deletes what it did not make, never loses a volume and never
passes the cap through rounding or a stale read (simulator; the LVM-touching ones
also run on real LVM in tests/functional)."""

import os
import threading
import time

import pytest

from driver_kit import (AlreadyExists, BackendUnavailable, CapacityExceeded, GiB,
                        InvalidInput, NotManaged, VolumeBusy)
from driver_kit.admission import _STATES
from driver_kit.exceptions import BackendError
from lvm_driver.driver import REQUEST_TAG_PREFIX, VOLUME_TAG
from tests.unit.test_lvm_driver import make as make_driver
from tests.unit.test_lvm_driver import sim  # noqa: F401 - the shared fixture

EMPTY_REPORT = '{"report": [{"lv": []}]}'


def make(tmp_path, **extra):
    """The unit tests' driver, at ratio 1.0, the standard calculation and a thick pool."""
    return make_driver(tmp_path, **{"max_over_subscription_ratio": "1.0",
                                    "over_provisioning_calculation": "standard",
                                    "lvm_offer_thick": True, **extra})


def lvs(sim):
    return sim.state()["vgs"]["dkvg"]["lvs"]


def sim_lv_bytes(sim, name):
    lv = lvs(sim)[name]
    return lv["extents"] * sim.state()["vgs"]["dkvg"]["extent_size"]


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


def test_a_shrinking_or_equal_extend_is_refused_by_bytes(sim, tmp_path):
    driver = make(tmp_path)
    sim.run(["lvcreate", "-T", "-V", "1500m", "-n", "operator-1", "dkvg/pool"])
    with pytest.raises(InvalidInput, match=r"1\.46 GiB \(1572864000 bytes\)"):
        driver.extend_volume("operator-1", 1)
    driver.extend_volume("operator-1", 2)
    assert sim_lv_bytes(sim, "operator-1") == 2 * GiB


# ------------------------------------------------------------------ reports

@pytest.mark.parametrize("stdout, why", [
    (EMPTY_REPORT, "thin pool 'pool' not found"),
    ('{"report": [{"lv": [{"vg_name": "dkvg", "vg_size": "12884901888", "vg_free": "0", '
     '"vg_extent_size": "4194304", "lv_name": "pool", "lv_size": "10737418240", '
     '"lv_attr": "twi-aotz--", "pool_lv": "", "origin": "", "data_percent": "0.00", '
     '"metadata_percent": "1.00", "lv_tags": ""}, {"vg_name": "dkvg", '
     '"vg_size": "12884901888", "vg_free": "0", "vg_extent_size": "4194304", '
     '"lv_name": "v", "lv_size": "1073741824", "lv_attr": "Vwi-a-tz--", '
     '"pool_lv": "pool", "origin": "gone", "data_percent": "0.00", '
     '"metadata_percent": "", "lv_tags": ""}]}]}', "origin 'gone', which is not listed"),
])
def test_a_report_that_cannot_be_right_fails_closed(sim, tmp_path, stdout, why):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    driver.create_volume("thick-a", 1, extra_specs={"provisioning:type": "thick"})
    sim.inject("lvs", exit_code=0, stdout=stdout, stderr="", times=None)
    pools = driver.get_volume_stats(refresh=True)["pools"]
    assert [p["backend_state"] for p in pools] == ["down", "down"]
    assert all(why in p["down_reason"] for p in pools)
    with pytest.raises(BackendUnavailable, match=why):
        driver.create_volume("volume-b", 1)
    for name in ("volume-a", "thick-a"):
        with pytest.raises(BackendUnavailable, match=why):
            driver.delete_volume(name)
    sim.clear_faults()
    assert {"volume-a", "thick-a"} <= set(lvs(sim)) and "volume-b" not in lvs(sim)


def test_stats_slower_than_stats_timeout_fail_closed(sim, tmp_path):
    driver = make(tmp_path, stats_timeout=0.5)
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
