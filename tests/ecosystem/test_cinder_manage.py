"""Manage, unmanage, retype, revert and wipe through Cinder's real volume manager
(host lane: the LVM simulator, Cinder's objects, database and flows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.ecosystem.support import (CINDER_INSTALLED, IN_CI, NO_CINDER, requires_cinder,
                                      run_cinder_side, write_cinder_conf)


@pytest.fixture(scope="module")
def answer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not CINDER_INSTALLED and not IN_CI:
        pytest.skip(NO_CINDER)
    tmp: Path = tmp_path_factory.mktemp("cinder-manage")
    write_cinder_conf(tmp, {"kit-lvm": {
        "volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
        "driver_kit_driver": "lvm_driver.driver.ThinLVMDriver",
        "volume_backend_name": "kit-lvm", "lvm_backend": "simulator",
        "lvm_simulator_state_file": tmp / "kit-lvm.json", "lvm_simulator_vg_size_gb": 12,
        "volume_group": "kitvg", "lvm_thin_pool_name": "kitpool",
        "lvm_thin_pool_size_percent": 50, "lvm_offer_thick": True,
        "max_over_subscription_ratio": "2.0", "volume_clear_size": 5}})
    return run_cinder_side("", tmp, script="cinder_manage_side.py")


def _by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["reference"]["source-name"]: e for e in entries}


@requires_cinder
def test_manageable_lists_say_what_is_safe_as_cinder_does(answer) -> None:
    listed = _by_name(answer["listed"])
    assert listed["legacy-busy"]["safe_to_manage"] is False
    assert listed["legacy-busy"]["reason_not_safe"] == "volume in use"  # open
    assert listed["legacy-data"]["safe_to_manage"] is True  # its snapshot comes after it
    assert set(listed["legacy-data"]) >= {"reference", "size", "safe_to_manage",
                                          "reason_not_safe", "cinder_id", "extra_info"}
    [snap] = answer["listed_snapshots"]
    assert snap["source_reference"] == {"source-name": "legacy-data"}
    after = _by_name(answer["listed_after"])
    name = answer["managed"]["name"]
    assert after[name]["reason_not_safe"] == "already managed"
    assert after[name]["cinder_id"] == name.removeprefix("volume-")


@requires_cinder
def test_manage_adopts_the_lv_without_taking_capacity(answer) -> None:
    assert answer["managed"] == {"status": "available", "size": 2, "found": True,
                                 "name": answer["managed"]["name"]}
    assert answer["pools_after"] == answer["pools_before"]
    assert answer["managed_snapshot"] == {"status": "available", "found": True}


@requires_cinder
def test_bad_references_arrive_as_cinders_manage_errors(answer) -> None:
    assert answer["busy_error"]["type"] == "ManageExistingInvalidReference"
    assert "in use" in answer["busy_error"]["message"]
    assert answer["missing_error"]["type"] == "ManageExistingInvalidReference"
    assert answer["again_error"]["type"] == "ManageExistingAlreadyManaged"


@requires_cinder
def test_retype_in_place_only_within_pool_and_provisioning(answer) -> None:
    assert answer["retype_same"] == {"status": "available", "type": True}
    assert answer["retype_to_thick_driver"] is False


@requires_cinder
def test_revert_to_snapshot_through_the_volume_manager(answer) -> None:
    revert = answer["revert"]
    assert (revert["status"], revert["snapshot_status"], revert["snapshot_found"]) == \
        ("available", "available", True)
    assert revert["data_percent_after"] < revert["data_percent_before"]


@requires_cinder
def test_unmanage_leaves_the_lvs_without_the_drivers_tags(answer) -> None:
    for tags in answer["unmanaged"].values():
        assert not [t for t in tags if t.startswith("driver_kit_")]


@requires_cinder
def test_a_thick_delete_is_wiped_as_cinder_conf_says(answer) -> None:
    [wipe] = answer["wipes"]
    assert wipe["bytes"] == 5 * 1024 ** 2  # volume_clear_size = 5 (MiB), Cinder's option
