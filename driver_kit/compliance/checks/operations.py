"""Operations: each one does what was asked, read back through the truth hook (create,
extend, clone and volume from a snapshot at the requested size, in the requested pool
and provisioning type), and the documented contract on bad requests."""

from __future__ import annotations

from typing import Any, Callable

from driver_kit import AlreadyExists, GiB, InvalidInput, InvalidSize
from driver_kit.compliance.checks.admission import refusal
from driver_kit.compliance.checks.base import (QUEENS, Check, CheckContext, CheckFailed,
                                               CheckSkipped, Target, behaviour, each_target,
                                               first_target, same, total_provisioned_gb)
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
        size = min(2, ctx.room_gb(drv, target))
        if size < 1:
            return None
        _read_back(ctx, drv, ctx.create(drv, size, target), target, size,
                   f"a {size} GiB create")
        return f"{target}: {size} GiB"
    return each_target(ctx, drv, one)


def _check_extend_readback(ctx: CheckContext) -> str:
    drv = ctx.driver()

    def one(target: Target) -> str | None:
        if ctx.room_gb(drv, target) < 3:
            return None
        volume = ctx.create(drv, 1, target)
        moved_by(ctx, drv, target.pool_name, lambda: drv.extend_volume(volume, 3),
                 allocated(target.pool_name, 3, 1), f"an extend from 1 to 3 GiB on {target}")
        _read_back(ctx, drv, volume, target, 3, "an extend from 1 to 3 GiB")
        return f"{target}: 1 -> 3 GiB"
    return each_target(ctx, drv, one)


def _copy_one(ctx: CheckContext, drv: Any, target: Target, what: str, size_gb: int,
              copy: Callable[[str], Any]) -> str | None:
    """Make ``copy`` (a new volume ``name``), read it back, delete it again."""
    name = ctx.name("copy")
    ctx.track_volume(drv, name)
    try:
        moved_by(ctx, drv, target.pool_name, lambda: copy(name),
                 allocated(target.pool_name, size_gb), f"{what} on {target}")
    except (NotImplementedError, InvalidInput):
        ctx.done(("volume", name))
        return None  # not offered for this pool or type
    _read_back(ctx, drv, name, target, size_gb, what)
    ctx.delete(drv, name)
    return f"{what} on {target}"


def _check_copy_readback(ctx: CheckContext) -> str:
    drv = ctx.driver()
    if not callable(getattr(drv, "create_cloned_volume", None)):
        raise CheckSkipped(f"{type(drv).__name__} has no create_cloned_volume")

    def one(target: Target) -> str | None:
        if ctx.room_gb(drv, target) < 3:
            return None
        source = ctx.create(drv, 1, target)
        done = [_copy_one(ctx, drv, target, "a 2 GiB clone of a 1 GiB volume", 2,
                          lambda name: drv.create_cloned_volume(name, source, 2))]
        try:
            snap = ctx.snapshot(drv, source)
        except (NotImplementedError, InvalidInput):
            snap = None
        if snap is not None:
            done.append(_copy_one(ctx, drv, target, "a 2 GiB volume from a snapshot of "
                                  "1 GiB", 2, lambda name: drv.create_volume_from_snapshot(
                                      name, snap, 2)))
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


def _check_delete_missing(ctx: CheckContext) -> str:
    drv = ctx.driver()
    before = total_provisioned_gb(drv)
    ghost = ctx.name("ghost")
    try:
        drv.delete_volume(ghost)
    except Exception as exc:
        raise CheckFailed(f"deleting the missing volume {ghost!r} raised "
                          f"{type(exc).__name__}: {exc}; documented: it succeeds "
                          f"(idempotent)") from None
    after = total_provisioned_gb(drv)
    if not same(before, after):
        raise CheckFailed(f"deleting a missing volume changed provisioned_capacity_gb "
                          f"{before} -> {after}")
    return "succeeded, nothing changed"


def _check_extend_smaller(ctx: CheckContext) -> str:
    drv = ctx.driver()
    target = first_target(drv)
    if ctx.room_gb(drv, target) < 2:
        raise CheckSkipped(f"{target} has no room for a 2 GiB volume")
    volume = ctx.create(drv, 2, target)
    return refusal(ctx, drv, "an extend of a 2 GiB volume to 1 GiB",
                   lambda: drv.extend_volume(volume, 1), InvalidSize,
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
              "contract)", _check_delete_missing, hooks=()),
    behaviour("ops.extend-smaller",
              "Extending to a smaller size raises InvalidSize and changes nothing",
              "driver_kit API: VolumeDriver.extend_volume needs a larger size (documented "
              "contract)", _check_extend_smaller),
)
