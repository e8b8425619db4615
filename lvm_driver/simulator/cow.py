"""Old-style (COW) snapshots, ``lvcreate -s -L|-l ORIGIN``, as LVM 2.03.16 makes them.

A COW snapshot is an LV of its own extents (its "COW store") that keeps the
origin's old blocks; its origin is a linear LV or a thin LV (which stays a thin
LV of its pool, shown with volume type ``o``). LVM refuses a snapshot of a
snapshot, of a thin pool and of a hidden LV with the messages below (seen on
LVM 2.03.16). The store is recorded as kind ``cow`` with its ``origin`` and the
name of the internal ``snapshotN`` LV that ties the two in the metadata text.
How full the store gets as the origin is written is not emulated (it shows 0%).
"""

from __future__ import annotations

import re
from typing import Any, Final

from lvm_driver.simulator.errors import EXIT_FAILED, Fail
from lvm_driver.simulator.session import Session

__all__ = ["COW_CHUNK_SECTORS", "cow_snapshots_of", "create_cow_snapshot", "refuse_origin"]

#: the chunk size lvcreate gives a COW snapshot by default: 4 KiB (8 sectors)
COW_CHUNK_SECTORS: Final = 8
_HIDDEN_SUFFIXES: Final = ("_tdata", "_tmeta")


def cow_snapshots_of(vg: dict[str, Any], name: str) -> list[str]:
    """The COW snapshots whose origin is LV ``name``, in creation order."""
    return [other for other, rec in vg["lvs"].items()
            if rec["kind"] == "cow" and rec["origin"] == name]


def _snapshot_name(vg: dict[str, Any]) -> str:
    """``snapshotN`` one above the highest in use, as lvm2's generate_lv_name picks."""
    numbers = [int(match[1]) for rec in vg["lvs"].values() if rec["kind"] == "cow"
               for match in [re.fullmatch(r"snapshot(\d+)", rec["snapshot_name"])] if match]
    return f"snapshot{max(numbers, default=-1) + 1}"


def _is_hidden(vg: dict[str, Any], name: str) -> bool:
    return name == "lvol0_pmspare" and bool(vg["pmspare_extents"]) or any(
        name.endswith(suffix) and vg["lvs"].get(name[:-len(suffix)], {}).get("kind")
        == "thin-pool" for suffix in _HIDDEN_SUFFIXES)


def create_cow_snapshot(session: Session, vg: dict[str, Any], origin_name: str,
                        name: str, tags: list[str], extents: int,
                        activate: bool | None) -> None:
    """Make COW snapshot ``name`` of ``extents`` extents of LV ``origin_name`` (name,
    origin and free space already checked); active when its origin is."""
    origin = vg["lvs"][origin_name]
    session.new_lv(vg, name, "cow", extents, tags,
                   active=origin["active"] and activate is not False,
                   origin=origin_name, snapshot_name=_snapshot_name(vg))
    session.out.print(f'Logical volume "{name}" created.')


def refuse_origin(vg: dict[str, Any], origin_name: str) -> None:
    """LVM's refusal of a COW snapshot of LV ``origin_name``, if it refuses one."""
    origin = vg["lvs"].get(origin_name)
    if origin is None and _is_hidden(vg, origin_name):
        raise Fail(EXIT_FAILED, "Snapshots of hidden volumes are not supported.")
    if origin is None:
        raise Fail(EXIT_FAILED, f"Snapshot origin LV {origin_name} not found in "
                                f"Volume group {vg['name']}.")
    if origin["kind"] == "cow":
        raise Fail(EXIT_FAILED, "Snapshots of snapshots are not supported.")
    if origin["kind"] == "thin-pool":
        raise Fail(EXIT_FAILED, "Snapshots of thin pool type volumes are not supported.")
