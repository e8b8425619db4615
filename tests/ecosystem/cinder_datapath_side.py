"""Cinder's side of the data-path tests: export, attach, detach, extend and images.

    python tests/ecosystem/cinder_datapath_side.py {attach|images} WORKDIR

Real Cinder objects, database and volume manager run the adapter, as in
``cinder_side.py``. ``attach`` runs Cinder's own target helpers (``lioadm``,
``tgtadm``) with only their processes replaced: ``TargetTools`` answers for
``cinder-rtstool``, ``tgt-admin`` and ``tgtadm`` and keeps the targets and ACLs
they would have made, so the answer shows what the kernel target would hold
after each step. ``images`` copies an image to a volume and back through
Cinder's ``image_utils`` with the real ``qemu-img`` (Glance is a directory),
then backs the volume up and restores it into a new one through cinder-backup's
generic path (``BackupManager`` with the POSIX driver on a directory): the
backup manager reaches the volume manager by direct calls instead of RPC, and
its iSCSI connector finds the device of the target it logs in to in
``TargetTools``' record (the real connector runs in the VM lane).
The attachment lifecycle is the one Cinder's API drives: an attachment
record, ``attachment_update`` on the manager, ``attachment_delete`` on the
manager, then ``finish_detach`` on the volume.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.ecosystem import cinder_side as side  # noqa: E402 (sets up Cinder first)

import cinder.privsep  # noqa: E402
from cinder import objects  # noqa: E402
from cinder.backup import manager as backup_manager  # noqa: E402
from cinder.compute import nova  # noqa: E402
from cinder.image import glance  # noqa: E402
from cinder.volume import volume_types  # noqa: E402
from cinder.volume import volume_utils  # noqa: E402
from oslo_concurrency import processutils  # noqa: E402
from oslo_service import loopingcall  # noqa: E402

REAL_EXECUTE = processutils.execute


class TargetTools:
    """The target tools' processes, answered from a record of what they would have made.

    LIO (``cinder-rtstool``): targets by IQN with their device, CHAP user and
    ACL of initiators. tgt (``tgt-admin``, ``tgtadm``): targets by IQN with a
    tid and the backing store read from the file TgtAdm writes in
    ``volumes_dir``. Any other command runs for real, as the current user.
    """

    def __init__(self, volumes_dir: Path) -> None:
        self.volumes_dir = volumes_dir
        self.lio: dict[str, dict[str, Any]] = {}
        self.tgt: dict[str, dict[str, Any]] = {}
        self.calls: list[list[str]] = []
        self.rtstool_installed = True
        self._next_tid = 1

    def __call__(self, *cmd: Any, **kwargs: Any) -> tuple[str, str]:
        argv = [str(c) for c in cmd]
        tool = argv[0]
        if tool == "cinder-rtstool":
            if not self.rtstool_installed:
                raise FileNotFoundError(2, "No such file or directory", tool)
            self.calls.append(argv)
            return self._rtstool(argv[1], argv[2:]), ""
        if tool in ("tgt-admin", "tgtadm"):
            self.calls.append(argv)
            return self._tgt(argv), ""
        kwargs.pop("root_helper", None)
        kwargs["run_as_root"] = False
        return REAL_EXECUTE(*cmd, **kwargs)

    def _rtstool(self, verb: str, args: list[str]) -> str:
        if verb == "create":
            device, iqn, user, password = args[:4]
            self.lio.setdefault(iqn, {"device": device, "chap_user": user,
                                      "chap_password": password, "acl": []})
        elif verb == "add-initiator":
            iqn, user, _password, initiator = args
            if initiator not in self.lio[iqn]["acl"]:
                self.lio[iqn]["acl"].append(initiator)
            self.lio[iqn]["chap_user"] = user
        elif verb == "delete-initiator":
            iqn, initiator = args
            self.lio[iqn]["acl"].remove(initiator)
        elif verb == "delete":
            self.lio.pop(args[0], None)
        elif verb == "get-targets":
            return "".join(f"{iqn}\n" for iqn in self.lio)
        return ""  # verify, save, restore

    def _tgt(self, argv: list[str]) -> str:
        if "--update" in argv:
            iqn = argv[argv.index("--update") + 1]
            if iqn in self.tgt:
                self.tgt[iqn]["updates"] += 1
                return ""
            conf = (self.volumes_dir / iqn.split(":", 1)[1]).read_text()
            store = conf.split("backing-store", 1)[1].split()[0]
            self.tgt[iqn] = {"tid": self._next_tid, "device": store, "updates": 0}
            self._next_tid += 1
        elif "--delete" in argv:
            self.tgt.pop(argv[argv.index("--delete") + 1], None)
        elif "--show" in argv or "show" in argv:
            return "".join(f"Target {t['tid']}: {iqn}\n    LUN information:\n"
                           f"        LUN: 0\n            Type: controller\n"
                           f"        LUN: 1\n            Type: disk\n"
                           f"            Backing store path: {t['device']}\n"
                           for iqn, t in self.tgt.items())
        return ""

    def state(self, helper: str) -> dict[str, Any]:
        return json.loads(json.dumps(self.lio if helper == "lioadm" else self.tgt))


class DirectoryGlance:
    """An image service over a directory: what the volume manager asks Glance for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.meta: dict[str, dict[str, Any]] = {}
        self.temp_images = None  # image_utils.TemporaryImages keeps its cache here

    def add(self, image_id: str, path: Path, disk_format: str) -> None:
        shutil.copyfile(path, self.root / image_id)
        self.meta[image_id] = {"id": image_id, "disk_format": disk_format,
                               "container_format": "bare", "status": "active",
                               "size": path.stat().st_size, "properties": {}}

    def show(self, context: Any, image_id: str) -> dict[str, Any]:
        return dict(self.meta[image_id])

    def get_location(self, context: Any, image_id: str) -> tuple[None, list[Any]]:
        return None, []

    def download(self, context: Any, image_id: str, data: Any) -> None:
        with open(self.root / image_id, "rb") as image:
            shutil.copyfileobj(image, data, 1024 * 1024)

    def update(self, context: Any, image_id: str, meta: dict[str, Any], data: Any,
               **kwargs: Any) -> dict[str, Any]:
        with open(self.root / image_id, "wb") as image:
            shutil.copyfileobj(data, image, 1024 * 1024)
        self.meta.setdefault(image_id, {"id": image_id}).update(status="active")
        return self.meta[image_id]

    def delete(self, context: Any, image_id: str) -> None:
        self.meta.pop(image_id, None)


class DirectVolumeRPC:
    """The volume manager's RPC API as the backup manager calls it, as direct calls."""

    def __init__(self, manager: Any, backups: Any) -> None:
        self.manager = manager
        self.backups = backups

    def get_backup_device(self, ctxt: Any, backup: Any, volume: Any) -> None:
        device = self.manager.get_backup_device(ctxt, backup, want_objects=True)
        self.backups.continue_backup(ctxt, backup, device)  # the manager's callback

    def secure_file_operations_enabled(self, ctxt: Any, volume: Any) -> bool:
        return self.manager.secure_file_operations_enabled(ctxt, volume)

    def initialize_connection(self, ctxt: Any, volume: Any, connector: Any) -> Any:
        return self.manager.initialize_connection(ctxt, volume, connector)

    def terminate_connection(self, ctxt: Any, volume: Any, connector: Any,
                             force: bool = False) -> None:
        self.manager.terminate_connection(ctxt, volume.id, connector, force=force)

    def remove_export(self, ctxt: Any, volume: Any, sync: bool = False) -> None:
        self.manager.remove_export(ctxt, volume.id)


class RecordedTargetConnector:
    """os-brick's iSCSI connector on the host lane: "logs in" to a target of the record."""

    def __init__(self, tools: TargetTools) -> None:
        self.tools = tools
        self.logins: list[str] = []

    def connect_volume(self, data: dict[str, Any]) -> dict[str, Any]:
        target = {**self.tools.lio, **self.tools.tgt}[data["target_iqn"]]
        self.logins.append(data["target_iqn"])
        return {"type": "block", "path": target["device"]}

    def disconnect_volume(self, data: dict[str, Any], device: Any, **kwargs: Any) -> None:
        return None


def backup_and_restore(manager: Any, volume: Any, restore_into: Any | None) -> dict[str, Any]:
    """Back ``volume`` up with cinder-backup's generic path; restore into ``restore_into``."""
    context = side.ctxt()
    backups = backup_manager.BackupManager(host=manager.host)
    try:  # what init_host's set-up loop runs: the driver's setup check
        backups._setup_backup_driver(context)
    except loopingcall.LoopingCallDone:
        pass
    backups.volume_rpcapi = DirectVolumeRPC(manager, backups)
    volume = objects.Volume.get_by_id(context, volume.id)
    volume.update({"status": "backing-up", "previous_status": "available"})
    volume.save()
    backup = objects.Backup(context, volume_id=volume.id, status="creating",
                            host=manager.host, user_id="user", project_id="project",
                            size=volume.size, display_name="kit-backup",
                            availability_zone="nova")
    backup.create()
    backups.create_backup(context, backup)
    backup.refresh()
    volume.refresh()
    answer: dict[str, Any] = {"backup_status": backup.status, "fail_reason": backup.fail_reason,
                              "volume_status": volume.status,
                              "volume_provider_location": volume.provider_location}
    if restore_into is not None and backup.status == "available":
        target = objects.Volume.get_by_id(context, restore_into.id)
        target.update({"status": "restoring-backup"})
        target.save()
        backup.update({"status": "restoring"})
        backup.save()
        backups.restore_backup(context, backup, target.id, False)
        backup.refresh()
        target.refresh()
        answer.update(restore_status=backup.status, restored_volume_status=target.status)
    return answer


def connector(host: str, initiator: str) -> dict[str, Any]:
    """What os-brick's get_connector_properties reports for an iSCSI host."""
    return {"host": host, "initiator": initiator, "ip": "127.0.0.1", "multipath": False,
            "platform": "x86_64", "os_type": "linux", "do_local_attach": False}


class Lifecycle:
    """Attachments as Cinder's API drives them, on one volume manager."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.context = side.ctxt()

    def volume(self, host: str, size: int = 1, multiattach: bool = False,
               type_name: str | None = None) -> Any:
        vtype = volume_types.get_volume_type_by_name(self.context, type_name) \
            if type_name else None
        volume = objects.Volume(self.context, size=size, host=host, status="creating",
                                attach_status="detached", project_id="project",
                                user_id="user", availability_zone="nova",
                                multiattach=multiattach,
                                volume_type_id=vtype["id"] if vtype else None)
        volume.create()
        volume = objects.Volume.get_by_id(self.context, volume.id)
        self.manager.create_volume(self.context, volume)
        volume.refresh()
        return volume

    def attach(self, volume: Any, conn: dict[str, Any], instance: str) -> tuple[str, Any]:
        attachment = objects.VolumeAttachment(self.context, volume_id=volume.id,
                                              instance_uuid=instance,
                                              attach_status="reserved", attach_mode="rw")
        attachment.create()
        volume = objects.Volume.get_by_id(self.context, volume.id)
        info = self.manager.attachment_update(self.context, volume, dict(conn),
                                              attachment.id)
        # Nova has connected the host: it marks the attachment complete
        attachment = objects.VolumeAttachment.get_by_id(self.context, attachment.id)
        attachment.update({"attach_status": "attached"})
        attachment.save()
        volume = objects.Volume.get_by_id(self.context, volume.id)
        volume.update({"status": "in-use", "attach_status": "attached"})
        volume.save()
        return attachment.id, info

    def detach(self, volume_id: str, attachment_id: str) -> None:
        volume = objects.Volume.get_by_id(self.context, volume_id)
        self.manager.attachment_delete(self.context, attachment_id, volume)
        volume = objects.Volume.get_by_id(self.context, volume_id)
        volume.finish_detach(attachment_id)


INSTANCES = [f"00000000-0000-0000-0000-00000000000{i}" for i in range(1, 6)]
HOST_A = connector("compute-a", "iqn.1993-08.org.debian:01:compute-a")
HOST_B = connector("compute-b", "iqn.1993-08.org.debian:01:compute-b")
BACKUP_HOST = connector("backup-1", "iqn.1993-08.org.debian:01:backup-1")


def _steps(helper: str, tools: TargetTools, manager: Any) -> Iterator[tuple[str, Any]]:
    """Each step's name and what it left: connection info, volume fields, targets."""
    life = Lifecycle(manager)
    kit = manager.driver.kit
    host = f"node1@kit-{helper}#kitpool"

    def volume_fields(volume_id: str) -> dict[str, Any]:
        volume = objects.Volume.get_by_id(life.context, volume_id)
        return {"status": volume.status, "attach_status": volume.attach_status,
                "provider_location": volume.provider_location,
                "provider_auth": volume.provider_auth, "size": volume.size,
                "attachments": len(volume.volume_attachment)}

    shared = life.volume(host, multiattach=True)
    yield "volume", {"id": shared.id, "name": shared.name,
                     "device": manager.driver.local_path(shared)}
    first, info = life.attach(shared, HOST_A, INSTANCES[0])
    yield "attach_a1", {"info": info, "volume": volume_fields(shared.id),
                        "targets": tools.state(helper)}
    second, info = life.attach(shared, HOST_A, INSTANCES[1])
    yield "attach_a2", {"info": info, "targets": tools.state(helper)}
    third, info = life.attach(shared, HOST_B, INSTANCES[2])
    yield "attach_b", {"info": info, "targets": tools.state(helper)}

    before = len(tools.calls)
    told_nova: list[Any] = []  # no Nova here: the manager's event to it is recorded
    nova.API.extend_volume = lambda self, context, instances, volume_id: \
        told_nova.append(sorted(instances))
    manager.extend_volume(life.context, objects.Volume.get_by_id(life.context, shared.id),
                          2, [])
    yield "extend_attached", {"volume": volume_fields(shared.id),
                              "lv_size_gb": kit.backend_find_volume(shared.name).size_gb,
                              "calls": tools.calls[before:], "targets": tools.state(helper),
                              "told_nova": told_nova}

    before = len(tools.calls)
    life.detach(shared.id, second)
    yield "detach_a2", {"volume": volume_fields(shared.id), "calls": tools.calls[before:],
                        "targets": tools.state(helper)}
    life.detach(shared.id, third)
    yield "detach_b", {"volume": volume_fields(shared.id), "targets": tools.state(helper)}
    life.detach(shared.id, first)
    yield "detach_a1", {"volume": volume_fields(shared.id), "targets": tools.state(helper)}

    single = life.volume(host)
    before = len(tools.calls)
    only, info = life.attach(single, HOST_A, INSTANCES[3])
    yield "single_attach", {"info": info, "targets": tools.state(helper),
                            "volume": {"id": single.id, "name": single.name,
                                       "device": manager.driver.local_path(single),
                                       **volume_fields(single.id)}}
    life.detach(single.id, only)
    yield "single_detach", {"volume": volume_fields(single.id),
                            "targets": tools.state(helper), "calls": tools.calls[before:]}

    no_initiator = {k: v for k, v in HOST_A.items() if k != "initiator"}
    yield "no_initiator", side.error_of(lambda: life.attach(single, no_initiator,
                                                             INSTANCES[4]))
    gone = objects.Volume.get_by_id(life.context, single.id)
    kit.delete_volume(gone.name)
    yield "export_missing", side.error_of(
        lambda: manager.driver.create_export(life.context, gone, HOST_A))


def run_attach(workdir: Path) -> dict[str, Any]:
    """Both iSCSI target helpers through the volume manager, their tools answered."""
    cinder.privsep.sys_admin_pctxt.set_client_mode(False)  # tgt's privsep calls in-process
    tools = TargetTools(workdir / "state" / "volumes")
    processutils.execute = tools
    answer: dict[str, Any] = {}
    for helper in ("lioadm", "tgtadm"):
        manager = side.volume_service(f"kit-{helper}", f"node1@kit-{helper}")
        answer[helper] = {"initialized": manager.driver.initialized,
                          "capabilities": side.reported(manager),
                          "steps": dict(_steps(helper, tools, manager))}
    tools.rtstool_installed = False
    for section in ("kit-shared-tgt", "kit-nortstool"):
        broken = side.volume_service(section, f"node1@{section}").driver
        answer[section] = {"initialized": broken.initialized,
                           "do_setup": side.error_of(lambda: broken.do_setup(side.ctxt()))}
    return answer


def run_images(workdir: Path) -> dict[str, Any]:
    """An image onto a new volume and the volume back to an image, through the manager."""
    cinder.privsep.sys_admin_pctxt.set_client_mode(False)  # format inspection in-process
    tools = TargetTools(workdir / "state" / "volumes")
    processutils.execute = tools
    store = DirectoryGlance(workdir / "glance")
    store.root.mkdir()
    glance.get_remote_image_service = lambda context, href: (store, href)
    spec = json.loads((workdir / "images.json").read_text())
    store.add(spec["image_id"], Path(spec["image_path"]), spec["disk_format"])
    upload_id = spec["upload_id"]

    manager = side.volume_service("kit-sparse", "node1@kit-sparse")
    life = Lifecycle(manager)
    volume = objects.Volume(life.context, size=1, host="node1@kit-sparse#sparse",
                            status="creating", attach_status="detached",
                            project_id="project", user_id="user", availability_zone="nova")
    volume.create()
    volume = objects.Volume.get_by_id(life.context, volume.id)
    manager.create_volume(life.context, volume,
                          request_spec=objects.RequestSpec(image_id=spec["image_id"]))
    volume.refresh()
    path = manager.driver.local_path(volume)
    stat = os.stat(path)
    answer: dict[str, Any] = {"status": volume.status, "path": path,
                              "apparent_bytes": stat.st_size,
                              "allocated_bytes": stat.st_blocks * 512}
    upload = {"id": upload_id, "disk_format": "qcow2", "container_format": "bare"}
    store.meta[upload_id] = dict(upload, status="queued")
    volume.status = "uploading"
    volume.save()
    manager.copy_volume_to_image(life.context, volume.id, upload)
    answer["uploaded"] = str(store.root / upload_id)
    answer["upload_status"] = store.meta[upload_id]["status"]
    volume.update({"status": "available"})
    volume.save()

    brick = RecordedTargetConnector(tools)
    volume_utils.brick_get_connector = lambda protocol, *args, **kwargs: brick
    volume_utils.brick_get_connector_properties = lambda *args, **kwargs: dict(BACKUP_HOST)
    restored = life.volume("node1@kit-sparse#sparse")
    answer["backup"] = backup_and_restore(manager, volume, restored)
    answer["backup"].update(logins=brick.logins, targets_left=tools.state("tgtadm"),
                            restored_path=manager.driver.local_path(restored))
    answer["backup_files"] = sorted(p.name for p in (workdir / "backups").rglob("*")
                                    if p.is_file())
    return answer


def main(argv: list[str]) -> int:
    command, workdir = argv[1], Path(argv[2])
    side.start(workdir)
    answer = {"attach": run_attach, "images": run_images}[command](workdir)
    (workdir / "answer.json").write_text(json.dumps(answer, indent=1, sort_keys=True,
                                                    default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
