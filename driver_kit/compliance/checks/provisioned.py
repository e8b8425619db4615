"""Provisioned accounting: creates, deletes, snapshots and volumes made outside the
driver move ``provisioned_capacity_gb`` exactly as the Queens spec defines it."""

from __future__ import annotations

from typing import Any

from driver_kit.compliance.checks.base import (KILO, QUEENS, Check, CheckContext, CheckError,
                                               CheckFailed, CheckSkipped, behaviour,
                                               number, pool_named, provisioned_gb, room_gb,
                                               same, target_pool, total_provisioned_gb)


def _check_provisioned_tracks(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool = target_pool(drv)
    name_ = pool["pool_name"]
    size = min(2, room_gb(pool))
    if size < 1:
        raise CheckError(f"pool {name_!r} has no room for a 1 GiB volume")
    before = provisioned_gb(pool)
    volume = ctx.create(drv, size, name_)
    after = provisioned_gb(pool_named(drv, name_))
    if not same(after - before, size):
        raise CheckFailed(f"provisioned_capacity_gb went {before} -> {after} after creating "
                          f"a {size} GiB volume; it must rise by exactly {size}")
    ctx.delete(drv, volume)
    final = provisioned_gb(pool_named(drv, name_))
    if not same(final, before):
        raise CheckFailed(f"provisioned_capacity_gb is {final} after deleting the {size} GiB "
                          f"volume; it must fall back to {before}")
    return f"{before} -> {after} -> {final} GiB"


def _check_snapshots_apart(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool = target_pool(drv)
    name_ = pool["pool_name"]
    volume = ctx.create(drv, 1, name_)
    with_volume = pool_named(drv, name_)
    snap = ctx.name("snap")
    ctx.defer(("snapshot", snap), f"snapshot {snap}", lambda: drv.delete_snapshot(snap))
    try:
        drv.create_snapshot(snap, volume)
    except NotImplementedError as exc:
        ctx.done(("snapshot", snap))
        ctx.notes["snapshots_supported"] = False
        raise CheckSkipped(f"the driver does not support snapshots ({exc})") from None
    ctx.notes["snapshots_supported"] = True
    with_snapshot = pool_named(drv, name_)
    before, after = provisioned_gb(with_volume), provisioned_gb(with_snapshot)
    if not same(before, after):
        raise CheckFailed(f"provisioned_capacity_gb went {before} -> {after} when a snapshot "
                          f"of a 1 GiB volume was taken; snapshots must not count")
    snap_before = with_volume.get("snapshot_capacity_gb")
    snap_after = with_snapshot.get("snapshot_capacity_gb")
    ctx.notes["snapshot_capacity_reported"] = (
        number(snap_before) and number(snap_after) and snap_after > snap_before)
    drv.delete_snapshot(snap)
    ctx.done(("snapshot", snap))
    return f"provisioned stayed {after} GiB; snapshot_capacity_gb {snap_before} -> {snap_after}"


def make_out_of_band(ctx: CheckContext, drv: Any, size_gb: int) -> str:
    hooks = ctx.hooks
    name = ctx.name("oob")
    undo = (lambda: hooks.delete_out_of_band(drv, name)) if hooks.delete_out_of_band \
        else (lambda: drv.delete_volume(name))
    ctx.defer(("oob", name), f"out-of-band volume {name}", undo)
    hooks.create_out_of_band(drv, name, size_gb)
    return name


def _check_out_of_band(ctx: CheckContext) -> str:
    if ctx.hooks.create_out_of_band is None:
        raise CheckSkipped("no create_out_of_band hook: give ComplianceHooks("
                           "create_out_of_band=...) to show volumes made outside the "
                           "driver are counted")
    drv = ctx.driver()
    before = total_provisioned_gb(drv)
    make_out_of_band(ctx, drv, 2)
    after = total_provisioned_gb(drv)
    if not same(after - before, 2):
        raise CheckFailed(f"provisioned_capacity_gb went {before} -> {after} after a 2 GiB "
                          f"volume appeared on the backend outside the driver; it must "
                          f"count every volume on the pool")
    return f"{before} -> {after} GiB"


CHECKS: tuple[Check, ...] = (
    behaviour("provisioned.create-delete",
               "Provisioned rises by exactly the size on create and falls back on delete",
               f"{QUEENS}, Provisioned capacity: the capacity used 'if all the volumes "
               f"present in there were completely full'", _check_provisioned_tracks),
    behaviour("provisioned.excludes-snapshots", "A snapshot does not change provisioned",
               f"{QUEENS}, Provisioned capacity: '*does not include snapshots*'",
               _check_snapshots_apart),
    behaviour("provisioned.counts-out-of-band",
               "A volume created outside the driver is counted",
               f"{KILO}, Terminology (provisioned_capacity: user B's volumes created "
               f"'directly, without using Cinder' count); {QUEENS}: 'all other existing "
               f"volumes in that backend'", _check_out_of_band),
)
