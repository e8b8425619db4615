"""Every combination of an operator's COW snapshots with the driver's LV kinds, one
table applied row after row to one VG (so the last state holds them all, and the VM
lane boots no pool per row): after each row the state is compared field by field with
``lvs --readonly`` (the report read through ``lvs`` and the one built from the
metadata text), and the driver's pools, read both ways, with the VG's truth (by
segment type and origin): no pool goes down, no volume moves between pools. LVM's
refusals are recorded as LVM words them. On the simulator and on real LVM (VM lane);
``DK_CAPTURE_METADATA_DIR`` saves each real state as tests/unit/data/vg_metadata's
``combination-<row>`` captures are saved (those were taken one row per fresh VG)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from driver_kit.units import bytes_to_gb_down, bytes_to_gb_up
from lvm_driver.policy.tags import REQUEST_TAG_PREFIX
from lvm_driver.read import vg_metadata
from lvm_driver.read.report import load_rows
from lvm_driver.read.report_cache import ReportCache, parse_pvs_report, sources_of
from lvm_driver.run.executor import LVMCommandError
from tests.functional.conftest import Lab
from tests.functional.cow_truth import pools_of, vg_truth
from tests.functional.test_metadata_parse import _capture, _fields, _lvs_report

THICK = {"provisioning:type": "thick"}
CAPTURED = Path(__file__).parents[1] / "unit" / "data" / "vg_metadata"
MiB = 1024 ** 2
#: every row's thin volumes fit under the cap together
RATIO = "10.0"

#: row -> steps; a step is (who, what...): "volume" NAME thin|thick, "snapshot" NAME OF,
#: "clone" NAME OF (the driver's); "lvm" ARGV... (the operator's); "refused" MESSAGE
#: ARGV... (the operator's command LVM refuses, with that message). Each row's names
#: get a prefix of their own ({vg}: the VG).
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


def _argv(lab, prefix: str, words) -> list[str]:
    """``words`` with the VG's name, and the row's prefix on each LV but the pool."""
    return [word.replace("{vg}/", "{vg}/" + ("" if word == "{vg}/pool" else prefix))
            .format(vg=lab.vg_name) for word in words]


def _named(prefix: str, argv: list[str]) -> list[str]:
    """``argv`` with the LV made (``-n NAME``) given the row's prefix."""
    return [f"{prefix}{word}" if before == "-n" else word
            for before, word in zip(["", *argv], argv)]


def _apply(lab, driver, prefix: str, steps, volumes: dict[str, tuple[bool, str]],
           snapshots: set[str]) -> None:
    """Run a row's ``steps``; record the driver's volumes (thin?, pool) and snapshots."""
    for who, *what in steps:
        names = [f"{prefix}{word}" for word in what[:2]]
        if who == "volume":
            thin = what[1] == "thin"
            driver.create_volume(names[0], 1, extra_specs=None if thin else THICK)
            volumes[names[0]] = (thin, "pool" if thin else lab.vg_name)
        elif who == "snapshot":
            driver.create_snapshot(*names)
            snapshots.add(names[0])
        elif who == "clone":
            driver.create_cloned_volume(*names)
            volumes[names[0]] = (True, "pool")
        elif who == "lvm":
            lab.lvm(*_named(prefix, _argv(lab, prefix, what)))
        else:
            message, *argv = what
            with pytest.raises(LVMCommandError) as refused:
                lab.lvm(*_named(prefix, _argv(lab, prefix, argv)))
            assert refused.value.exit_code == 5 and message in refused.value.stderr


def _text_and_lvs_agree(lab, cache: ReportCache, row: str) -> None:
    fingerprint = cache.fingerprint()
    assert fingerprint is not None
    expected, _ = _lvs_report(lab)
    if os.environ.get("DK_CAPTURE_METADATA_DIR"):
        _capture(lab, f"combination-{row}", fingerprint, cache.sources.read_block,
                 lab.lvm(*lab.vg.report_argv()).stdout)
    parsed = vg_metadata.report_from_pvs(fingerprint, lab.vg_name,
                                         read=cache.sources.read_block)
    assert _fields(parsed) == _fields(expected)


def _pools_agree(lab, drivers, volumes, snapshots) -> None:
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
    assert seen["lvs"] == seen["text"]
    # the text-read driver finds with no process; both ways read the same fields (above)
    driver = drivers["text"]
    for name, (thin_volume, pool) in volumes.items():  # none moved between pools
        found = driver.backend_find_volume(name)
        assert (found.thin, found.pool_name) == (thin_volume, pool), name
    for name in snapshots:
        assert driver.backend_find_snapshot(name) is not None, name
    for name in truth.cow_snapshots:  # a COW snapshot is neither
        assert driver.backend_find_volume(name) is None, name
        assert driver.backend_find_snapshot(name) is None, name


def test_cow_snapshots_with_the_drivers_lvs(lab):
    drivers = {"lvs": lab.driver(lvm_offer_thick=True, lvm_metadata_parse=False,
                                 max_over_subscription_ratio=RATIO),
               "text": lab.driver(lvm_offer_thick=True, lvm_metadata_parse=True,
                                  lvm_read_session=False, max_over_subscription_ratio=RATIO)}
    cache = ReportCache(sources_of(lab.executor), parse_metadata=True)
    cache.learn(parse_pvs_report(lab.lvm(
        "pvs", "--readonly", "--reportformat", "json", "-o",
        "pv_name,pv_uuid,pv_fmt,pv_mda_count,vg_name").stdout, lab.vg_name))
    volumes: dict[str, tuple[bool, str]] = {}
    snapshots: set[str] = set()
    failed = {}
    for index, (row, steps) in enumerate(COMBINATIONS.items()):
        try:
            _apply(lab, drivers["lvs"], f"c{index}-", steps, volumes, snapshots)
            _text_and_lvs_agree(lab, cache, row)
            _pools_agree(lab, drivers, volumes, snapshots)
        except Exception as exc:  # every row's failure, not just the first
            failed[row] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    assert failed == {}


def _as_lvm_printed(text: str) -> list[tuple]:
    """The report's rows, less the driver's per-request marker tags (random)."""
    return [tuple((key, ",".join(tag for tag in value.split(",")
                                 if not tag.startswith(REQUEST_TAG_PREFIX))
                   if key == "lv_tags" else value) for key, value in sorted(row.items()))
            for row in load_rows(text, "lv")]


@pytest.mark.parametrize("row", list(COMBINATIONS))
def test_the_simulator_makes_each_row_as_real_lvm_did(tmp_path, row):
    """Each row on a fresh simulated VG the size of the VM lane's (1023 extents of a
    4 GiB PV) prints the very ``lvs`` report real LVM printed for it, captured in
    ``combination-<row>.json``: names, sizes, attributes, pools, origins, VG figures."""
    lab = Lab("sim", tmp_path, vg_bytes=4 * 1024 ** 3 - 4 * MiB)
    lab.lvm("lvcreate", "-T", "-L", "2g", f"{lab.vg_name}/pool")
    volumes: dict[str, tuple[bool, str]] = {}
    _apply(lab, lab.driver(lvm_offer_thick=True), "", COMBINATIONS[row], volumes, set())
    captured = json.loads((CAPTURED / f"combination-{row}.json").read_text())
    assert _as_lvm_printed(lab.lvm(*lab.vg.report_argv()).stdout) == \
        _as_lvm_printed(captured["lvs"])
