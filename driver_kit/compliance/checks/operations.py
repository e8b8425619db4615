"""Operations: each one does what was asked, read back through the truth hook (create,
extend, clone and volume from a snapshot at the requested size, in the requested pool
and provisioning type), and the documented contract on bad requests."""

from __future__ import annotations

import os
from typing import Any, Callable

from driver_kit import (AlreadyExists, GiB, InvalidInput, InvalidSize, SnapshotNotFound,
                        VolumeNotFound)
from driver_kit.compliance.checks.admission import refusal
from driver_kit.compliance.checks.base import (QUEENS, TRUTH, Check, CheckContext, CheckError,
                                               CheckFailed, CheckSkipped, Target, behaviour,
                                               each_target, first_target, same,
                                               total_provisioned_gb)
from driver_kit.compliance.checks.provisioned import allocated, moved_by

__all__ = ["CHECKS"]


def _read_back(ctx: CheckContext, drv: Any, name: str, target: Target, size_gb: int,
               what: str) -> None:
    """Volume ``name`` must be on the backend as asked: pool, type, size (whole units)."""
    truth = ctx.truth(drv)
    found, pool = truth.volume(name), truth.pool(target.pool_name)
    wanted = size_gb * GiB
    largest = pool.allocated_bytes(wanted) if pool is not None else wanted
    if found is None:
        raise CheckFailed(f"after {what} the backend has no volume {name!r}")
    problems = []
    if found.pool_name != target.pool_name:
        problems.append(f"it is on pool {found.pool_name!r}")
    if found.thin != target.thin:
        problems.append(f"it is {'thin' if found.thin else 'thick'}")
    if not wanted <= found.size_bytes <= largest:
        problems.append(f"it has {found.size_bytes / GiB:g} GiB")
    if found.snapshot_of is not None:
        problems.append(f"it is a snapshot of {found.snapshot_of!r}")
    if problems:
        raise CheckFailed(f"after {what} on {target}, the backend says of {name!r}: "
                          f"{', '.join(problems)}; asked: {size_gb} GiB, "
                          f"{'thin' if target.thin else 'thick'}, on {target.pool_name!r}")


def _check_create_readback(ctx: CheckContext) -> str:
    drv = ctx.driver()

    def one(target: Target) -> str | None:
        unit = ctx.unit_gb(drv, target)
        size = unit * min(2, ctx.room_gb(drv, target) // unit)
        if size < 1:
            return None
        _read_back(ctx, drv, ctx.create(drv, size, target), target, size,
                   f"a {size} GiB create")
        return f"{target}: {size} GiB"
    return each_target(ctx, drv, one)


def _check_extend_readback(ctx: CheckContext) -> str:
    drv = ctx.driver()

    def one(target: Target) -> str | None:
        unit = ctx.unit_gb(drv, target)  # sizes in whole allocation units
        if ctx.room_gb(drv, target) < 5 * unit:
            return None
        volume = ctx.create(drv, unit, target)
        for was, new in ((unit, 3 * unit), (3 * unit, 5 * unit)):  # the second grows by 2
            moved_by(ctx, drv, target.pool_name, lambda: drv.extend_volume(volume, new),
                     allocated(target.pool_name, new, was),
                     f"an extend from {was} to {new} GiB on {target}")
            _read_back(ctx, drv, volume, target, new, f"an extend from {was} to {new} GiB")
        return f"{target}: {unit} -> {3 * unit} -> {5 * unit} GiB"
    return each_target(ctx, drv, one)


def _copy_one(ctx: CheckContext, drv: Any, target: Target, what: str, size_gb: int,
              copy: Callable[[str], Any]) -> str | None:
    """Make ``copy`` (a new volume ``name``), read it back, delete it again."""
    name = ctx.name("copy")
    ctx.track_volume(drv, name)
    try:
        moved_by(ctx, drv, target.pool_name, lambda: copy(name),
                 allocated(target.pool_name, size_gb), f"{what} on {target}")
    except (NotImplementedError, InvalidInput) as exc:
        ctx.done(("volume", name))
        ctx.not_supported(f"{what} on {target}", exc)
        return None  # not offered for this pool or type
    _read_back(ctx, drv, name, target, size_gb, what)
    ctx.delete(drv, name)
    return f"{what} on {target}"


def _check_copy_readback(ctx: CheckContext) -> str:
    drv = ctx.driver()
    if not callable(getattr(drv, "create_cloned_volume", None)):
        raise CheckSkipped(f"{type(drv).__name__} has no create_cloned_volume")

    def one(target: Target) -> str | None:
        unit = ctx.unit_gb(drv, target)
        if ctx.room_gb(drv, target) < 3 * unit:
            return None
        source, size = ctx.create(drv, unit, target), 2 * unit
        done = [_copy_one(ctx, drv, target, f"a {size} GiB clone of a {unit} GiB volume",
                          size, lambda name: drv.create_cloned_volume(name, source, size))]
        try:
            snap = ctx.snapshot(drv, source)
        except (NotImplementedError, InvalidInput) as exc:
            ctx.not_supported(f"a snapshot on {target}", exc)
            snap = None
        if snap is not None:
            done.append(_copy_one(ctx, drv, target, f"a {size} GiB volume from a snapshot "
                                  f"of {unit} GiB", size,
                                  lambda name: drv.create_volume_from_snapshot(
                                      name, snap, size)))
        return "; ".join(d for d in done if d) or None
    return each_target(ctx, drv, one)


def _check_create_existing(ctx: CheckContext) -> str:
    drv = ctx.driver()
    target = first_target(drv)
    volume = ctx.create(drv, 1, target)
    return refusal(ctx, drv, f"a second create of the existing volume {volume!r}",
                   lambda: drv.create_volume(volume, 2, pool_name=target.pool_name,
                                             extra_specs=target.specs), AlreadyExists,
                   "documented: it raises driver_kit.AlreadyExists and changes nothing")


def _delete_missing(ctx: CheckContext, what: str, method: str) -> str:
    """Deleting a missing ``what`` with ``method`` succeeds and changes nothing."""
    drv = ctx.driver()
    before = total_provisioned_gb(drv)
    ghost = ctx.name("ghost")
    try:
        getattr(drv, method)(ghost)
    except NotImplementedError as exc:
        raise CheckSkipped(f"{type(drv).__name__} has no {what}s: {exc}") from None
    except Exception as exc:
        raise CheckFailed(f"deleting the missing {what} {ghost!r} raised "
                          f"{type(exc).__name__}: {exc}; documented: it succeeds "
                          f"(idempotent)") from None
    after = total_provisioned_gb(drv)
    if not same(before, after):
        raise CheckFailed(f"deleting a missing {what} changed provisioned_capacity_gb "
                          f"{before} -> {after}")
    return "succeeded, nothing changed"


def _check_missing_volume(ctx: CheckContext) -> str:
    drv = ctx.driver()
    ghost, made = ctx.name("ghost"), ctx.name("made")
    ctx.track_volume(drv, made)
    ctx.track_snapshot(drv, made)
    attempts = {"an extend": lambda: drv.extend_volume(ghost, 2),
                "a snapshot": lambda: drv.create_snapshot(made, ghost)}
    if callable(getattr(drv, "create_cloned_volume", None)):
        attempts["a clone"] = lambda: drv.create_cloned_volume(made, ghost)
    before, problems = total_provisioned_gb(drv), []
    for what, attempt in attempts.items():
        try:
            attempt()
        except VolumeNotFound:
            continue
        except Exception as exc:
            problems.append(f"{what} raised {type(exc).__name__}: {exc}")
        else:
            problems.append(f"{what} succeeded")
    after = total_provisioned_gb(drv)
    if not same(before, after):
        problems.append(f"provisioned_capacity_gb went {before} -> {after}")
    if problems:
        raise CheckFailed(f"of the missing volume {ghost!r}: " + "; ".join(problems)
                          + "; documented: VolumeNotFound, nothing changed")
    return f"{', '.join(attempts)}: VolumeNotFound"


def _returned_size(ctx: CheckContext, drv: Any, volume: str) -> tuple[str, Any] | None:
    """The size the API gives a snapshot (else a clone) of ``volume``."""
    name = ctx.name("copy")
    for what, kind, make in (("a snapshot", "snapshot", drv.create_snapshot),
                             ("a clone", "volume", getattr(drv, "create_cloned_volume", None))):
        if make is None:
            continue
        (ctx.track_snapshot if kind == "snapshot" else ctx.track_volume)(drv, name)
        try:
            return what, make(name, volume).size_gb
        except (NotImplementedError, InvalidInput):
            ctx.done((kind, name))
    return None


def _check_unaligned_size(ctx: CheckContext) -> str:
    drv = ctx.driver()
    target = first_target(drv)
    unit = ctx.unit_gb(drv, target)
    if ctx.room_gb(drv, target) < 5 * unit:
        raise CheckSkipped(f"{target} has no room for {5 * unit} GiB")
    volume = ctx.out_of_band(drv, 2 * unit, target.pool_name)
    ctx.hooks.resize_out_of_band(drv, volume, 2.5 * unit)
    seen = ctx.truth(drv).volume(volume)
    if seen is None or seen.size_bytes < 2.5 * unit * GiB:
        raise CheckError(f"after resize_out_of_band to {2.5 * unit:g} GiB the truth shows "
                         f"{seen!r}")
    whole = -(-seen.size_bytes // GiB)
    returned = _returned_size(ctx, drv, volume)
    if returned is not None and (type(returned[1]) is not int or returned[1] != whole):
        raise CheckFailed(f"{returned[0]} of a volume of {seen.size_bytes} bytes (resized "
                          f"out of band to 2.5 GiB) is given size_gb={returned[1]!r}; the "
                          f"API's sizes are whole GiB, rounded up: {whole}")
    moved_by(ctx, drv, target.pool_name, lambda: drv.extend_volume(volume, whole + 1),
             lambda truth: (truth.pool(target.pool_name).allocated_bytes((whole + 1) * GiB)
                            - truth.pool(target.pool_name).allocated_bytes(seen.size_bytes)),
             f"an extend of that volume to {whole + 1} GiB")
    _read_back(ctx, drv, volume, target, whole + 1, f"an extend to {whole + 1} GiB")
    return (f"{seen.size_bytes} bytes read as {whole} GiB"
            f"{' by ' + returned[0] if returned else ''}, extended to {whole + 1} GiB")


def _check_device_path(ctx: CheckContext) -> str:
    drv = ctx.driver()
    path_of = getattr(drv, "backend_device_path", None)
    if not callable(path_of):
        raise CheckSkipped(f"{type(drv).__name__} has no backend_device_path")
    volume = ctx.create(drv, 1, first_target(drv))
    try:
        path = path_of(volume)
    except NotImplementedError as exc:
        raise CheckSkipped(str(exc)) from None
    if not isinstance(path, str) or not os.path.isabs(path):
        raise CheckFailed(f"the device path of volume {volume!r} is {path!r}, not an "
                          f"absolute path")
    note = "not on this host (a remote or simulated backend)"
    if os.path.exists(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            size, head = os.lseek(fd, 0, os.SEEK_END), os.pread(fd, 4096, 0)
        finally:
            os.close(fd)
        want = ctx.truth(drv).volume(volume)
        if want is None or size != want.size_bytes or len(head) != 4096:
            raise CheckFailed(f"{path}, the device path of volume {volume!r}, has {size} "
                              f"bytes; the backend says {want.size_bytes if want else 'no'}")
        note = "readable, of the volume's size"
    ghost = ctx.name("ghost")
    try:
        found = path_of(ghost)
    except VolumeNotFound:
        return f"{path}: {note}; a missing volume: VolumeNotFound"
    except Exception as exc:
        found = f"{type(exc).__name__}: {exc}"
    raise CheckFailed(f"the device path of the missing volume {ghost!r} gave {found!r}; "
                      f"documented: VolumeNotFound")


def _snapshot_of_new_volume(ctx: CheckContext, drv: Any) -> tuple[str, str]:
    """(a new 1 GiB volume, a snapshot of it); CheckSkipped without snapshots."""
    target = first_target(drv)
    volume = ctx.create(drv, 1, target)
    try:
        return volume, ctx.snapshot(drv, volume)
    except (NotImplementedError, InvalidInput) as exc:
        raise CheckSkipped(f"snapshots not supported on {target}: {exc}") from None


def _check_snapshot_existing(ctx: CheckContext) -> str:
    drv = ctx.driver()
    volume, snap = _snapshot_of_new_volume(ctx, drv)
    return refusal(ctx, drv, f"a second snapshot under the existing name {snap!r}",
                   lambda: drv.create_snapshot(snap, volume), AlreadyExists,
                   "documented: it raises driver_kit.AlreadyExists and changes nothing")


def _check_delete_snapshot(ctx: CheckContext) -> str:
    drv = ctx.driver()
    volume, snap = _snapshot_of_new_volume(ctx, drv)
    size = ctx.truth(drv).volume(volume)
    drv.delete_snapshot(snap)
    ctx.done(("snapshot", snap))
    if ctx.truth(drv).volume(snap) is not None:
        raise CheckFailed(f"after delete_snapshot({snap!r}) the backend still has it")
    try:
        drv.delete_snapshot(volume)
        outcome = "succeeded (no such snapshot)"
    except (InvalidInput, SnapshotNotFound) as exc:
        outcome = f"refused ({type(exc).__name__})"
    except Exception as exc:
        outcome = f"raised {type(exc).__name__}: {exc}"
    left = ctx.truth(drv).volume(volume)
    if left is None or size is None or left.size_bytes != size.size_bytes:
        raise CheckFailed(f"delete_snapshot given the volume {volume!r} {outcome}, and the "
                          f"backend now shows it as {left!r}: a volume must never be deleted "
                          f"as a snapshot")
    return f"the snapshot gone; delete_snapshot of a volume's name {outcome}, volume intact"


def _check_extend_smaller(ctx: CheckContext) -> str:
    drv = ctx.driver()
    target = first_target(drv)
    unit = ctx.unit_gb(drv, target)
    if ctx.room_gb(drv, target) < 2 * unit:
        raise CheckSkipped(f"{target} has no room for a {2 * unit} GiB volume")
    volume = ctx.create(drv, 2 * unit, target)
    return refusal(ctx, drv, f"an extend of a {2 * unit} GiB volume to {unit} GiB",
                   lambda: drv.extend_volume(volume, unit), InvalidSize,
                   "documented: it raises driver_kit.InvalidSize and changes nothing")


CHECKS: tuple[Check, ...] = (
    behaviour("ops.create-readback", "A create makes the volume asked for (pool, type, "
              "size), on every pool and type", f"{QUEENS}, Provisioning support: "
              f"provisioning:type chooses thin or thick", _check_create_readback),
    behaviour("ops.extend-readback", "An extend grows the volume to the new size, and "
              "provisioned by exactly the difference", f"{QUEENS}, Provisioned capacity; "
              f"Cinder's extend_volume(volume, new_size)", _check_extend_readback),
    behaviour("ops.copy-readback", "Clones and volumes from snapshots have the requested "
              "size, in their source's pool", f"{QUEENS}, Provisioned capacity; Cinder's "
              f"create_cloned_volume and create_volume_from_snapshot (volume.size)",
              _check_copy_readback),
    behaviour("ops.create-existing",
              "Creating an existing name raises AlreadyExists and changes nothing",
              "driver_kit API: VolumeDriver.create_volume is not idempotent (documented "
              "contract)", _check_create_existing),
    behaviour("ops.delete-missing", "Deleting a missing volume succeeds (idempotent)",
              "driver_kit API: VolumeDriver.delete_volume is idempotent (documented "
              "contract)", lambda ctx: _delete_missing(ctx, "volume", "delete_volume"),
              hooks=()),
    behaviour("ops.delete-missing-snapshot", "Deleting a missing snapshot succeeds "
              "(idempotent)", "driver_kit API: VolumeDriver.delete_snapshot is idempotent "
              "(documented contract)",
              lambda ctx: _delete_missing(ctx, "snapshot", "delete_snapshot"), hooks=()),
    behaviour("ops.delete-snapshot", "delete_snapshot removes the snapshot, and never a "
              "volume given by its name", "driver_kit API: VolumeDriver.delete_snapshot ("
              "the backend refuses a volume's name, never taking it for a snapshot)",
              _check_delete_snapshot),
    behaviour("ops.snapshot-existing",
              "Snapshotting under an existing snapshot's name raises AlreadyExists and "
              "changes nothing", "driver_kit API: VolumeDriver.create_snapshot is not "
              "idempotent (documented contract)", _check_snapshot_existing),
    behaviour("ops.missing-volume", "Extending, snapshotting or cloning a missing volume "
              "raises VolumeNotFound and changes nothing", "driver_kit API: "
              "VolumeNotFound (documented contract); Cinder's extend_volume, "
              "create_snapshot, create_cloned_volume", _check_missing_volume, hooks=()),
    behaviour("ops.unaligned-size", "A volume of unaligned size (resized out of band to "
              "2.5 GiB) is given whole GiB rounded up, and extends from its exact size",
              f"{QUEENS}, Terminology: GiB; Cinder's volume.size is whole GiB",
              _check_unaligned_size, hooks=TRUTH + ("create_out_of_band",
                                                    "resize_out_of_band"),
              optional_hooks=("delete_out_of_band",)),
    behaviour("ops.device-path", "A volume's device path is readable and of its size; a "
              "missing volume's raises VolumeNotFound", "driver_kit API: "
              "VolumeDriver.backend_device_path (the data path of attach and image copies)",
              _check_device_path),
    behaviour("ops.extend-smaller",
              "Extending to a smaller size raises InvalidSize and changes nothing",
              "driver_kit API: VolumeDriver.extend_volume needs a larger size (documented "
              "contract)", _check_extend_smaller),
)
