"""Functional scenarios of a volume's whole life on LVM: wipe on delete, adoption of an
operator's LVs (manage/unmanage), revert to a snapshot. Simulator and real LVM alike."""

from __future__ import annotations

import pytest

from driver_kit import GiB

MiB = 1024 ** 2
THICK = {"provisioning:type": "thick"}


def _dd_runs(driver) -> list[tuple[str, ...]]:
    return [argv for argv in driver.executor.history if argv[0] == "dd"]


def test_a_thick_volume_is_zeroed_before_its_extents_are_freed(lab):
    driver = lab.driver(lvm_offer_thick=True)
    driver.create_volume("thick-a", 1, extra_specs=THICK)
    lab.fill("thick-a", 8 * MiB)
    assert lab.nonzero_bytes("thick-a", 8 * MiB) == 8 * MiB
    driver.delete_volume("thick-a")
    assert _dd_runs(driver) == [("dd", "if=/dev/zero", f"of=/dev/{lab.vg_name}/thick-a",
                                 f"count={GiB}", "bs=1M", "iflag=count_bytes",
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
