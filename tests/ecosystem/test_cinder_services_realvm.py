"""Real Cinder services on real LVM, in the VM lane (tests/realvm): LIO and open-iscsi.

In the guest, ``deployment.py`` starts RabbitMQ, MariaDB, cinder-api (gunicorn),
cinder-scheduler and cinder-volume with one backend: the LVM driver through the
adapter on the guest's real VG, exported by Cinder's ``lioadm`` helper (its
``cinder-rtstool`` over Debian's rtslib-fb). The test then does what Nova's
compute host does: creates a volume through the API, asks for an iSCSI
connection (``os-initialize_connection``) with os-brick's connector properties,
attaches through open-iscsi (``iscsid`` started here) with os-brick and marks
it attached (``os-reserve``, ``os-attach``), writes and reads a pattern,
detaches, ends the connection (``os-begin_detaching``,
``os-terminate_connection``, ``os-detach``: the target goes), reads the
pattern back from the LV itself (what went over iSCSI is on the driver's LV),
and deletes the volume; the LV must be gone from ``lvs``. The stack's start and
each step's seconds go to ``test-results/realvm-cinder-timings.json``; progress to
``test-results/realvm-datapath.log`` (the guest's iSCSI set-up is
``realvm_guest.py``'s). In tools/run-tests.sh's VM lane, which first makes
Cinder's schema on the host (``python -m tests.ecosystem.deployment
test-results/cinder-schema.sql``); what keeps the start affordable under TCG,
and its timings: docs/cinder-deployment.md.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.ecosystem.deployment import PERIODS, Deployment, start_deployment, wait_for
from tests.ecosystem.support import REPO
from tests.ecosystem.realvm_guest import guest  # noqa: F401 - a fixture
from tests.ecosystem.realvm_guest import note as _note
from tests.ecosystem.realvm_guest import sh as _sh

# os-brick's dependencies deprecate at import and at use (oslo.utils' eventletutils,
# oslo.service's eventlet backend), out of this project's hands
pytestmark = [pytest.mark.realvm, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

#: every start's time limit times this: TCG runs the services ~10x slower than the host
PATIENCE = 6.0
#: Cinder's periodic tasks at 10 s: at the host lane's 1-3 s the volume service's stats
#: reads (LVM commands of about a second each under TCG) kept a guest CPU busy
VM_PERIODS = {**PERIODS, "report_interval": 10, "periodic_interval": 10,
              "backend_stats_polling_interval": 10}
#: seconds a volume may take to settle in the guest
SETTLE_S = 300
RESULTS = REPO / "test-results"
#: Cinder's database made on the host before the VM (``python -m tests.ecosystem.deployment
#: test-results/cinder-schema.sql``): without it ``db sync`` runs in the guest, minutes more
SCHEMA = RESULTS / "cinder-schema.sql"
MiB = 1024 * 1024
PATTERN = [(0, 0x5A), (300 * MiB, 0xA5)]
FILLED = [[0x5A], [0xA5]]
INSTANCE = "5f0c1e7a-9b3d-4d6e-8a21-7c4b2e9d0a11"  # the server Nova attaches to


@pytest.fixture(scope="module")
def stack(guest: dict[str, str],  # noqa: F811 - the fixture imported above
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The five services in the guest, one backend on the real VG, exported by lioadm."""
    workdir = tmp_path_factory.mktemp("deployment")
    section = {
        "volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
        "driver_kit_driver": "lvm_driver.driver.ThinLVMDriver",
        "volume_backend_name": "kit-lvm", "lvm_backend": "real",
        "volume_group": os.environ["DK_REAL_LVM_VG"], "lvm_thin_pool_name": "cinderpool",
        "lvm_thin_pool_size_percent": 60, "lock_path": workdir / "locks",
        "target_helper": "lioadm", "target_protocol": "iscsi",
        "target_ip_address": "127.0.0.1"}
    # imported before the stack: once the services run it competes with them for the
    # guest's two CPUs (about 3 minutes then, against one before)
    t0 = time.monotonic()
    from os_brick.initiator import connector  # noqa: F401
    _note(f"os-brick imported: {time.monotonic() - t0:.1f} s")
    venv_bin = str(Path(sys.executable).parent)
    with pytest.MonkeyPatch.context() as env:
        # the services' children: cinder-rtstool from the venv, rtslib from Debian
        env.setenv("PYTHONPATH", guest["PYTHONPATH"])
        env.setenv("PATH", os.pathsep.join([venv_bin, os.environ.get("PATH", "")]))
        _note("starting the deployment")
        try:
            deployment = start_deployment(workdir, {"kit-lvm": section}, patience=PATIENCE,
                                          schema=SCHEMA if SCHEMA.exists() else None,
                                          bus_first=True, periods=VM_PERIODS,
                                          progress=_note)
        except BaseException:
            _keep_logs(workdir)
            raise
    _note(f"deployment up: {deployment.timings}")
    try:
        yield deployment
    finally:
        deployment.stop()
        _keep_logs(workdir)
        _sh("lvremove", "-f", "-y", os.environ["DK_REAL_LVM_VG"])


def _keep_logs(workdir: Path) -> None:
    """The services' logs, from guest memory to the shared repository's test-results."""
    kept = RESULTS / "realvm-cinder-logs"
    kept.mkdir(parents=True, exist_ok=True)
    for log in [*workdir.glob("logs/*.log"), workdir / "rabbitmq" / "server.log",
                workdir / "mariadb" / "server.log"]:
        if log.exists():
            shutil.copyfile(log, kept / f"{log.parent.name}-{log.name}")


def _lvs() -> set[str]:
    rc, output = _sh("lvs", "--noheadings", "-o", "lv_name", os.environ["DK_REAL_LVM_VG"])
    assert rc == 0, output
    return {line.strip() for line in output.splitlines() if line.strip()}


def _settled(deployment: Deployment, ident: str, *, gone: bool = False) -> Any:
    """The volume once it stops moving (``gone``: once the API no longer has it)."""
    def look() -> Any:
        try:
            volume = deployment.api(f"volumes/{ident}")["volume"]
        except OSError as exc:  # HTTPError 404: deleted
            return gone and getattr(exc, "code", None) == 404 and {"deleted": True}
        if gone:
            return volume["status"] == "error_deleting" and volume
        return volume["status"] not in ("creating", "downloading") and volume
    return wait_for(f"volume {ident} settled", look, SETTLE_S, interval_s=1)


def _read(path: str) -> list[list[int]]:
    """The distinct byte values of the MiB at each pattern offset."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return [sorted(set(os.pread(fd, MiB, offset))) for offset, _ in PATTERN]
    finally:
        os.close(fd)


def _device(volume_id: str) -> str:
    """The driver's LV of ``volume_id`` in the guest's VG."""
    return f"/dev/{os.environ['DK_REAL_LVM_VG']}/volume-{volume_id}"


def _write(path: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        for offset, byte in PATTERN:
            os.pwrite(fd, bytes([byte]) * MiB, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def journey(stack: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Nova's host's part, step by step; each step's answer and seconds."""
    from oslo_concurrency import lockutils

    from os_brick import privileged
    lockutils.set_defaults(str(tmp_path_factory.mktemp("brick-locks")))
    from os_brick.initiator import connector
    privileged.default.set_client_mode(False)  # root in the VM: no privsep daemon
    props = connector.get_connector_properties(None, "127.0.0.1", False, False)
    iscsi = connector.InitiatorConnector.factory("ISCSI", None, use_multipath=False,
                                                 device_scan_attempts=3)
    answer: dict[str, Any] = {"seconds": {}, "steps": {}}

    def step(name: str, call: Callable[[], Any]) -> Any:
        _note(f"step {name} ...")
        start = time.monotonic()
        try:
            answer["steps"][name] = call()
        finally:
            answer["seconds"][name] = round(time.monotonic() - start, 1)
            _note(f"step {name}: {answer['seconds'][name]} s {answer['steps'].get(name)}")
        return answer["steps"][name]

    def create() -> dict[str, Any]:
        made = stack.api("volumes", {"volume": {"size": 1, "name": "realvm-a"}})["volume"]
        volume = _settled(stack, made["id"])
        return {"id": volume["id"], "status": volume["status"],
                "host": volume.get("os-vol-host-attr:host"), "lvs": sorted(_lvs())}

    def action(name: str, body: Any) -> Any:
        return stack.api(f"volumes/{volume_id}/action", {name: body})

    def attach() -> dict[str, Any]:
        """Nova's attach and detach, as its volume API calls them (the legacy flow)."""
        action("os-reserve", None)
        info = action("os-initialize_connection", {"connector": props})["connection_info"]
        backstores = sorted(path.read_text().strip() for path in Path(
            "/sys/kernel/config/target/core").glob("iblock_*/*/udev_path"))
        attached = iscsi.connect_volume(dict(info["data"]))
        try:
            action("os-attach", {"instance_uuid": INSTANCE, "mountpoint": "/dev/vdb",
                                 "mode": "rw"})
            result = {"driver_volume_type": info["driver_volume_type"],
                      "auth_method": info["data"].get("auth_method"),
                      "status_attached": stack.api(f"volumes/{volume_id}")["volume"]["status"],
                      "backstores": backstores,
                      "path": attached["path"], "read": _read(attached["path"])}
            _write(attached["path"])
            result["read_after_write"] = _read(attached["path"])
        finally:
            iscsi.disconnect_volume(dict(info["data"]), attached)
        action("os-begin_detaching", None)
        action("os-terminate_connection", {"connector": props})
        attachment = stack.api(f"volumes/{volume_id}")["volume"]["attachments"][0]
        action("os-detach", {"attachment_id": attachment["attachment_id"]})
        target = Path("/sys/kernel/config/target/iscsi") / info["data"]["target_iqn"]
        result.update(sessions_after=_sh("iscsiadm", "-m", "session")[0],
                      target_after=target.exists(),
                      status_detached=stack.api(f"volumes/{volume_id}")["volume"]["status"])
        return result

    def delete() -> dict[str, Any]:
        stack.api(f"volumes/{volume_id}", method="DELETE")
        return {"gone": _settled(stack, volume_id, gone=True), "lvs": sorted(_lvs())}

    answer["stack_start_seconds"] = {k: round(v, 1) for k, v in stack.timings.items()}
    try:  # the timings are kept whatever step fails
        volume_id = step("create", create)["id"]
        step("attach_write_detach", attach)
        step("lv_after_detach", lambda: {"read": _read(_device(volume_id))})
        step("delete", delete)
    finally:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "realvm-cinder-timings.json").write_text(json.dumps(
            {"stack start": answer["stack_start_seconds"], "steps": answer["seconds"]},
            indent=1) + "\n")
    print("stack start seconds:", answer["stack_start_seconds"])
    print("step seconds:", answer["seconds"])
    return answer


def test_cinder_creates_the_volume_as_a_thin_lv_of_the_real_pool(
        journey: dict[str, Any]) -> None:
    created = journey["steps"]["create"]
    assert created["status"] == "available", created
    assert created["host"].endswith("@kit-lvm#cinderpool"), created
    assert f"volume-{created['id']}" in created["lvs"]


def test_attach_over_iscsi_keeps_what_was_written_across_detach(
        journey: dict[str, Any]) -> None:
    first = journey["steps"]["attach_write_detach"]
    assert (first["driver_volume_type"], first["auth_method"]) == ("iscsi", "CHAP"), first
    assert first["path"].startswith("/dev/sd"), first
    assert first["status_attached"] == "in-use", first
    # LIO exports the driver's own LV (cinder-rtstool's block backstore on its device)
    assert first["backstores"] == [_device(journey["steps"]["create"]["id"])], first
    assert first["read"] == [[0], [0]]  # a new thin volume reads as zeros
    assert first["read_after_write"] == FILLED
    assert journey["steps"]["lv_after_detach"]["read"] == FILLED  # on the LV, not a cache


def test_detach_logs_out_and_removes_the_target(
        journey: dict[str, Any]) -> None:
    step = journey["steps"]["attach_write_detach"]
    assert step["sessions_after"] == 21, step  # iscsiadm: no active sessions
    assert step["target_after"] is False, step
    assert step["status_detached"] == "available", step


def test_delete_through_cinder_removes_the_lv(journey: dict[str, Any]) -> None:
    deleted = journey["steps"]["delete"]
    assert deleted["gone"] == {"deleted": True}, deleted
    assert f"volume-{journey['steps']['create']['id']}" not in deleted["lvs"]
