"""Provisioned accounting: creates, deletes, snapshots and volumes made outside the driver
move ``provisioned_capacity_gb`` exactly as the Queens spec defines it, on every pool
and provisioning type, read back through the truth hook.

A change on one pool moves the provisioned capacity of every pool sharing its
capacity group by the allocated size (whole allocation units), and no other pool's.
"""

from __future__ import annotations

from typing import Any, Callable

from driver_kit import GiB, InvalidInput, units
from driver_kit.compliance.checks.base import (KILO, QUEENS, Check, CheckContext, CheckFailed,
                                               CheckSkipped, Target, behaviour, each_target,
                                               number, provisioned_gb, report_pools, same,
                                               targets)
from driver_kit.compliance.hooks import BackendTruth

__all__ = ["CHECKS", "allocated", "moved_by"]


def _provisioned_by_pool(drv: Any) -> dict[str, float]:
    return {str(p.get("pool_name")): provisioned_gb(p) for p in report_pools(drv)
            if p.get("backend_state", "up") == "up"}


def moved_by(ctx: CheckContext, drv: Any, pool_name: str, change: Callable[[], Any],
             grown: Callable[[BackendTruth], int], what: str) -> float:
    """Run ``change``, which should grow the volumes on ``pool_name`` by ``grown(truth)``
    bytes (whole allocation units); every pool of its capacity group must report its
    provisioned capacity moved by that (as the spec's rounding gives it), every other
    pool unmoved. Returns the move (GiB)."""
    truth, before = ctx.truth(drv), _provisioned_by_pool(drv)
    change()
    after, delta = _provisioned_by_pool(drv), grown(truth)
    group = truth.pool(pool_name)
    problems, moved = [], 0.0
    for name, was in before.items():
        member = truth.pool(name)
        want = 0.0
        if member is not None and group is not None and member.group == group.group:
            had = truth.provisioned_bytes(name)
            want = moved = units.bytes_to_gb_up(had + delta) - units.bytes_to_gb_up(had)
        now = after.get(name)
        if now is None or not same(now - was, want):
            problems.append(f"pool {name!r} went {was} -> {now} GiB, it must "
                            f"{'move by ' + format(want, '.2f') if want else 'stay'}")
    if problems:
        raise CheckFailed(f"after {what}: " + "; ".join(problems))
    return moved


def allocated(pool_name: str, to_gb: int, from_gb: int = 0) -> Callable[[BackendTruth], int]:
    """The bytes growing a volume on ``pool_name`` from ``from_gb`` (0: a new one) to
    ``to_gb`` adds, in the pool's whole allocation units."""
    def grown(truth: BackendTruth) -> int:
        pool = truth.pool(pool_name)
        if pool is None:
            return (to_gb - from_gb) * GiB
        return pool.allocated_bytes(to_gb * GiB) - pool.allocated_bytes(from_gb * GiB)
    return grown


def _check_provisioned_tracks(ctx: CheckContext) -> str:
    drv = ctx.driver()

    def one(target: Target) -> str | None:
        size = min(2, ctx.room_gb(drv, target))
        if size < 1:
            return None
        volume: list[str] = []
        moved_by(ctx, drv, target.pool_name, lambda: volume.append(
            ctx.create(drv, size, target)), allocated(target.pool_name, size),
            f"a {size} GiB create on {target}")
        moved_by(ctx, drv, target.pool_name, lambda: ctx.delete(drv, volume[0]),
                 allocated(target.pool_name, 0, size), "deleting that volume")
        return f"{target} +{size} -{size} GiB"
    return each_target(ctx, drv, one)


def _check_snapshots_apart(ctx: CheckContext) -> str:
    drv = ctx.driver()
    reported: list[bool] = []

    def one(target: Target) -> str | None:
        unit = ctx.unit_gb(drv, target)  # a snapshot is admitted at its volume's size
        if ctx.room_gb(drv, target) < 2 * unit:
            return None
        volume, snap = ctx.create(drv, unit, target), []
        was = _snapshot_gb(drv, target.pool_name)
        try:
            moved_by(ctx, drv, target.pool_name, lambda: snap.append(ctx.snapshot(drv, volume)),
                     lambda truth: 0, f"a snapshot of a 1 GiB volume on {target}")
        except NotImplementedError as exc:
            ctx.notes["snapshots_supported"] = False
            raise CheckSkipped(f"the driver does not support snapshots ({exc})") from None
        except InvalidInput as exc:
            ctx.not_supported(f"a snapshot on {target}", exc)
            return None  # this pool or type takes none (thick volumes, say)
        found = ctx.truth(drv).volume(snap[0])
        if found is None or found.snapshot_of not in (volume, ""):
            raise CheckFailed(f"snapshot {snap[0]} of {volume} on {target}: the backend "
                              f"shows {found!r}, not a snapshot of {volume}")
        now = _snapshot_gb(drv, target.pool_name)
        reported.append(number(was) and number(now) and now > was)
        return f"{target}: provisioned unchanged, snapshot_capacity_gb {was} -> {now}"
    verdict = each_target(ctx, drv, one)
    ctx.notes["snapshots_supported"] = True
    ctx.notes["snapshot_capacity_reported"] = all(reported)
    return verdict


def _snapshot_gb(drv: Any, pool_name: str) -> Any:
    return next((p.get("snapshot_capacity_gb") for p in report_pools(drv)
                 if p.get("pool_name") == pool_name), None)


def _check_out_of_band(ctx: CheckContext) -> str:
    drv = ctx.driver()
    done = []
    for pool_name in dict.fromkeys(t.pool_name for t in targets(drv)):
        name: list[str] = []
        unit = ctx.unit_gb(drv, pool_name)
        made = moved_by(ctx, drv, pool_name, lambda: name.append(
            ctx.out_of_band(drv, 2 * unit, pool_name)), allocated(pool_name, 2 * unit),
            f"a {2 * unit} GiB volume appeared on pool {pool_name!r} outside the driver")
        grown = moved_by(
            ctx, drv, pool_name,
            lambda: ctx.hooks.resize_out_of_band(drv, name[0], 3 * unit),
            allocated(pool_name, 3 * unit, 2 * unit),
            f"that volume was resized to {3 * unit} GiB outside the driver")
        done.append(f"pool {pool_name!r} +{made:g} +{grown:g} GiB")
    return "; ".join(done)


def _volume_counts(drv: Any) -> dict[str, Any]:
    return {str(p.get("pool_name")): p.get("total_volumes") for p in report_pools(drv)}


def _check_strays(ctx: CheckContext) -> str:
    drv, hooks = ctx.driver(), ctx.hooks
    done = []
    for pool_name in dict.fromkeys(t.pool_name for t in targets(drv)):
        name, counts = ctx.name("stray"), _volume_counts(drv)
        ctx.defer(("stray", name), f"stray {name}",
                  lambda name=name: hooks.delete_stray(drv, name))
        moved_by(ctx, drv, pool_name, lambda: hooks.create_stray(drv, name, pool_name),
                 lambda truth: 0, f"something that is not a volume ({name}) was put on "
                 f"pool {pool_name!r}")
        if _volume_counts(drv) != counts:
            raise CheckFailed(f"after something that is not a volume ({name}) was put on "
                              f"pool {pool_name!r}, total_volumes per pool went {counts} -> "
                              f"{_volume_counts(drv)}")
        done.append(f"pool {pool_name!r}")
    return f"provisioned and total_volumes unmoved on {', '.join(done)}"


_OUT_OF_BAND = ("read_truth", "create_out_of_band", "resize_out_of_band")

CHECKS: tuple[Check, ...] = (
    behaviour("provisioned.create-delete",
              "Provisioned rises by exactly the allocated size on create and falls back on "
              "delete, on every pool and type", f"{QUEENS}, Provisioned capacity: the "
              f"capacity used 'if all the volumes present in there were completely full'",
              _check_provisioned_tracks),
    behaviour("provisioned.excludes-snapshots", "A snapshot does not change provisioned",
              f"{QUEENS}, Provisioned capacity: '*does not include snapshots*'",
              _check_snapshots_apart),
    behaviour("provisioned.counts-out-of-band",
              "A volume created or resized outside the driver is counted, on every pool",
              f"{KILO}, Terminology (provisioned_capacity: user B's volumes created "
              f"'directly, without using Cinder' count); {QUEENS}: 'all other existing "
              f"volumes in that backend'", _check_out_of_band, hooks=_OUT_OF_BAND,
              optional_hooks=("delete_out_of_band",)),
    behaviour("provisioned.ignores-strays", "Something on the pool that is not a volume is "
              "counted neither as provisioned nor in total_volumes", f"{QUEENS}, "
              f"Provisioned capacity: the volumes present in the pool, 'does not include "
              f"snapshots' (nor other objects)", _check_strays,
              hooks=("read_truth", "create_stray", "delete_stray")),
)
