"""The report commands, ``lvs`` and ``vgs``: what LVM shows of each LV and VG.

Rows are built here as raw typed values (attributes, layout and role, data
and metadata percentages, the hidden LVs of ``-a``, ``--readonly``'s unknown
state); ``report_format`` prints them.
"""

from __future__ import annotations

import hashlib
import string
from typing import Any

from lvm_driver.simulator.args import Args
from lvm_driver.simulator.cow import cow_snapshots_of
from lvm_driver.simulator.errors import EXIT_FAILED, EXIT_INVALID, Fail
from lvm_driver.simulator.report_format import emit_report, report_columns
from lvm_driver.simulator.session import Session, thin_lvs
from lvm_driver.simulator.sizes import PV_METADATA_BYTES, percent_text


def _lv_attr(session: Session, vg: dict[str, Any], lv: dict[str, Any], name: str) -> str:
    """The ``lv_attr`` string LVM shows for ``lv`` (type, state, open, zeroing, skip)."""
    kind = lv["kind"]
    state = "a" if lv["active"] else "-"
    skip = "k" if lv["skip"] else "-"
    if kind == "thin-pool":
        opened = any(rec["active"] for rec in thin_lvs(vg, name).values())
        pool_bytes = lv["extents"] * vg["extent_size"]
        full = lv["active"] and session.pool_used_bytes(vg, name) >= pool_bytes
        return (f"twi-{state}{'o' if opened else '-'}t{'z' if lv['zero'] else '-'}"
                f"{'D' if full else '-'}{skip}")
    opened = "o" if lv["active"] and lv.get("open") else "-"
    # a COW snapshot's origin shows volume type o, whatever its segment type
    volume_type = "o" if cow_snapshots_of(vg, name) else None
    if kind == "thin":
        zero = "z" if vg["lvs"][lv["pool"]]["zero"] else "-"
        return f"{volume_type or 'V'}wi-{state}{opened}t{zero}-{skip}"
    if kind == "cow":
        return f"swi-{state}{opened}s---"
    if volume_type:
        return f"owi-{state}{opened}s---"
    return f"-wi-{state}{opened}----"[:9] + skip


def _lv_rows(session: Session, vg: dict[str, Any], show_all: bool,
             readonly: bool = False) -> list[dict[str, Any]]:
    """Every LV of the VG as raw typed values, plus hidden ones with ``-a``.

    ``readonly`` (``--readonly``) means LVM never asks the kernel: state and
    open flags show as X and no percentage is known.
    """
    rows = _lv_rows_live(session, vg, show_all)
    if readonly:
        for row in rows:
            attr = row["lv_attr"]
            row.update(lv_attr=attr[:4] + "XX" + attr[6:], data_percent="",
                       metadata_percent="", lv_active="unknown")
    return rows


def _lv_rows_live(session: Session, vg: dict[str, Any],
                  show_all: bool) -> list[dict[str, Any]]:
    """Every LV of the VG as the kernel sees it (state, open, percentages)."""
    extent = vg["extent_size"]
    rows = []
    snapshot_count: dict[str, int] = {}
    for rec in vg["lvs"].values():
        if rec["kind"] == "thin" and rec["origin"]:
            snapshot_count[rec["origin"]] = snapshot_count.get(rec["origin"], 0) + 1
    for name, lv in vg["lvs"].items():
        kind = lv["kind"]
        row: dict[str, Any] = {
            "lv_name": name, "lv_size": lv["extents"] * extent,
            "lv_attr": _lv_attr(session, vg, lv, name), "lv_uuid": lv["uuid"],
            "lv_tags": ",".join(lv["tags"]), "pool_lv": "", "origin": "",
            "data_percent": "", "metadata_percent": "", "lv_metadata_size": None,
            "lv_active": "active" if lv["active"] else "",
            "lv_skip_activation": "skip activation" if lv["skip"] else "",
            "lv_full_name": f"{vg['name']}/{name}", "lv_path": f"/dev/{vg['name']}/{name}",
        }
        cows = cow_snapshots_of(vg, name)
        if kind == "linear":
            row.update(lv_layout="linear", segtype="linear",
                       lv_role="public,origin,thickorigin" if cows else "public")
        elif kind == "cow":
            row.update(lv_layout="linear", lv_role="public,snapshot,thicksnapshot",
                       segtype="linear", origin=lv["origin"])
            if lv["active"]:  # how full the store is: never written here
                row["data_percent"] = percent_text(0, lv["extents"] * extent)
        elif kind == "thin-pool":
            row.update(lv_layout="thin,pool", lv_role="private", segtype="thin-pool",
                       lv_metadata_size=lv["metadata_extents"] * extent, lv_path="")
            if lv["active"]:
                row["data_percent"] = percent_text(session.pool_used_bytes(vg, name),
                                                   lv["extents"] * extent)
                row["metadata_percent"] = percent_text(
                    session.pool_metadata_used(vg, name), lv["metadata_extents"] * extent)
        else:
            roles = ["public"]
            if name in snapshot_count:
                roles += ["origin", "thinorigin"]
                if snapshot_count[name] > 1:
                    roles.append("multithinorigin")
            if cows:
                roles += ["origin", "thickorigin"]
            if lv["origin"]:
                roles += ["snapshot", "thinsnapshot"]
            row.update(lv_layout="thin,sparse", lv_role=",".join(roles), segtype="thin",
                       pool_lv=lv["pool"], origin=lv["origin"] or "")
            if lv["active"]:
                row["data_percent"] = percent_text(session.thin_mapped_bytes(vg, lv),
                                                   lv["extents"] * extent)
        rows.append(row)
        if show_all and kind == "thin-pool":
            state = "a" if lv["active"] else "-"
            opened = "o" if lv["active"] else "-"
            for suffix, size, attr, role in (
                    ("_tdata", lv["extents"] * extent, f"Twi-{state}{opened}----",
                     "private,thin,pool,data"),
                    ("_tmeta", lv["metadata_extents"] * extent, f"ewi-{state}{opened}----",
                     "private,thin,pool,metadata")):
                row = _hidden_row(vg, f"[{name}{suffix}]", size, attr, role)
                row["lv_active"] = "active" if lv["active"] else ""
                rows.append(row)
    if show_all and vg["pmspare_extents"]:
        rows.append(_hidden_row(vg, "[lvol0_pmspare]", vg["pmspare_extents"] * extent,
                                "ewi-------", "private,pool,spare"))
    return rows


def _hidden_row(vg: dict[str, Any], name: str, size: int, attr: str,
                role: str) -> dict[str, Any]:
    """A row for a hidden LV (``[pool_tdata]``, ``[lvol0_pmspare]``) shown by ``lvs -a``."""
    return {"lv_name": name, "lv_size": size, "lv_attr": attr, "lv_uuid": _stable_uuid(vg, name),
            "lv_tags": "", "pool_lv": "", "origin": "", "data_percent": "",
            "metadata_percent": "", "lv_metadata_size": None, "lv_active": "",
            "lv_skip_activation": "",
            "lv_full_name": f"{vg['name']}/{name}", "lv_path": "", "lv_layout": "linear",
            "lv_role": role, "segtype": "linear"}


def _stable_uuid(vg: dict[str, Any], name: str) -> str:
    """A UUID for a hidden LV, the same on every report (they are not stored)."""
    alphabet = string.ascii_letters + string.digits
    digest = hashlib.sha256(f"{vg['uuid']}/{name}".encode()).digest()
    raw = "".join(alphabet[byte % len(alphabet)] for byte in digest[:32])
    return "-".join((raw[:6], raw[6:10], raw[10:14], raw[14:18], raw[18:22],
                     raw[22:26], raw[26:]))


def _vg_row(session: Session, vg: dict[str, Any]) -> dict[str, Any]:
    """The VG's fields as raw typed values (every LV row carries them too)."""
    extent = vg["extent_size"]
    free = session.free_extents(vg)
    return {
        "vg_name": vg["name"], "vg_size": vg["extent_count"] * extent,
        "vg_free": free * extent, "vg_extent_size": extent, "vg_uuid": vg["uuid"],
        "vg_extent_count": vg["extent_count"], "vg_free_count": free,
        "lv_count": len(vg["lvs"]), "pv_count": len(vg["pvs"]),
        "snap_count": sum(lv["kind"] == "cow" for lv in vg["lvs"].values()),
        "vg_attr": "wz--n-", "vg_seqno": vg["seqno"],
        "vg_mda_count": len(vg["pvs"]),
    }


def _report_vg(session: Session, vg_name: str) -> dict[str, Any] | None:
    """VG ``vg_name`` for a report, or None once its not-found errors are out."""
    try:
        return session.vg(vg_name)
    except Fail as exc:
        for line in exc.lines:
            session.out.error(line)
        return None


def cmd_lvdisplay(session: Session, args: Args) -> None:
    """``lvdisplay -C``: the lvs report; the multi-line form is not emulated."""
    if not args.has("columns"):
        raise Fail(EXIT_INVALID, "lvdisplay without -C is not emulated by the LVM simulator.")
    cmd_lvs(session, args)


def cmd_lvs(session: Session, args: Args) -> None:
    """``lvs [VG|VG/LV...]``: one row per LV, sorted by name within each VG."""
    columns = report_columns(args)
    rows: list[dict[str, Any]] = []
    failed = False
    selections: list[tuple[str, str | None]] = []
    for arg in args.positionals or sorted(session.state["vgs"]):
        if "/" in arg.removeprefix("/dev/"):
            vg_name, lv_name = session.split_lv(arg)
            selections.append((vg_name, lv_name))
        else:
            selections.append((arg, None))
    for vg_name, lv_name in selections:
        vg = _report_vg(session, vg_name)
        if vg is None:
            failed = True
            continue
        vg_row = _vg_row(session, vg)
        lv_rows = _lv_rows(session, vg, args.has("all"), args.has("readonly"))
        if lv_name is not None:
            lv_rows = [row for row in lv_rows if row["lv_name"] == lv_name]
            if not lv_rows:
                session.out.error(f'Failed to find logical volume "{vg_name}/{lv_name}"')
                failed = True
                continue
        lv_rows.sort(key=lambda row: row["lv_name"].strip("[]"))
        rows += [{**vg_row, **row} for row in lv_rows]
    emit_report(session, args, "lv", rows, columns)
    if failed:
        raise Fail(EXIT_FAILED)


def cmd_vgs(session: Session, args: Args) -> None:
    """``vgs [VG...]``: one row per VG."""
    columns = report_columns(args)
    rows = []
    failed = False
    for vg_name in args.positionals or sorted(session.state["vgs"]):
        vg = _report_vg(session, vg_name)
        if vg is None:
            failed = True
            continue
        rows.append(_vg_row(session, vg))
    emit_report(session, args, "vg", rows, columns)
    if failed:
        raise Fail(EXIT_FAILED)


def _pv_free(session: Session) -> dict[str, int]:
    """Each PV's free bytes: a VG's used extents taken from its PVs in name order (the
    simulator does not place extents on PVs; one PV per VG, the usual case, is exact)."""
    free: dict[str, int] = {}
    for vg in session.state["vgs"].values():
        extent = vg["extent_size"]
        used = vg["extent_count"] - session.free_extents(vg)
        for device in sorted(vg["pvs"]):
            own = (session.state["pvs"][device]["size"] - PV_METADATA_BYTES) // extent
            taken = min(own, used)
            used -= taken
            free[device] = (own - taken) * extent
    return free


def cmd_pvs(session: Session, args: Args) -> None:
    """``pvs [PV...]``: one row per PV (each with one metadata area), its VG's fields too."""
    columns = report_columns(args)
    rows = []
    failed = False
    free = _pv_free(session)
    for device in args.positionals or sorted(session.state["pvs"]):
        pv = session.state["pvs"].get(device)
        if pv is None:
            session.out.error(f"Failed to find physical volume \"{device}\".")
            failed = True
            continue
        vg = session.state["vgs"].get(pv["vg"]) if pv["vg"] else None
        row = {"pv_name": device, "pv_uuid": pv["uuid"], "pv_fmt": "lvm2",
               "pv_mda_count": 1, "pv_size": pv["size"], "dev_size": pv["size"],
               "pv_attr": "a--" if vg else "---", "vg_name": pv["vg"] or "",
               "pv_free": free.get(device, pv["size"])}
        if vg is not None:
            row = {**_vg_row(session, vg), **row}
        rows.append(row)
    emit_report(session, args, "pv", rows, columns)
    if failed:
        raise Fail(EXIT_FAILED)
