"""The adapter's data path through Cinder's volume manager, on the host.

Cinder's own target helpers (``lioadm``, ``tgtadm``) export the volumes; only
their processes are answered by a record of the targets and ACLs they would
make (``cinder_datapath_side.TargetTools``). Images go through Cinder's
``image_utils`` with the real ``qemu-img``. The same data path on a real LIO
target and a real iSCSI initiator is ``test_cinder_attach_realvm.py``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.ecosystem import lio_commands
from tests.ecosystem.support import (CINDER_INSTALLED, IN_CI, NO_CINDER, backup_options,
                                     requires_cinder, run_cinder_side, write_cinder_conf)

PORTAL = "127.0.0.1:3260"
INSTANCES = [f"00000000-0000-0000-0000-00000000000{i}" for i in range(1, 4)]
IQN_PREFIX = "iqn.2010-10.org.openstack:"


def _sim_section(tmp: Path, name: str, **extra: Any) -> dict[str, Any]:
    vg = name.replace("-", "") + "vg"
    return {"volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
            "driver_kit_driver": "lvm_driver.driver.ThinLVMDriver",
            "volume_backend_name": name, "lvm_backend": "simulator",
            "lvm_simulator_state_file": tmp / f"{name}.json",
            "lvm_simulator_vg_size_gb": 12, "volume_group": vg,
            "lvm_thin_pool_name": "kitpool", "target_ip_address": "127.0.0.1",
            **extra}


@pytest.fixture(scope="module")
def attach(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not CINDER_INSTALLED and not IN_CI:
        pytest.skip(NO_CINDER)
    tmp = tmp_path_factory.mktemp("cinder-attach")
    write_cinder_conf(tmp, {
        "kit-lioadm": _sim_section(tmp, "kit-lioadm", target_helper="lioadm"),
        "kit-tgtadm": _sim_section(tmp, "kit-tgtadm", target_helper="tgtadm"),
        "kit-shared-tgt": _sim_section(tmp, "kit-shared-tgt", target_helper="tgtadm",
                                       lvm_share_target=True),
        "kit-nortstool": _sim_section(tmp, "kit-nortstool", target_helper="lioadm"),
    })
    return run_cinder_side("attach", tmp, script="cinder_datapath_side.py")


HELPERS = pytest.mark.parametrize("helper, lun", [("lioadm", 0), ("tgtadm", 1)])


@requires_cinder
@HELPERS
def test_attach_returns_the_iscsi_connection_of_the_export(
        attach: dict[str, Any], helper: str, lun: int) -> None:
    """create_export stores the target's location and CHAP secret; initialize_connection
    hands them to the host with the portal, IQN and LUN of the helper."""
    steps = attach[helper]["steps"]
    volume = steps["volume"]
    assert volume["device"] == f"/dev/kit{helper}vg/{volume['name']}"
    iqn = IQN_PREFIX + volume["name"]
    fields = steps["attach_a1"]["volume"]
    # the part after the comma is what the helper calls the target: tgt's tid, and
    # for LIO the IQN itself (cinder-rtstool get-targets lists IQNs)
    target = "1" if helper == "tgtadm" else iqn
    assert fields["provider_location"] == f"{PORTAL},{target} {iqn} {lun}"
    method, user, password = fields["provider_auth"].split()
    assert method == "CHAP" and user and password
    assert (fields["status"], fields["attach_status"]) == ("in-use", "attached")
    info = steps["attach_a1"]["info"]
    assert info["driver_volume_type"] == "iscsi"
    assert {k: info[k] for k in ("target_portal", "target_iqn", "target_lun",
                                 "target_discovered", "volume_id", "auth_method",
                                 "auth_username", "auth_password", "access_mode")} == {
        "target_portal": PORTAL, "target_iqn": iqn, "target_lun": lun,
        "target_discovered": False, "volume_id": volume["id"], "auth_method": "CHAP",
        "auth_username": user, "auth_password": password, "access_mode": "rw"}
    # the target exports exactly the volume's device
    assert steps["attach_a1"]["targets"][iqn]["device"] == volume["device"]


@requires_cinder
def test_lio_lets_in_each_host_that_attaches(attach: dict[str, Any]) -> None:
    steps = attach["lioadm"]["steps"]
    iqn = IQN_PREFIX + steps["volume"]["name"]
    a, b = "iqn.1993-08.org.debian:01:compute-a", "iqn.1993-08.org.debian:01:compute-b"
    assert steps["attach_a1"]["targets"][iqn]["acl"] == [a]
    assert steps["attach_a2"]["targets"][iqn]["acl"] == [a]
    assert steps["attach_b"]["targets"][iqn]["acl"] == [a, b]


@requires_cinder
@HELPERS
def test_multiattach_detach_keeps_the_target_until_the_last_attachment(
        attach: dict[str, Any], helper: str, lun: int) -> None:
    """Detaching one of two attachments on a host touches nothing on the target;
    the other host's detach takes only its ACL; the last one removes the export."""
    steps = attach[helper]["steps"]
    iqn = IQN_PREFIX + steps["volume"]["name"]
    assert steps["detach_a2"]["calls"] == []
    assert steps["detach_a2"]["targets"] == steps["extend_attached"]["targets"]
    assert steps["detach_a2"]["volume"]["attachments"] == 2
    if helper == "lioadm":
        assert steps["detach_b"]["targets"][iqn]["acl"] == \
            ["iqn.1993-08.org.debian:01:compute-a"]
    assert iqn in steps["detach_b"]["targets"]
    assert steps["detach_a1"]["targets"] == {}
    assert steps["detach_a1"]["volume"]["status"] == "available"


@requires_cinder
@HELPERS
def test_a_single_attachment_detach_removes_the_export(
        attach: dict[str, Any], helper: str, lun: int) -> None:
    steps = attach[helper]["steps"]
    assert len(steps["single_attach"]["targets"]) == 1
    assert steps["single_detach"]["targets"] == {}
    assert steps["single_detach"]["volume"]["status"] == "available"


@requires_cinder
def test_lio_runs_the_commands_the_vm_lane_proves_on_a_real_target(
        attach: dict[str, Any]) -> None:
    """One attach and detach through the adapter makes Cinder's LioAdm run exactly
    the cinder-rtstool commands (and hand os-brick the connection) that
    test_cinder_services_realvm.py's cinder-volume runs on the kernel's LIO target
    for a real initiator."""
    steps = attach["lioadm"]["steps"]
    volume = steps["single_attach"]["volume"]
    _method, user, password = volume["provider_auth"].split()
    initiator = "iqn.1993-08.org.debian:01:compute-a"
    changes = [call for call in steps["single_detach"]["calls"]
               if call[1] not in ("get-targets", "save")]  # reads and persistence
    assert changes == [
        lio_commands.export(volume["device"], volume["name"], user, password, "127.0.0.1"),
        lio_commands.allow(volume["name"], user, password, initiator),
        lio_commands.deny(volume["name"], initiator),
        lio_commands.remove(volume["name"])]
    info = steps["single_attach"]["info"]
    expected = lio_commands.connection(volume["id"], volume["name"], user, password,
                                       "127.0.0.1")
    assert {key: info[key] for key in expected} == expected


@requires_cinder
def test_extend_while_attached_grows_the_volume_and_refreshes_tgt(
        attach: dict[str, Any]) -> None:
    for helper in ("lioadm", "tgtadm"):
        extend = attach[helper]["steps"]["extend_attached"]
        assert (extend["volume"]["size"], extend["lv_size_gb"]) == (2, 2)
        assert extend["volume"]["status"] == "in-use"
        assert extend["told_nova"] == [sorted(INSTANCES[:3])]  # Nova rescans its hosts
    # tgt re-reads the grown device only when told; LIO's block backstore sees it itself
    iqn = IQN_PREFIX + attach["tgtadm"]["steps"]["volume"]["name"]
    assert attach["tgtadm"]["steps"]["extend_attached"]["calls"] == [
        ["tgt-admin", "--update", iqn, "-f"]]
    assert attach["lioadm"]["steps"]["extend_attached"]["calls"] == []


@requires_cinder
def test_bad_connectors_and_missing_volumes_are_refused_as_cinder_does(
        attach: dict[str, Any]) -> None:
    for helper in ("lioadm", "tgtadm"):
        steps = attach[helper]["steps"]
        assert steps["no_initiator"]["type"] == "InvalidInput"
        assert "initiator" in steps["no_initiator"]["message"]
        assert steps["export_missing"]["type"] == "VolumeNotFound"


@requires_cinder
def test_capabilities_name_the_target_protocol_and_host(attach: dict[str, Any]) -> None:
    caps = attach["lioadm"]["capabilities"]
    assert (caps["storage_protocol"], caps["shared_targets"],
            caps["sparse_copy_volume"]) == ("iSCSI", False, True)
    pool = caps["pools"][0]
    assert pool["multiattach"] is True
    assert pool["location_info"] == \
        f"ThinLVMDriver:{socket.gethostname()}:kitlioadmvg:kitpool"


@requires_cinder
def test_target_helpers_that_cannot_serve_are_config_errors(attach: dict[str, Any]) -> None:
    shared = attach["kit-shared-tgt"]
    assert shared["initialized"] is False
    assert shared["do_setup"]["type"] == "VolumeDriverException"
    assert "lvm_share_target = true: target_helper 'tgtadm' cannot share" in \
        shared["do_setup"]["message"]
    missing = attach["kit-nortstool"]
    assert missing["initialized"] is False
    assert "target_helper = 'lioadm': cannot set up the target helper" in \
        missing["do_setup"]["message"]
    assert "cinder-rtstool" in missing["do_setup"]["message"]


# ------------------------------------------------------------------ images

MiB = 1024 * 1024
IMAGE_ID = "6f1c1a52-3d0e-4c1e-9b8e-000000000001"
UPLOAD_ID = "6f1c1a52-3d0e-4c1e-9b8e-000000000002"
#: (offset, byte) of the image's data: 1 MiB of each byte at each offset
PATTERN = [(0, 0x5A), (300 * MiB, 0xA5), (1023 * MiB, 0x3C)]


def _qemu_img() -> str:
    path = shutil.which("qemu-img")
    if path is None:
        if IN_CI:
            pytest.fail("qemu-img is missing (tools/run-tests.sh installs qemu-utils)")
        pytest.skip("qemu-img is not installed (Debian: qemu-utils)")
    return path


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not CINDER_INSTALLED and not IN_CI:
        pytest.skip(NO_CINDER)
    qemu_img = _qemu_img()
    tmp = tmp_path_factory.mktemp("cinder-images")
    raw = tmp / "source.raw"
    with open(raw, "wb") as image:
        image.truncate(1024 * MiB)
        for offset, byte in PATTERN:
            image.seek(offset)
            image.write(bytes([byte]) * MiB)
    subprocess.run([qemu_img, "convert", "-f", "raw", "-O", "qcow2", str(raw),
                    str(tmp / "source.qcow2")], check=True)
    (tmp / "images.json").write_text(json.dumps(
        {"image_id": IMAGE_ID, "upload_id": UPLOAD_ID,
         "image_path": str(tmp / "source.qcow2"), "disk_format": "qcow2"}))
    write_cinder_conf(tmp, {"kit-sparse": {
        "volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
        "driver_kit_driver": "contrib.sparse_file_driver.SparseFileDriver",
        "volume_backend_name": "kit-sparse", "sparse_pool_dir": tmp / "pool"}},
        defaults=backup_options(tmp / "backups"))
    answer = run_cinder_side("images", tmp, script="cinder_datapath_side.py")
    answer["qemu_img"] = qemu_img
    answer["tmp"] = tmp
    return answer


def _pattern_of(path: str) -> list[tuple[int, bytes]]:
    with open(path, "rb") as data:
        found = []
        for offset, _byte in PATTERN:
            data.seek(offset)
            found.append((offset, data.read(MiB)))
        return found


@requires_cinder
def test_an_image_becomes_a_sparse_volume(images: dict[str, Any]) -> None:
    """A qcow2 image is converted onto the volume's device; only its data is written."""
    assert images["status"] == "available"
    assert images["apparent_bytes"] == 1024 * MiB
    assert images["allocated_bytes"] <= 8 * MiB  # 3 MiB of data, holes elsewhere
    assert _pattern_of(images["path"]) == [(o, bytes([b]) * MiB) for o, b in PATTERN]


@requires_cinder
def test_a_volume_uploads_as_an_image(images: dict[str, Any]) -> None:
    assert images["upload_status"] == "active"
    back = images["tmp"] / "back.raw"
    subprocess.run([images["qemu_img"], "convert", "-f", "qcow2", "-O", "raw",
                    images["uploaded"], str(back)], check=True)
    assert back.stat().st_size == 1024 * MiB
    assert _pattern_of(str(back)) == [(o, bytes([b]) * MiB) for o, b in PATTERN]


@requires_cinder
def test_a_backup_through_the_generic_path_restores_the_volume(
        images: dict[str, Any]) -> None:
    """cinder-backup attaches the volume through the adapter's export (one login per
    backup and restore), copies it with the POSIX driver and removes the exports."""
    backup = images["backup"]
    assert (backup["backup_status"], backup["fail_reason"]) == ("available", None)
    assert backup["volume_status"] == "available"
    assert backup["restore_status"] == "available"
    assert backup["restored_volume_status"] == "available"
    assert len(backup["logins"]) == 2 and backup["targets_left"] == {}
    assert any(name.endswith("_metadata") for name in images["backup_files"])
    assert _pattern_of(backup["restored_path"]) == [(o, bytes([b]) * MiB)
                                                    for o, b in PATTERN]
