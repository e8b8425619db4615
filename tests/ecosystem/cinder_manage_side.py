"""Cinder's side of the manage tests: manage, unmanage, retype, revert and wipe.

    python tests/ecosystem/cinder_manage_side.py WORKDIR

Real Cinder objects, database and volume manager run the adapter on the
simulator, as in ``cinder_side.py``: an operator's LVs are listed by
``get_manageable_volumes``/``get_manageable_snapshots``, adopted by
``manage_existing``/``manage_existing_snapshot`` (Cinder's manage flows),
released by ``delete_volume(unmanage_only=True)``; a volume is retyped within
its pool and out of it, reverted to a snapshot, and a thick volume deleted
with ``volume_clear`` set in cinder.conf.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.ecosystem import cinder_side as side  # noqa: E402 (sets up Cinder first)

from cinder import objects  # noqa: E402
from cinder.volume import volume_types  # noqa: E402


def _pools(manager: Any) -> dict[str, list[float]]:
    return {p["pool_name"]: [p["provisioned_capacity_gb"], p["free_capacity_gb"]]
            for p in side.reported(manager)["pools"]}


def run(workdir: Path) -> dict[str, Any]:
    manager = side.volume_service("kit-lvm", "node1@kit-lvm")
    kit = manager.driver.kit
    context = side.ctxt()
    operator = kit.executor
    operator.run(["lvcreate", "-T", "-V", "2g", "-n", "legacy-data", "kitvg/kitpool"],
                 readonly=False)
    operator.run(["lvcreate", "-s", "-n", "legacy-snap", "kitvg/legacy-data"], readonly=False)
    operator.run(["lvcreate", "-T", "-V", "1g", "-n", "legacy-busy", "kitvg/kitpool"],
                 readonly=False)
    kit.executor.runner.set_open("kitvg", "legacy-busy")
    thin = volume_types.create(context, "kit-thin", {"volume_backend_name": "kit-lvm",
                                                     "provisioning:type": "thin"})
    thin2 = volume_types.create(context, "kit-thin-gold", {"volume_backend_name": "kit-lvm",
                                                           "provisioning:type": "thin",
                                                           "tier": "gold"})
    thick = volume_types.create(context, "kit-thick", {"volume_backend_name": "kit-lvm",
                                                       "provisioning:type": "thick"})
    out: dict[str, Any] = {}

    def new_volume(size: int, status: str = "creating", pool: str = "kitpool",
                   type_id: str = thin["id"]) -> Any:
        volume = objects.Volume(context, size=size, host=f"node1@kit-lvm#{pool}",
                                volume_type_id=type_id, status=status,
                                attach_status="detached", project_id="project",
                                user_id="user", availability_zone="nova")
        volume.create()
        return objects.Volume.get_by_id(context, volume.id)

    out["listed"] = manager.get_manageable_volumes(context, None, 100, 0, ["reference"],
                                                   ["asc"])
    out["listed_snapshots"] = manager.get_manageable_snapshots(context, None, 100, 0,
                                                               ["reference"], ["asc"])
    out["pools_before"] = _pools(manager)
    adopted = new_volume(0, status="managing")
    manager.manage_existing(context, adopted, {"source-name": "legacy-data"})
    adopted.refresh()
    out["managed"] = {"status": adopted.status, "size": adopted.size, "name": adopted.name,
                      "found": kit.backend_find_volume(adopted.name) is not None}
    out["pools_after"] = _pools(manager)
    refused = new_volume(0, status="managing")
    out["busy_error"] = side.error_of(lambda: manager.driver.manage_existing(
        refused, {"source-name": "legacy-busy"}))
    out["missing_error"] = side.error_of(lambda: manager.driver.manage_existing_get_size(
        refused, {"source-name": "nothing-here"}))
    out["again_error"] = side.error_of(lambda: manager.driver.manage_existing(
        refused, {"source-name": adopted.name}))
    out["listed_after"] = manager.get_manageable_volumes(context, None, 100, 0,
                                                         ["reference"], ["asc"])

    snapshot = objects.Snapshot(context, volume_id=adopted.id, volume_size=adopted.size,
                                status="creating", project_id="project", user_id="user",
                                volume_type_id=thin["id"], display_name="adopted-snap")
    snapshot.create()
    snapshot = objects.Snapshot.get_by_id(context, snapshot.id)
    manager.manage_existing_snapshot(context, snapshot, {"source-name": "legacy-snap"})
    snapshot.refresh()
    out["managed_snapshot"] = {"status": snapshot.status, "found": kit.backend_find_snapshot(
        manager.driver.snapshot_name(snapshot)) is not None}

    # retype: same pool and type keeps the LV (True); another type of provisioning does not
    new_host = {"host": "node1@kit-lvm#kitpool", "capabilities": {}}
    adopted.update({"status": "retyping", "previous_status": "available"})
    adopted.save()
    manager.retype(context, adopted, thin2["id"], new_host)
    adopted.refresh()
    out["retype_same"] = {"status": adopted.status, "type": adopted.volume_type_id == thin2["id"]}
    out["retype_to_thick_driver"] = manager.driver.retype(
        context, adopted, volume_types.get_volume_type(context, thick["id"]), {},
        {"host": "node1@kit-lvm#kitvg"})

    # revert: the volume gets the snapshot's data back (a merge, as Cinder's LVM driver)
    kit.executor.runner.write_data("kitvg", adopted.name, 64 * 1024 ** 2)
    written = kit.vg.lv_report(adopted.name).data_percent
    adopted.update({"status": "reverting"})
    adopted.save()
    snapshot.update({"status": "restoring"})
    snapshot.save()
    manager.revert_to_snapshot(context, adopted, snapshot)
    adopted.refresh()
    snapshot.refresh()
    out["revert"] = {"status": adopted.status, "snapshot_status": snapshot.status,
                     "data_percent_before": written,
                     "data_percent_after": kit.vg.lv_report(adopted.name).data_percent,
                     "snapshot_found": kit.backend_find_snapshot(
                         manager.driver.snapshot_name(snapshot)) is not None}

    # unmanage: Cinder forgets them, the LVs stay, the driver's tags go
    snapshot_lv = manager.driver.snapshot_name(snapshot)
    manager.delete_snapshot(context, snapshot, unmanage_only=True)
    manager.delete_volume(context, adopted, unmanage_only=True)
    report = kit.vg.report()
    out["unmanaged"] = {name: list(report.get_lv(name).tags) for name in
                        (adopted.name, snapshot_lv)}

    # wipe: a thick volume's delete zeroes it first (volume_clear_size from cinder.conf)
    thick_volume = new_volume(1, pool="kitvg", type_id=thick["id"])
    manager.create_volume(context, thick_volume)
    manager.delete_volume(context, thick_volume)
    out["wipes"] = kit.executor.runner.wipes()
    return out


def main(argv: list[str]) -> int:
    workdir = Path(argv[1])
    side.start(workdir)
    (workdir / "answer.json").write_text(json.dumps(run(workdir), indent=1, sort_keys=True,
                                                    default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
