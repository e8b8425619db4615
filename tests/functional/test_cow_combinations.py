"""Every combination of an operator's COW snapshots with the driver's LV kinds, one
table: each state is compared field by field with ``lvs --readonly`` (the report read
through ``lvs`` and the one built from the metadata text), and the driver's pools,
read both ways, with the VG's truth (by segment type and origin): no pool goes down,
no volume moves between pools. LVM's refusals are recorded as LVM words them. On the
simulator and on real LVM (VM lane); ``DK_CAPTURE_METADATA_DIR`` saves each real
state like tests/unit/data/vg_metadata's captures (``cow-<combination>``)."""

from __future__ import annotations

import pytest

from driver_kit.units import bytes_to_gb_down, bytes_to_gb_up
from lvm_driver import vg_metadata
from lvm_driver.executor import LVMCommandError
from lvm_driver.report_cache import ReportCache, parse_pvs_report, sources_of
from tests.functional.cow_truth import pools_of, vg_truth
from tests.functional.test_metadata_parse import _capture, _fields, _lvs_report

THICK = {"provisioning:type": "thick"}

#: id -> steps; a step is (who, what...): "volume" NAME thin|thick, "snapshot" NAME OF,
#: "clone" NAME OF (the driver's); "lvm" ARGV... (the operator's); "refused" MESSAGE
#: ARGV... (the operator's command LVM refuses, with that message)
COMBINATIONS = {
    "cow-of-thin-volume": [("volume", "volume-a", "thin"),
                           ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-a", "{vg}/volume-a")],
    "cow-of-thick-volume": [("volume", "volume-t", "thick"),
                            ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-t",
                             "{vg}/volume-t")],
    "cow-of-the-pool": [("refused", "Snapshots of thin pool type volumes are not supported.",
                         "lvcreate", "-s", "-L", "32m", "-n", "cow-p", "{vg}/pool")],
    "thin-snapshot-of-a-cow-origin": [
        ("volume", "volume-a", "thin"),
        ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-a", "{vg}/volume-a"),
        ("snapshot", "snap-a", "volume-a")],
    "cow-of-a-thin-snapshot": [  # an LV both a thin snapshot and a COW snapshot's origin
        ("volume", "volume-a", "thin"), ("snapshot", "snap-a", "volume-a"),
        ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-s", "{vg}/snap-a")],
    "clone-of-a-cow-origin": [
        ("volume", "volume-a", "thin"),
        ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-a", "{vg}/volume-a"),
        ("clone", "clone-a", "volume-a")],
    "two-cows-and-an-operators-thin-snapshot": [
        ("volume", "volume-a", "thin"),
        ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-a", "{vg}/volume-a"),
        ("lvm", "lvcreate", "-s", "-L", "16m", "-n", "cow-b", "{vg}/volume-a"),
        ("lvm", "lvcreate", "-s", "-n", "their-snap", "{vg}/volume-a")],
    "cow-of-an-operators-thin-and-thick": [
        ("lvm", "lvcreate", "-T", "-V", "1g", "-n", "their-thin", "{vg}/pool"),
        ("lvm", "lvcreate", "-L", "64m", "-n", "their-thick", "{vg}"),
        ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-x", "{vg}/their-thin"),
        ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-y", "{vg}/their-thick")],
    "cow-of-a-cow": [("volume", "volume-a", "thin"),
                     ("lvm", "lvcreate", "-s", "-L", "32m", "-n", "cow-a", "{vg}/volume-a"),
                     ("refused", "Snapshots of snapshots are not supported.",
                      "lvcreate", "-s", "-L", "16m", "-n", "cow-c", "{vg}/cow-a")],
}


def _argv(lab, words) -> list[str]:
    return [word.format(vg=lab.vg_name) for word in words]


def _apply(lab, driver, steps) -> tuple[dict[str, tuple[bool, str]], set[str]]:
    """Run ``steps``; the driver's volumes (thin?, pool) and snapshots made."""
    volumes: dict[str, tuple[bool, str]] = {}
    snapshots: set[str] = set()
    for who, *what in steps:
        if who == "volume":
            name, kind = what
            driver.create_volume(name, 1, extra_specs=THICK if kind == "thick" else None)
            volumes[name] = (kind == "thin", "pool" if kind == "thin" else lab.vg_name)
        elif who == "snapshot":
            driver.create_snapshot(*what)
            snapshots.add(what[0])
        elif who == "clone":
            driver.create_cloned_volume(*what)
            volumes[what[0]] = (True, "pool")
        elif who == "lvm":
            lab.lvm(*_argv(lab, what))
        else:
            message, *argv = what
            with pytest.raises(LVMCommandError) as refused:
                lab.lvm(*_argv(lab, argv))
            assert refused.value.exit_code == 5 and message in refused.value.stderr
    return volumes, snapshots


def _text_and_lvs_agree(lab, combination: str) -> None:
    cache = ReportCache(sources_of(lab.executor), parse_metadata=True)
    cache.learn(parse_pvs_report(lab.lvm(
        "pvs", "--readonly", "--reportformat", "json", "-o",
        "pv_name,pv_uuid,pv_fmt,pv_mda_count,vg_name").stdout, lab.vg_name))
    fingerprint = cache.fingerprint()
    assert fingerprint is not None
    expected, _ = _lvs_report(lab)
    _capture(lab, f"cow-{combination}", fingerprint, cache.sources.read_block,
             lab.lvm(*lab.vg.report_argv()).stdout)
    parsed = vg_metadata.report_from_pvs(fingerprint, lab.vg_name,
                                         read=cache.sources.read_block)
    assert _fields(parsed) == _fields(expected)


@pytest.mark.parametrize("combination", list(COMBINATIONS))
def test_cow_snapshots_with_the_drivers_lvs(lab, combination):
    drivers = {"lvs": lab.driver(lvm_offer_thick=True, lvm_metadata_parse=False),
               "text": lab.driver(lvm_offer_thick=True, lvm_metadata_parse=True,
                                  lvm_read_session=False)}
    volumes, snapshots = _apply(lab, drivers["lvs"], COMBINATIONS[combination])
    _text_and_lvs_agree(lab, combination)
    truth = vg_truth(lab)
    cow = sum(truth.cow_snapshots.values())
    seen = {}
    for way, driver in drivers.items():
        pools = pools_of(driver)
        thin, thick = pools["pool"], pools[lab.vg_name]
        assert (thin["backend_state"], thick["backend_state"]) == ("up", "up"), way
        seen[way] = figures = (
            thin["provisioned_capacity_gb"], thin["total_volumes"],
            thin["snapshot_capacity_gb"], thick["provisioned_capacity_gb"],
            thick["total_volumes"], thick["snapshot_capacity_gb"],
            thick["free_capacity_gb"], thick["total_capacity_gb"])
        assert figures == (
            bytes_to_gb_up(sum(truth.thin_volumes.values())), len(truth.thin_volumes),
            bytes_to_gb_up(sum(truth.thin_snapshots.values())),
            bytes_to_gb_up(sum(truth.thick_volumes.values())), len(truth.thick_volumes),
            bytes_to_gb_up(cow), bytes_to_gb_down(truth.vg_free),
            bytes_to_gb_down(truth.vg_free + sum(truth.thick_volumes.values()) + cow)), way
        for name, (thin_volume, pool) in volumes.items():  # none moved between pools
            found = driver.backend_find_volume(name)
            assert (found.thin, found.pool_name) == (thin_volume, pool), (way, name)
        for name in snapshots:
            assert driver.backend_find_snapshot(name) is not None, (way, name)
        for name in truth.cow_snapshots:  # a COW snapshot is neither
            assert driver.backend_find_volume(name) is None, (way, name)
            assert driver.backend_find_snapshot(name) is None, (way, name)
    assert seen["lvs"] == seen["text"]
