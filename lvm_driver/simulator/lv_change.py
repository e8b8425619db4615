"""The commands that change an existing LV: ``lvextend``, ``lvremove``, ``lvrename``,
``lvchange`` and ``lvconvert --merge``, with LVM's messages and exit codes.

Each fails before changing anything, except a multi-LV ``lvremove`` or
``lvchange``, which (like LVM) keeps what it did for the LVs before the one
that failed.
"""

from __future__ import annotations

from lvm_driver.simulator.args import Args, yes_no
from lvm_driver.simulator.cow import cow_snapshots_of
from lvm_driver.simulator.errors import EXIT_FAILED, EXIT_INVALID, Fail, invalid
from lvm_driver.simulator.names import check_new_lv_name, check_tags
from lvm_driver.simulator.session import Session, extents_option, thin_lvs
from lvm_driver.simulator.sizes import human, parse_size


def _find_lv(session: Session, arg: str, message: str) -> tuple[dict, str, dict]:
    """VG, name and record of the LV ``arg``, or ``message`` as LVM's failure."""
    vg_name, lv_name = session.split_lv(arg)
    vg = session.vg(vg_name)
    lv = vg["lvs"].get(lv_name)
    if lv is None:
        raise Fail(EXIT_FAILED, message.format(vg=vg_name, lv=lv_name))
    return vg, lv_name, lv


def cmd_lvextend(session: Session, args: Args) -> None:
    """``lvextend -L|-l``: an LV grows by whole extents, never shrinks."""
    if len(args.positionals) != 1:
        raise invalid("lvextend", "Please specify a logical volume path.")
    size_text, extents_text = args.last("size"), args.last("extents")
    if (size_text is None) == (extents_text is None):
        raise invalid("lvextend", "Please specify either size or extents but not both.")
    sign, size = ("", 0)
    if size_text is not None:
        sign, size = parse_size(size_text, "--size")
    vg, name, lv = _find_lv(session, args.positionals[0],
                            "Logical volume {lv} not found in volume group {vg}.")
    if lv["active"] and cow_snapshots_of(vg, name):
        raise Fail(EXIT_FAILED, "Snapshot origin volumes can be resized only while "
                                "inactive: try lvchange -an.")
    extent = vg["extent_size"]
    old = lv["extents"]
    if size_text is not None:
        new = session.to_extents(vg, size) + (old if sign == "+" else 0)
        if size % extent:
            session.out.print("Rounding size to boundary between physical extents: "
                              f"{human(new * extent)}.")
    else:
        number = extents_option(session, vg, extents_text or "0")
        new = old + number if (extents_text or "").startswith("+") else number
    if new == old:
        raise Fail(EXIT_FAILED, f"New size ({new} extents) matches existing size "
                                f"({old} extents).")
    if new < old:
        raise Fail(EXIT_FAILED, f"New size given ({new} extents) not larger than existing "
                                f"size ({old} extents)")
    if lv["kind"] in ("linear", "thin-pool", "cow"):
        free = session.free_extents(vg)
        if free < new - old:
            raise Fail(EXIT_FAILED, f"Insufficient free space: {new - old} extents "
                                    f"needed, but only {free} available")
    shown = f"{name}_tdata" if lv["kind"] == "thin-pool" else name
    session.out.print(
        f"Size of logical volume {vg['name']}/{shown} changed from {human(old * extent)} "
        f"({old} extents) to {human(new * extent)} ({new} extents).")
    lv["extents"] = new
    session.touch(vg)
    if lv["kind"] in ("thin", "thin-pool"):
        session.check_overprovisioning(vg, name)
    session.out.print(f"Logical volume {vg['name']}/{name} successfully resized.")


def cmd_lvremove(session: Session, args: Args) -> None:
    """``lvremove``: each LV named; a forced pool removal takes its thin LVs too."""
    if not args.positionals:
        raise invalid("lvremove", "Please enter one or more logical volume paths.")
    failed: Fail | None = None
    for arg in args.positionals:
        try:
            _remove_one(session, args, arg)
        except Fail as exc:
            if exc.exit_code != EXIT_FAILED:
                raise
            for line in exc.lines:
                session.out.error(line)
            failed = exc
    if failed is not None:
        raise Fail(EXIT_FAILED)


def _remove_one(session: Session, args: Args, arg: str) -> None:
    vg, name, lv = _find_lv(session, arg, 'Failed to find logical volume "{vg}/{lv}"')
    forced = args.has("force") or args.has("yes")
    dependents = list(thin_lvs(vg, name))
    if not forced and (lv["active"] or dependents):
        raise Fail(EXIT_FAILED, f"Logical volume {vg['name']}/{name} not removed.")
    # LVM removes an origin's COW snapshots with it, first (without -f it asks, above)
    doomed = [cow for other in sorted(dependents) for cow in cow_snapshots_of(vg, other)]
    for other in doomed + sorted(dependents) + cow_snapshots_of(vg, name):
        del vg["lvs"][other]
        session.out.print(f'Logical volume "{other}" successfully removed.')
    del vg["lvs"][name]
    for rec in vg["lvs"].values():
        if rec["kind"] == "thin" and rec["origin"] == name:
            rec["origin"] = None
    if not any(rec["kind"] == "thin-pool" for rec in vg["lvs"].values()):
        vg["pmspare_extents"] = 0
    session.prune_chunks(vg)
    session.touch(vg)
    session.out.print(f'Logical volume "{name}" successfully removed.')


def cmd_lvrename(session: Session, args: Args) -> None:
    """``lvrename VG OLD NEW`` or ``lvrename VG/OLD NEW``."""
    pos = args.positionals
    if len(pos) == 3:
        vg_name, old, new = pos
    elif len(pos) == 2 and "/" in pos[0]:
        vg_name, old = session.split_lv(pos[0])
        new = pos[1]
        if "/" in new:
            new_vg, new = session.split_lv(new)
            if new_vg != vg_name:
                raise Fail(EXIT_INVALID, "Logical volume names must have the same "
                                         "volume group (\"{vg_name}\" or \"{new_vg}\").")
    else:
        raise invalid("lvrename", "Old and new logical volume names required")
    check_new_lv_name(new, "lvrename", rename=True)
    vg = session.vg(vg_name)
    if old not in vg["lvs"]:
        raise Fail(EXIT_FAILED, f'Existing logical volume "{old}" not found in volume '
                                f'group "{vg_name}"')
    if new in vg["lvs"]:
        raise Fail(EXIT_FAILED, f'Logical Volume "{new}" already exists in volume '
                                f'group "{vg_name}"')
    vg["lvs"] = {(new if key == old else key): rec for key, rec in vg["lvs"].items()}
    for rec in vg["lvs"].values():
        if rec["kind"] == "thin" and rec["pool"] == old:
            rec["pool"] = new
        if rec["kind"] in ("thin", "cow") and rec["origin"] == old:
            rec["origin"] = new
    session.touch(vg)
    session.out.print(f'Renamed "{old}" to "{new}" in volume group "{vg_name}"')


def cmd_lvchange(session: Session, args: Args) -> None:
    """``lvchange``: activation, activation skip and tags of each LV named."""
    if not args.positionals:
        raise invalid("lvchange", "Please give logical volume path(s).")
    activate = yes_no(args.last("activate"), "activate")
    skip = yes_no(args.last("setactivationskip"), "setactivationskip")
    add = check_tags(args.all("addtag"), "addtag")
    remove = check_tags(args.all("deltag"), "deltag")
    if activate is None and skip is None and not add and not remove:
        raise invalid("lvchange", "Need one or more command options.")
    for arg in args.positionals:
        vg, name, lv = _find_lv(session, arg, 'Failed to find logical volume "{vg}/{lv}"')
        changed = False
        if skip is not None and lv["skip"] != skip:
            lv["skip"] = skip
            changed = True
        if add or remove:
            lv["tags"] = sorted((set(lv["tags"]) | set(add)) - set(remove))
            changed = True
        # an origin and its COW snapshots are (de)activated together
        together = [lv] + [vg["lvs"][cow] for cow in cow_snapshots_of(vg, name)]
        if lv["kind"] == "cow":
            origin = vg["lvs"][lv["origin"]]
            together = [origin] + [vg["lvs"][cow] for cow in cow_snapshots_of(vg, lv["origin"])]
            lv = origin
        if activate is True and (not lv["skip"] or args.has("ignoreactivationskip")):
            for rec in together:
                rec["active"] = True
            if lv["kind"] == "thin":
                vg["lvs"][lv["pool"]]["active"] = True
        elif activate is False:
            if lv["kind"] == "thin-pool" and any(
                    rec["active"] for rec in thin_lvs(vg, name).values()):
                raise Fail(EXIT_FAILED, f"Logical volume {vg['name']}/{name} is used by "
                                        "another device.")
            if any(rec.get("open") for rec in together):
                raise Fail(EXIT_FAILED, f"Logical volume {vg['name']}/{name} in use.")
            for rec in together:
                rec["active"] = False
        session.touch(vg)
        if changed:
            session.out.print(f"Logical volume {vg['name']}/{name} changed.")


def cmd_lvconvert(session: Session, args: Args) -> None:
    """``lvconvert --merge vg/snap`` of a thin snapshot: the origin takes the snapshot's
    data and size, keeps its own name, uuid and tags; the snapshot LV goes away."""
    if not args.has("merge") or len(args.positionals) != 1:
        raise invalid("lvconvert", "Only lvconvert --merge of one thin snapshot is "
                                   "emulated by the LVM simulator.")
    vg, name, snap = _find_lv(session, args.positionals[0],
                              'Failed to find logical volume "{vg}/{lv}"')
    where = f"{vg['name']}/{name}"
    if snap["kind"] == "cow":
        raise Fail(EXIT_INVALID, "lvconvert --merge of a COW snapshot is not emulated by "
                                 "the LVM simulator.")
    if snap["kind"] != "thin" or not snap.get("origin"):
        raise Fail(EXIT_FAILED, f"Command on LV {where} uses options that require LV "
                                f"types thinsnapshot or snapshot.",
                   f"Command not permitted on LV {where}.")
    origin_name = snap["origin"]
    origin = vg["lvs"][origin_name]
    if origin.get("open") and origin["active"]:
        raise Fail(EXIT_FAILED, "Can't merge over open origin volume.")
    origin.update(extents=snap["extents"], refs=list(snap["refs"]), tree=snap["tree"])
    del vg["lvs"][name]
    for rec in vg["lvs"].values():
        if rec["kind"] == "thin" and rec["origin"] == name:
            rec["origin"] = origin_name
    session.prune_chunks(vg)
    session.touch(vg)
    session.out.print(f"Volume {where} replaced origin {vg['name']}/{origin_name}.")
    session.out.print(f"Merging of thin snapshot {where} has finished.")
