"""``lvcreate`` in the forms the wrapper and operators issue: linear LVs, thin pools
(with their metadata and its spare), thin LVs, thin snapshots and COW snapshots.

LVM's rules for each: whole extents, free space for what takes extents,
pool metadata sized as LVM sizes it by default, over-provisioning allowed
with LVM's warnings. The forms not emulated are refused with a clear line.
"""

from __future__ import annotations

from typing import Any, Final

from lvm_driver.simulator.args import Args, yes_no
from lvm_driver.simulator.cow import create_cow_snapshot, refuse_origin
from lvm_driver.simulator.errors import EXIT_FAILED, EXIT_INVALID, Fail, invalid
from lvm_driver.simulator.names import check_new_lv_name, check_tags
from lvm_driver.simulator.session import Session, extents_option
from lvm_driver.simulator.sizes import GiB, KiB, MiB, human, parse_size

THIN_CHUNK_BYTES: Final = 64 * KiB
THIN_MIN_METADATA_BYTES: Final = 2 * MiB
THIN_MAX_METADATA_BYTES: Final = 17_045_913_600  # 15.875 GiB, dm-thin's limit / 2


def cmd_lvcreate(session: Session, args: Args) -> None:
    """``lvcreate``: a linear LV, a thin pool, a thin LV, a thin or a COW snapshot."""
    size = _size_option(args, "size", "--size")
    virtual = _size_option(args, "virtualsize", "--virtualsize")
    extents_arg = args.last("extents")
    name = args.last("name")
    tags = check_tags(args.all("addtag"), "addtag")
    seg_type = args.last("type")
    skip = yes_no(args.last("setactivationskip"), "setactivationskip")
    activate = yes_no(args.last("activate"), "activate")
    if len(args.positionals) != 1:
        raise invalid("lvcreate", "Please specify exactly one volume group "
                                  "(or VG/LV) argument.")
    target = args.positionals[0]
    if name is not None and "/" in name:
        name_vg, _, name = name.rpartition("/")
        target_vg = target.removeprefix("/dev/").split("/")[0]
        if name_vg.removeprefix("/dev/") != target_vg:
            raise invalid("lvcreate", "Inconsistent volume group names given: "
                                      f'"{name_vg}" and "{target_vg}"')
    if name is not None:
        check_new_lv_name(name, "lvcreate")
    thin = args.has("thin") or args.has("thinpool") or seg_type in ("thin", "thin-pool")
    if args.has("snapshot") or seg_type == "snapshot":
        _create_snapshot(session, args, target, name, tags, size, skip, activate)
    elif thin and virtual is not None:
        if size is not None or extents_arg is not None:
            raise Fail(EXIT_INVALID, "Creating a thin pool and a thin volume in one "
                                     "lvcreate is not emulated by the LVM simulator.")
        _create_thin(session, args, target, name, tags, virtual, skip, activate)
    elif thin:
        _create_pool(session, args, target, name, tags, size, extents_arg)
    elif virtual is not None:
        raise Fail(EXIT_INVALID, "Sparse (virtual) thick volumes are not emulated "
                                 "by the LVM simulator.")
    else:
        if seg_type not in (None, "linear", "striped"):
            raise Fail(EXIT_INVALID, f"Segment type {seg_type} is not emulated by the "
                                     "LVM simulator.")
        _create_linear(session, target, name, tags, size, extents_arg)


def _size_option(args: Args, key: str, option: str) -> int | None:
    text = args.last(key)
    if text is None:
        return None
    _, value = parse_size(text, option)
    if value == 0:
        raise invalid(args.command, f"{option} may not be zero.")
    return value


def _vg_and_name(session: Session, target: str, name: str | None,
                 ) -> tuple[dict[str, Any], str | None]:
    if "/" in target.removeprefix("/dev/"):
        vg_name, lv_name = session.split_lv(target)
        if name is not None and name != lv_name:
            raise invalid("lvcreate", f"Inconsistent logical volume names given: "
                                      f'"{name}" and "{lv_name}"')
        return session.vg(vg_name), lv_name
    return session.vg(target), name


def _claim_name(session: Session, vg: dict[str, Any], name: str | None) -> str:
    if name is None:
        return session.auto_name(vg)
    check_new_lv_name(name, "lvcreate")
    if name in vg["lvs"]:
        raise Fail(EXIT_FAILED, f'Logical Volume "{name}" already exists in volume '
                                f'group "{vg["name"]}"')
    return name


def _need_extents(session: Session, vg: dict[str, Any], extents: int) -> None:
    free = session.free_extents(vg)
    if free < extents:
        raise Fail(EXIT_FAILED, f'Volume group "{vg["name"]}" has insufficient free '
                                f"space ({free} extents): {extents} required.")


def _requested_extents(session: Session, vg: dict[str, Any], size: int | None,
                       extents_arg: str | None) -> int:
    """The extents of a new LV from ``--size`` (rounded up) or ``--extents``."""
    if size is not None:
        session.rounding_note(vg, size)
        extents = session.to_extents(vg, size)
    else:
        extents = extents_option(session, vg, extents_arg or "0")
    if extents <= 0:
        raise Fail(EXIT_FAILED, "Unable to create new logical volume with no extents.")
    return extents


def _create_linear(session: Session, target: str, name: str | None, tags: list[str],
                   size: int | None, extents_arg: str | None) -> None:
    vg, name = _vg_and_name(session, target, name)
    if size is None and extents_arg is None:
        raise invalid("lvcreate", "Please specify either size or extents.")
    name = _claim_name(session, vg, name)
    extents = _requested_extents(session, vg, size, extents_arg)
    _need_extents(session, vg, extents)
    session.new_lv(vg, name, "linear", extents, tags)
    session.check_overprovisioning(vg, name)
    session.out.print(f'Logical volume "{name}" created.')


def _metadata_bytes(data_bytes: int) -> tuple[int, int]:
    """LVM's default pool metadata size (bytes, before extent rounding) and chunk."""
    chunk = THIN_CHUNK_BYTES
    metadata = data_bytes // chunk * 64
    while metadata > 2 * 128 * MiB and chunk < GiB:
        chunk *= 2
        metadata //= 2
    return min(max(metadata, THIN_MIN_METADATA_BYTES), THIN_MAX_METADATA_BYTES), chunk


def _create_pool(session: Session, args: Args, target: str, name: str | None,
                 tags: list[str], size: int | None, extents_arg: str | None) -> None:
    if name is None and args.has("thinpool") and "/" not in target:
        name = args.last("thinpool")
    vg, name = _vg_and_name(session, target, name)
    if size is None and extents_arg is None:
        raise invalid("lvcreate", "Please specify either size or extents.")
    name = _claim_name(session, vg, name)
    extent = vg["extent_size"]
    data_extents = _requested_extents(session, vg, size, extents_arg)
    metadata_text = args.last("poolmetadatasize")
    metadata, chunk = _metadata_bytes(data_extents * extent)
    if metadata_text is not None:
        _, metadata = parse_size(metadata_text, "--poolmetadatasize")
        metadata = min(max(metadata, THIN_MIN_METADATA_BYTES), THIN_MAX_METADATA_BYTES)
    metadata_extents = session.to_extents(vg, metadata)
    spare_wanted = yes_no(args.last("poolmetadataspare"), "poolmetadataspare")
    spare_growth = 0
    if spare_wanted is not False:
        spare_growth = max(0, min(metadata_extents, session.to_extents(vg, 16 * GiB))
                           - vg["pmspare_extents"])
    _need_extents(session, vg, data_extents)
    needed = data_extents + metadata_extents + spare_growth
    free = session.free_extents(vg)
    if free < needed:
        raise Fail(EXIT_FAILED, f"Insufficient free space: {needed} extents needed, "
                                f"but only {free} available")
    zero = yes_no(args.last("zero"), "zero")
    session.out.print(f"Thin pool volume with chunk size {human(chunk)} can address at "
                      f"most {human(THIN_MAX_METADATA_BYTES * chunk // 64)} of data.")
    vg["pmspare_extents"] += spare_growth
    session.new_lv(vg, name, "thin-pool", data_extents, tags,
                   metadata_extents=metadata_extents, chunk_bytes=chunk,
                   zero=zero is not False, chunks={}, next_chunk=1)
    session.check_overprovisioning(vg, name)
    session.out.print(f'Logical volume "{name}" created.')


def _create_thin(session: Session, args: Args, target: str, name: str | None,
                 tags: list[str], virtual: int, skip: bool | None,
                 activate: bool | None) -> None:
    pool_name = args.last("thinpool")
    if pool_name is not None:
        if "/" in pool_name:
            pool_vg, pool_name = session.split_lv(pool_name)
            vg = session.vg(pool_vg)
        else:
            vg, lv_name = _vg_and_name(session, target, name)
            name = lv_name
    else:
        vg_name, pool_name = session.split_lv(target)
        vg = session.vg(vg_name)
    pool = vg["lvs"].get(pool_name)
    if pool is None:
        raise Fail(EXIT_FAILED, f"Pool {pool_name} not found in Volume group {vg['name']}.")
    if pool["kind"] != "thin-pool":
        raise Fail(EXIT_FAILED, f"Logical volume {vg['name']}/{pool_name} is not a thin pool.")
    name = _claim_name(session, vg, name)
    session.rounding_note(vg, virtual)
    extents = session.to_extents(vg, virtual)
    active = (activate is not False) and (not skip or args.has("ignoreactivationskip"))
    pool["next_tree"] = pool.get("next_tree", 1) + 1
    session.new_lv(vg, name, "thin", extents, tags, active=active, skip=bool(skip),
                   pool=pool_name, origin=None, refs=[], tree=pool["next_tree"])
    if active:
        pool["active"] = True
    session.check_overprovisioning(vg, name)
    session.out.print(f'Logical volume "{name}" created.')


def _create_snapshot(session: Session, args: Args, target: str, name: str | None,
                     tags: list[str], size: int | None, skip: bool | None,
                     activate: bool | None) -> None:
    vg_name, origin_name = session.split_lv(target)
    vg = session.vg(vg_name)
    origin = vg["lvs"].get(origin_name)
    sized = size is not None or args.has("extents")
    if origin is not None and origin["kind"] != "thin" and not sized:
        raise Fail(EXIT_FAILED, "Please specify either size or extents with snapshots.")
    if sized:  # an old-style (COW) snapshot, whatever the origin
        refuse_origin(vg, origin_name)
        name = _claim_name(session, vg, name)
        extents = _requested_extents(session, vg, size, args.last("extents"))
        _need_extents(session, vg, extents)
        create_cow_snapshot(session, vg, origin_name, name, tags, extents, activate)
        return
    if origin is None:
        raise Fail(EXIT_FAILED, f"Snapshot origin LV {origin_name} not found in "
                                f"Volume group {vg_name}.")
    name = _claim_name(session, vg, name)
    skip_flag = True if skip is None else skip
    active = (activate is not False) and (not skip_flag or args.has("ignoreactivationskip"))
    session.new_lv(vg, name, "thin", origin["extents"], tags, active=active,
                   skip=skip_flag, pool=origin["pool"], origin=origin_name,
                   refs=list(origin["refs"]), tree=origin["tree"])
    if active:
        vg["lvs"][origin["pool"]]["active"] = True
    session.check_overprovisioning(vg, name)
    session.out.print(f'Logical volume "{name}" created.')
