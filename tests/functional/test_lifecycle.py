"""Functional scenarios of a volume's whole life on LVM: wipe on delete, adoption of an
operator's LVs (manage/unmanage), revert to a snapshot. Simulator and real LVM alike."""

from __future__ import annotations

import pytest

from driver_kit import NotManaged

MiB = 1024 ** 2
THICK = {"provisioning:type": "thick"}


def _dd_runs(driver) -> list[tuple[str, ...]]:
    return [argv for argv in driver.executor.history if argv[0] == "dd"]


def test_a_thick_volume_is_zeroed_before_its_extents_are_freed(lab):
    # volume_clear_size: the VM lane's PV lives in guest RAM, too small for 1 GiB of
    # zeros; the first 16 MiB hold what was written (a whole-volume wipe is the
    # simulator's test_options_read proof)
    driver = lab.driver(lvm_offer_thick=True, volume_clear_size=16)
    driver.create_volume("thick-a", 1, extra_specs=THICK)
    lab.fill("thick-a", 8 * MiB)
    assert lab.nonzero_bytes("thick-a", 8 * MiB) == 8 * MiB
    driver.delete_volume("thick-a")
    assert _dd_runs(driver) == [("dd", "if=/dev/zero", f"of=/dev/{lab.vg_name}/thick-a",
                                 f"count={16 * MiB}", "bs=1M", "iflag=count_bytes",
                                 "oflag=direct", "conv=fdatasync")]
    # the next LV on those extents reads zeros, not the deleted volume's data
    lab.lvm("lvcreate", "-y", "-L", "1g", "-n", "next-tenant", lab.vg_name)
    assert lab.nonzero_bytes("next-tenant", 8 * MiB) == 0


def test_thin_volumes_are_never_wiped_and_none_turns_wiping_off(lab):
    driver = lab.driver(lvm_offer_thick=True, volume_clear="none")
    driver.create_volume("thin-a", 1)
    driver.create_volume("thick-a", 1, extra_specs=THICK)
    driver.delete_volume("thin-a")
    driver.delete_volume("thick-a")
    assert _dd_runs(driver) == []
    assert not {"thin-a", "thick-a"} & lab.lv_names()


def test_a_failed_wipe_keeps_the_volume(lab):
    if lab.simulator is None:
        pytest.skip("a dd failure is injected on the simulator only")
    driver = lab.driver(lvm_offer_thick=True)
    driver.create_volume("thick-a", 1, extra_specs=THICK)
    lab.simulator.inject("dd", exit_code=1, stderr="dd: error writing: Input/output error\n")
    with pytest.raises(Exception, match="Input/output error"):
        driver.delete_volume("thick-a")
    assert "thick-a" in lab.lv_names()  # not freed unwiped
    driver.delete_volume("thick-a")
    assert "thick-a" not in lab.lv_names()


def _pools(driver) -> dict[str, tuple[float, float, float]]:
    stats = driver.get_volume_stats(refresh=True)
    return {p["pool_name"]: (p["provisioned_capacity_gb"], p["free_capacity_gb"],
                             p["total_capacity_gb"]) for p in stats["pools"]}


def test_adopting_operator_lvs_is_capacity_neutral_and_makes_them_deletable(lab):
    driver = lab.driver(lvm_offer_thick=True)
    lab.lvm("lvcreate", "-T", "-V", "1g", "-n", "operator-thin", f"{lab.vg_name}/pool")
    lab.lvm("lvcreate", "-y", "-L", "512m", "-n", "operator-thick", lab.vg_name)
    listed = {e["reference"]["source-name"]: e for e in driver.manageable_volumes()}
    assert listed["operator-thin"]["safe_to_manage"] and listed["operator-thick"]["size"] == 1
    before = _pools(driver)
    assert driver.manage_existing_get_size({"source-name": "operator-thin"}) == 1
    thin = driver.manage_existing("volume-a", {"source-name": "operator-thin"})
    thick = driver.manage_existing("volume-b", {"source-name": "operator-thick"},
                                   extra_specs=THICK)
    assert (thin.pool_name, thin.thin, thick.pool_name, thick.thin) == \
        ("pool", True, lab.vg_name, False)
    assert _pools(driver) == before  # provisioned counted them already
    assert {"volume-a", "volume-b"} <= lab.lv_names()
    assert not {"operator-thin", "operator-thick"} & lab.lv_names()
    listed = {e["reference"]["source-name"]: e for e in driver.manageable_volumes()}
    assert listed["volume-a"]["reason_not_safe"] == "already managed"
    driver.delete_volume("volume-a")  # the driver's now
    assert "volume-a" not in lab.lv_names()


def test_unmanage_gives_the_lv_back_untouched(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    driver.unmanage("volume-a")
    with pytest.raises(NotManaged):
        driver.delete_volume("volume-a")
    assert "volume-a" in lab.lv_names()
    assert driver.manageable_volumes()[0]["safe_to_manage"] is True
    driver.manage_existing("volume-a", {"source-name": "volume-a"})  # and back again
    driver.delete_volume("volume-a")
    assert "volume-a" not in lab.lv_names()


def test_an_operator_snapshot_is_adopted_as_a_snapshot_of_its_volume(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    lab.lvm("lvcreate", "-s", "-n", "operator-snap", f"{lab.vg_name}/volume-a")
    [entry] = driver.manageable_snapshots()
    assert entry["source_reference"] == {"source-name": "volume-a"}
    assert entry["safe_to_manage"] is True
    driver.manage_existing_snapshot("snap-a", {"source-name": "operator-snap"}, "volume-a")
    assert driver.backend_find_snapshot("snap-a") is not None
    driver.delete_snapshot("snap-a")
    driver.delete_volume("volume-a")
    assert not {"volume-a", "snap-a"} & lab.lv_names()


def test_revert_to_a_snapshot_brings_its_data_back(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    lab.fill("volume-a", 4 * MiB)
    driver.create_snapshot("snap-a", "volume-a")
    lab.fill("volume-a", 64 * MiB)
    before = _pools(driver)["pool"][0]
    driver.revert_to_snapshot("volume-a", "snap-a")
    truth = {lv.name: lv for lv in lab.vg.live_report().lvs}  # each LV's data%: live
    assert truth["volume-a"].data_percent == pytest.approx(0.39, abs=0.01)  # 4 MiB of 1 GiB
    assert truth["snap-a"].origin == "volume-a"  # made anew, same name
    assert "driver_kit_volume" in truth["volume-a"].tags
    assert "driver_kit_snapshot" not in truth["volume-a"].tags
    assert _pools(driver)["pool"][0] == before
    driver.delete_snapshot("snap-a")
    driver.delete_volume("volume-a")
