"""Operations: the documented contract of create, delete and extend on bad requests."""

from __future__ import annotations

from driver_kit import AlreadyExists, InvalidSize
from driver_kit.compliance.checks.admission import refusal
from driver_kit.compliance.checks.base import (Check, CheckContext, CheckError, CheckFailed,
                                               behaviour, pool_named, room_gb, same,
                                               target_pool, total_provisioned_gb)


def _check_create_existing(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool_name = target_pool(drv)["pool_name"]
    volume = ctx.create(drv, 1, pool_name)
    return refusal(ctx, drv, pool_named(drv, pool_name),
                    f"a second create of the existing volume {volume!r}",
                    lambda: drv.create_volume(volume, 2, pool_name=pool_name), AlreadyExists,
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
    pool = target_pool(drv)
    if room_gb(pool) < 2:
        raise CheckError(f"pool {pool['pool_name']!r} has no room for a 2 GiB volume")
    volume = ctx.create(drv, 2, pool["pool_name"])
    return refusal(ctx, drv, pool_named(drv, pool["pool_name"]),
                    "an extend of a 2 GiB volume to 1 GiB",
                    lambda: drv.extend_volume(volume, 1), InvalidSize,
                    "documented: it raises driver_kit.InvalidSize and changes nothing")


CHECKS: tuple[Check, ...] = (
    behaviour("ops.create-existing",
               "Creating an existing name raises AlreadyExists and changes nothing",
               "driver_kit API: VolumeDriver.create_volume is not idempotent (documented "
               "contract)", _check_create_existing),
    behaviour("ops.delete-missing", "Deleting a missing volume succeeds (idempotent)",
               "driver_kit API: VolumeDriver.delete_volume is idempotent (documented "
               "contract)", _check_delete_missing),
    behaviour("ops.extend-smaller",
               "Extending to a smaller size raises InvalidSize and changes nothing",
               "driver_kit API: VolumeDriver.extend_volume needs a larger size (documented "
               "contract)", _check_extend_smaller),
)
