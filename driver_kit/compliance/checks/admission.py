"""Admission: every create, extend, snapshot, clone and volume from a snapshot past the
over-subscription cap is refused with ``CapacityExceeded`` and changes nothing, on every
pool and provisioning type; and the cap holds when it is reached by large creates and
then many small ones (the tour).

The cap is the truth's, worked out again before every decision (``checks.expect``),
so ``auto`` ratios, shared capacity groups and allocation units are judged right.
"""

from __future__ import annotations

from typing import Any, Callable

from driver_kit import CapacityExceeded, GiB, InvalidInput
from driver_kit.compliance.checks import expect
from driver_kit.compliance.checks.base import (KILO, Check, CheckContext, CheckError,
                                               CheckFailed, CheckSkipped, LatePool, Target,
                                               behaviour, each_target, report_pools, targets)

__all__ = ["CHECKS", "refusal"]

_OVER_CAP = "it must be refused with driver_kit.CapacityExceeded and the breakdown"


def _state(ctx: CheckContext, drv: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """What a refusal must not change: each pool's counts and the backend's volumes."""
    counts = {str(p.get("pool_name")): (p.get("provisioned_capacity_gb"),
                                        p.get("total_volumes")) for p in report_pools(drv)}
    return counts, {v.name: v.size_bytes for v in ctx.truth(drv).volumes}


def refusal(ctx: CheckContext, drv: Any, what: str, attempt: Callable[[], Any],
            expected: type[Exception], rule: str, *,
            probe: tuple[str, str] | None = None) -> str:
    """``attempt`` must raise ``expected`` and change neither the report nor the backend.

    ``what`` names the attempt in the verdict, ``rule`` says what it must do; a
    ``probe`` (clean-up key) it would have made is no longer tracked once refused.
    """
    counts, volumes = _state(ctx, drv)
    try:
        attempt()
    except expected:
        if probe is not None:
            ctx.done(probe)  # refused: there is nothing to delete
    except Exception as exc:
        raise CheckFailed(f"{what} raised {type(exc).__name__}: {exc}; {rule}") from None
    else:
        raise CheckFailed(f"{what} succeeded; {rule}")
    counts_after, volumes_after = _state(ctx, drv)
    if counts_after != counts:
        raise CheckFailed(f"{what} was refused but changed the report: provisioned and "
                          f"volumes per pool {counts} -> {counts_after}")
    if volumes_after != volumes:
        changed = sorted(set(volumes.items()) ^ set(volumes_after.items()))
        raise CheckFailed(f"{what} was refused but changed the backend: {changed[:3]}")
    return f"{what}: {expected.__name__}, nothing changed"


def _over_cap(ctx: CheckContext, drv: Any, target: Target, size_gb: int, what: str,
              attempt: Callable[[], Any], *, from_gb: int = 0,
              probe: tuple[str, str] | None = None) -> str:
    """``attempt`` (of ``size_gb`` on ``target``) must be refused: the truth says so."""
    decision = ctx.must_admit(drv, target, size_gb, from_gb=from_gb)
    if decision.admitted:
        raise CheckError(f"{what} on {target} fits the cap the truth gives; cannot test a "
                         f"refusal:\n{decision.explain()}")
    return refusal(ctx, drv, f"{what} on {target}, past the cap", attempt, CapacityExceeded,
                   _OVER_CAP, probe=probe)


def _check_create_over_cap(ctx: CheckContext) -> str:
    drv = ctx.driver()

    def one(target: Target) -> str:
        size, name = ctx.room_gb(drv, target) + 1, ctx.name("over")
        ctx.track_volume(drv, name)
        return _over_cap(ctx, drv, target, size, f"a {size} GiB create", lambda: drv.create_volume(
            name, size, pool_name=target.pool_name, extra_specs=target.specs),
            probe=("volume", name))
    return each_target(ctx, drv, one)


def _check_extend_over_cap(ctx: CheckContext) -> str | None:
    drv = ctx.driver()

    def one(target: Target) -> str | None:
        unit = ctx.unit_gb(drv, target)
        if ctx.room_gb(drv, target) < unit:
            return None
        volume = ctx.create(drv, unit, target)
        size = ctx.room_gb(drv, target) + 2
        while ctx.must_admit(drv, target, size, from_gb=unit).admitted and size < 10 ** 6:
            size += 1  # the volume's own allocation units count for it
        return _over_cap(ctx, drv, target, size,
                         f"an extend of a {unit} GiB volume to {size} GiB",
                         lambda: drv.extend_volume(volume, size), from_gb=unit)
    return each_target(ctx, drv, one)


def _offers(ctx: CheckContext, what: str, attempt: Callable[[], Any]) -> bool:
    """Whether ``attempt`` (a copy that fits) works: not when the driver or this pool or
    type does not offer it. What it made is removed at once, to leave the room."""
    try:
        with ctx.scoped():
            attempt()
    except (NotImplementedError, InvalidInput) as exc:
        ctx.not_supported(what, exc)
        return False
    return True


def _second_one_past_cap(ctx: CheckContext, drv: Any, target: Target) -> int | None:
    """A size whose volume fits now but whose snapshot (admitted at the volume's size)
    no longer does, the cap recomputed in between; None when there is none."""
    room, settings = ctx.room_gb(drv, target), expect.settings_of(drv)
    report_pool, now = LatePool(drv, target.pool_name), ctx.expected(drv, target)
    for size in sorted({room // 2 + 1, room * 2 // 3, room * 9 // 10, room}):
        after = expect.advanced(now, settings, size_bytes=size * GiB, thin=target.thin)
        if 1 <= size <= room and not expect.admission(
                after, report_pool, size_bytes=size * GiB, thin=target.thin,
                settings=settings).admitted:
            return size
    return None


def _check_snapshot_over_cap(ctx: CheckContext) -> str:
    drv = ctx.driver()
    thin_pools = {t.pool_name for t in targets(drv) if t.thin}

    def one(target: Target) -> str | None:
        if not target.thin and target.pool_name in thin_pools:
            return None  # Cinder's snapshot request has no type: counted thin there
        unit = ctx.unit_gb(drv, target)
        if ctx.room_gb(drv, target) < 2 * unit or not _offers(
                ctx, f"a snapshot on {target}",
                lambda: ctx.snapshot(drv, ctx.create(drv, unit, target))):
            return None
        size = _second_one_past_cap(ctx, drv, target)
        if size is None:
            return f"{target}: no volume size fits once but not twice (auto): no refusal due"
        volume = ctx.create(drv, size, target)
        name = ctx.name("snap")
        ctx.track_snapshot(drv, name)
        return _over_cap(ctx, drv, target, size, f"a snapshot of a {size} GiB volume",
                         lambda: drv.create_snapshot(name, volume), probe=("snapshot", name))
    return each_target(ctx, drv, one)


def _copies(ctx: CheckContext, drv: Any, source: str, target: Target,
            size_gb: int) -> list[tuple[str, Any]]:
    """(what, how to copy ``source``'s data into a new volume ``name`` of ``size``) for
    each copy the driver offers on ``source``'s pool and type (``size_gb``: the source's)."""
    def probe(copy: Callable[[str, int], Any]) -> Callable[[], Any]:
        name = ctx.name("copy")
        return lambda: (ctx.track_volume(drv, name), copy(name, size_gb))
    copies: list[tuple[str, Any]] = []
    clone = (lambda name, size: drv.create_cloned_volume(name, source, size))
    if _offers(ctx, f"a clone on {target}", probe(clone)):
        copies.append(("a clone", clone))
    try:
        snap = ctx.snapshot(drv, source)
    except (NotImplementedError, InvalidInput) as exc:
        ctx.not_supported(f"a snapshot on {target}", exc)
        return copies
    from_snap = (lambda name, size: drv.create_volume_from_snapshot(name, snap, size))
    if _offers(ctx, f"a volume from a snapshot on {target}", probe(from_snap)):
        copies.append(("a volume from a snapshot", from_snap))
    return copies


def _check_copy_over_cap(ctx: CheckContext) -> str:
    drv = ctx.driver()
    if not callable(getattr(drv, "create_cloned_volume", None)):
        raise CheckSkipped(f"{type(drv).__name__} has no create_cloned_volume")

    def one(target: Target) -> str | None:
        unit = ctx.unit_gb(drv, target)
        if ctx.room_gb(drv, target) < 2 * unit:
            return None
        done = []
        for what, copy in _copies(ctx, drv, ctx.create(drv, unit, target), target, unit):
            size, name = ctx.room_gb(drv, target) + 1, ctx.name("copy")
            ctx.track_volume(drv, name)
            done.append(_over_cap(ctx, drv, target, size, f"{what} of {size} GiB",
                                  lambda: copy(name, size), probe=("volume", name)))
        return "; ".join(done) or None
    return each_target(ctx, drv, one)


def _check_fill_to_cap(ctx: CheckContext) -> str:
    tour = ctx.tour()
    if not tour.decisions:
        raise CheckSkipped(f"the tour took no decision near a cap: {tour.summary()}")
    over = [d for d in tour.decisions if d.admitted and not d.allowed]
    if over:
        raise CheckFailed(f"{over[0].label} was admitted past the cap the backend's figures "
                          f"give:\n{over[0].why}" + (f" (and {len(over) - 1} more)"
                                                      if len(over) > 1 else ""))
    refused = sum(not d.admitted for d in tour.decisions)
    return (f"{len(tour.decisions)} creates near the caps, {refused} refused at the cap; "
            f"{tour.summary()}")


CHECKS: tuple[Check, ...] = (
    behaviour("admission.create-over-cap",
              "A create past the cap is refused with CapacityExceeded, changing nothing, "
              "on every pool and type", f"{KILO}, LVM driver: create_volume checks so that "
              f"'over provisioning will not happen even when a request didn't go through "
              f"the scheduler'", _check_create_over_cap),
    behaviour("admission.extend-over-cap",
              "An extend past the cap is refused with CapacityExceeded, changing nothing, "
              "on every pool and type", f"{KILO}, LVM driver: the same check in "
              f"extend_volume", _check_extend_over_cap),
    behaviour("admission.snapshot-over-cap",
              "A snapshot past the cap is refused with CapacityExceeded, changing nothing",
              f"{KILO}, LVM driver; the kit admits a snapshot for its volume's size, as "
              f"Cinder's scheduler does (no type: thin where the pool can)",
              _check_snapshot_over_cap),
    behaviour("admission.copy-over-cap",
              "A clone or a volume from a snapshot past the cap is refused, changing nothing",
              f"{KILO}, LVM driver: every request that creates capacity is checked",
              _check_copy_over_cap),
    behaviour("admission.fill-to-cap",
              "Reaching the cap with large then many small creates never passes it",
              f"{KILO}, LVM driver: over provisioning 'will not happen'; the cap recomputed "
              f"before every decision", _check_fill_to_cap),
)
