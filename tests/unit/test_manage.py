"""Manage, unmanage, retype and revert on the simulator: what is refused, and that a
refusal changes nothing."""

from __future__ import annotations

import threading
import time

import pytest

from driver_kit import (AlreadyExists, GiB, InvalidInput, SnapshotNotFound, VolumeBusy,
                        VolumeNotFound)
from lvm_driver.policy import manage
from lvm_driver.run.executor import LVMCommandError
from tests.unit.test_lvm_driver import make, names, sim  # noqa: F401 - the fixture


def lvs(sim):  # noqa: F811
    return {name: sorted(rec["tags"]) for name, rec in sim.state()["vgs"]["dkvg"]["lvs"].items()}


@pytest.fixture(autouse=True)
def short_grace(monkeypatch):
    """An LV that stays open is refused after 0.3 s here, not the driver's 3 s."""
    monkeypatch.setattr(manage, "OPEN_GRACE_S", 0.3)


@pytest.fixture
def driver(sim, tmp_path):  # noqa: F811
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    sim.run(["lvcreate", "-T", "-V", "1g", "-n", "mine", "dkvg/pool"])
    return driver


@pytest.mark.parametrize("ref, error, match", [
    ({}, InvalidInput, "source-name"),
    ("mine", InvalidInput, "source-name"),
    ({"source-name": "-rf"}, InvalidInput, "option"),
    ({"source-name": "absent"}, VolumeNotFound, "no logical volume dkvg/absent"),
    ({"source-name": "volume-a"}, AlreadyExists, "already managed"),
    ({"source-name": "pool"}, InvalidInput, "thin pool"),
])
def test_bad_references_are_refused_and_change_nothing(driver, sim, ref, error, match):
    before = lvs(sim)
    with pytest.raises(error, match=match):
        driver.manage_existing("volume-b", ref)
    with pytest.raises(error, match=match):
        driver.manage_existing_get_size(ref)
    assert lvs(sim) == before


def test_open_lvs_are_in_use_and_snapshots_are_named(driver, sim):
    sim.set_open("dkvg", "mine")
    with pytest.raises(VolumeBusy, match="volume in use"):
        driver.manage_existing("volume-b", {"source-name": "mine"})
    listed = {e["reference"]["source-name"]: e for e in driver.manageable_volumes()}
    assert (listed["mine"]["safe_to_manage"], listed["mine"]["reason_not_safe"]) == \
        (False, "volume in use")
    assert "mine" in names(sim) and "volume-b" not in names(sim)
    sim.set_open("dkvg", "mine", False)
    sim.run(["lvcreate", "-s", "-n", "mine-snap", "dkvg/mine"])
    listed = {e["reference"]["source-name"]: e for e in driver.manageable_volumes()}
    assert listed["mine"]["safe_to_manage"] is True
    assert listed["mine"]["extra_info"].endswith("(manage them after it): mine-snap")


def closed_after(sim, lv, seconds):  # noqa: F811
    """Open ``lv`` now and close it ``seconds`` later, as udev's probe of a new LV does."""
    sim.set_open("dkvg", lv)
    threading.Timer(seconds, sim.set_open, ("dkvg", lv, False)).start()


def test_an_lv_open_for_a_moment_is_managed_and_reverted_not_refused(driver, sim, monkeypatch):
    monkeypatch.setattr(manage, "OPEN_GRACE_S", 5.0)
    started = time.monotonic()
    closed_after(sim, "mine", 0.5)
    driver.manage_existing("volume-m", {"source-name": "mine"})
    assert 0.5 <= time.monotonic() - started < 5.0
    assert "volume-m" in names(sim) and "mine" not in names(sim)
    driver.create_snapshot("snap-a", "volume-a")
    closed_after(sim, "volume-a", 0.5)
    driver.revert_to_snapshot("volume-a", "snap-a")
    assert {"volume-a", "snap-a"} <= names(sim)


def test_an_lvs_slower_than_the_grace_still_gets_a_second_look(driver, sim):
    sim.inject("lvs", exit_code=0, delay_s=0.6, argv_contains="dkvg/mine")  # grace: 0.3 s
    closed_after(sim, "mine", 0.2)  # closes once the slow lvs has shown it open
    driver.manage_existing("volume-m", {"source-name": "mine"})
    assert "volume-m" in names(sim)


def test_the_pool_and_provisioning_type_must_be_the_lvs(driver, sim):
    with pytest.raises(InvalidInput, match="not 'dkvg'"):
        driver.manage_existing("volume-b", {"source-name": "mine"}, pool_name="dkvg")
    with pytest.raises(InvalidInput, match="asks for thick"):
        driver.manage_existing("volume-b", {"source-name": "mine"},
                               extra_specs={"provisioning:type": "thick"})
    sim.run(["lvcreate", "-y", "-L", "1g", "-n", "mine-thick", "dkvg"])
    with pytest.raises(InvalidInput, match="lvm_offer_thick"):
        driver.manage_existing("volume-b", {"source-name": "mine-thick"})
    assert "volume-b" not in names(sim)


def test_a_taken_name_is_refused_before_any_rename(driver, sim):
    with pytest.raises(AlreadyExists, match="volume-a already exists"):
        driver.manage_existing("volume-a", {"source-name": "mine"})
    assert "mine" in names(sim)


def test_a_failed_tag_renames_the_lv_back(driver, sim):
    sim.inject("lvchange", argv_contains="--addtag")
    with pytest.raises(LVMCommandError):
        driver.manage_existing("volume-b", {"source-name": "mine"})
    assert lvs(sim)["mine"] == [] and "volume-b" not in names(sim)


def test_unmanage_removes_only_the_drivers_tags(driver, sim):
    sim.run(["lvchange", "--addtag", "operator_note", "dkvg/volume-a"])
    driver.unmanage("volume-a")
    assert lvs(sim)["volume-a"] == ["operator_note"]
    with pytest.raises(InvalidInput, match="not managed"):
        driver.unmanage("volume-a")
    with pytest.raises(VolumeNotFound):
        driver.unmanage("absent")


def test_a_snapshot_is_adopted_only_for_its_own_origin(driver, sim):
    sim.run(["lvcreate", "-s", "-n", "mine-snap", "dkvg/mine"])
    with pytest.raises(InvalidInput, match="snapshot of mine, not of 'volume-a'"):
        driver.manage_existing_snapshot("snap-b", {"source-name": "mine-snap"}, "volume-a")
    with pytest.raises(SnapshotNotFound):
        driver.manage_existing_snapshot_get_size({"source-name": "absent"})
    assert driver.manage_existing_snapshot_get_size({"source-name": "mine-snap"}) == 1
    assert "snap-b" not in names(sim)


def test_retype_keeps_the_lv_only_within_its_pool_and_type(driver):
    thin = {"provisioning:type": "thin"}
    assert driver.retype("volume-a", thin, "pool") is True
    assert driver.retype("volume-a", {}, None) is True
    assert driver.retype("volume-a", {"provisioning:type": "thick"}, "pool") is False
    assert driver.retype("volume-a", thin, "other-pool") is False
    with pytest.raises(VolumeNotFound):
        driver.retype("absent", thin, None)


def test_revert_refuses_what_it_cannot_do_cleanly(driver, sim):
    driver.create_snapshot("snap-a", "volume-a")
    driver.create_volume("volume-b", 1)
    with pytest.raises(InvalidInput, match="not a snapshot of 'volume-b'"):
        driver.revert_to_snapshot("volume-b", "snap-a")
    with pytest.raises(SnapshotNotFound):
        driver.revert_to_snapshot("volume-a", "volume-b")
    sim.set_open("dkvg", "volume-a")
    with pytest.raises(VolumeBusy, match="detach it first"):
        driver.revert_to_snapshot("volume-a", "snap-a")
    sim.set_open("dkvg", "volume-a", False)
    driver.extend_volume("volume-a", 2)
    with pytest.raises(InvalidInput, match="resized"):
        driver.revert_to_snapshot("volume-a", "snap-a")
    assert {"volume-a", "snap-a"} <= names(sim)
    assert sim.state()["vgs"]["dkvg"]["lvs"]["volume-a"]["extents"] * 4 * 1024 ** 2 == 2 * GiB
