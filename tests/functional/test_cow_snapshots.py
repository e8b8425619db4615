"""An operator's old-style (COW) snapshot of a volume the driver made, ``lvcreate -s -L``:
legal, common for backups, and LVM then shows the thin origin with volume type ``o``.
The pools stay up, the volume stays a thin volume of its pool, the snapshot's store is
thick space in the VG, admission is what it was (less the store on the thick side), and
the origin is not deleted while the snapshot exists. On the simulator and on real LVM,
with the VG read through ``lvs`` and through its metadata text."""

from __future__ import annotations

import math

import pytest

from driver_kit import CapacityExceeded, GiB, NotManaged, VolumeBusy
from driver_kit.units import bytes_to_gb_down, bytes_to_gb_up
from tests.functional.cow_truth import pools_of, vg_truth

COW_BYTES = 32 * 1024 ** 2
THICK = {"provisioning:type": "thick"}


def _drivers(lab):
    """One driver reading the VG through ``lvs``, one through its metadata text."""
    return {"lvs": lab.driver(lvm_offer_thick=True, lvm_metadata_parse=False),
            "text": lab.driver(lvm_offer_thick=True, lvm_metadata_parse=True,
                               lvm_read_session=False)}


def _assert_pools_match(lab, drivers, truth, *, largest_thin: int) -> None:
    for way, driver in drivers.items():
        pools = pools_of(driver)
        thin, thick = pools["pool"], pools[lab.vg_name]
        cow = sum(truth.cow_snapshots.values())
        assert (thin["backend_state"], thick["backend_state"]) == ("up", "up"), way
        assert thin["provisioned_capacity_gb"] == bytes_to_gb_up(
            sum(truth.thin_volumes.values())), way
        assert thin["total_volumes"] == len(truth.thin_volumes), way
        assert thin["max_volume_size_gb"] == largest_thin, way
        assert thick["provisioned_capacity_gb"] == bytes_to_gb_up(
            sum(truth.thick_volumes.values())), way
        assert thick["total_volumes"] == len(truth.thick_volumes), way
        assert thick["free_capacity_gb"] == bytes_to_gb_down(truth.vg_free), way
        assert thick["snapshot_capacity_gb"] == bytes_to_gb_up(cow), way
        assert thick["total_capacity_gb"] == bytes_to_gb_down(
            truth.vg_free + sum(truth.thick_volumes.values()) + cow), way
        assert thick["max_volume_size_gb"] == math.floor(truth.vg_free / GiB), way
        volume = driver.backend_find_volume("volume-a")
        assert (volume.thin, volume.pool_name) == (True, "pool"), way


def test_a_thin_volume_with_an_operators_cow_snapshot(lab):
    drivers = _drivers(lab)
    driver = drivers["lvs"]
    driver.create_volume("volume-a", 1)
    largest_thin = pools_of(driver)["pool"]["max_volume_size_gb"]
    free_before = vg_truth(lab).vg_free

    lab.lvm("lvcreate", "-s", "-L", "32m", "-n", "cow-a", f"{lab.vg_name}/volume-a")
    truth = vg_truth(lab)
    assert truth.cow_snapshots == {"cow-a": COW_BYTES}
    assert truth.thin_volumes == {"volume-a": GiB}
    assert free_before - truth.vg_free == COW_BYTES  # LVM allocated the store's extents
    _assert_pools_match(lab, drivers, truth, largest_thin=largest_thin)

    # near the cap: admitted and refused exactly as without the snapshot
    driver.create_volume("volume-big", largest_thin)
    with pytest.raises(CapacityExceeded):
        drivers["text"].create_volume("volume-over", 1)
    largest_thick = math.floor(truth.vg_free / GiB)
    with pytest.raises(CapacityExceeded):
        driver.create_volume("thick-over", largest_thick + 1, extra_specs=THICK)

    # the origin is busy while the snapshot exists; the snapshot is no volume of it
    for way, each in drivers.items():
        with pytest.raises(VolumeBusy, match="cow-a"):
            each.delete_volume("volume-a")
        with pytest.raises(NotManaged, match="COW snapshot of 'volume-a'"):
            each.delete_volume("cow-a")
    assert {"volume-a", "cow-a"} <= lab.lv_names()

    lab.lvm("lvremove", "-f", f"{lab.vg_name}/cow-a")  # the operator's own delete
    truth = vg_truth(lab)
    assert truth.cow_snapshots == {} and truth.vg_free == free_before
    _assert_pools_match(lab, drivers, truth, largest_thin=0)
    drivers["text"].delete_volume("volume-a")
    assert "volume-a" not in lab.lv_names()
