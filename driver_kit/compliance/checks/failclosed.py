"""Fail-closed: when the backend cannot be read (unreachable, its volume listing failing,
or slower than ``stats_timeout``) the report says so: every pool down with no free
capacity and a reason, never stale figures, 'unknown' or 'infinite', never "no volumes";
creates are refused; the pools come back once the backend does. A write the backend
fails half-way raises BackendError and leaves nothing behind."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

from driver_kit import BackendError, InvalidInput, validate_stats
from driver_kit.compliance.checks.admission import refusal
from driver_kit.compliance.checks.base import (PLACEMENT, TRUTH, Check, CheckContext,
                                               CheckError, CheckFailed, CheckSkipped,
                                               behaviour, first_target, number, report_pools)
from driver_kit.compliance.checks.data import pattern

__all__ = ["CHECKS"]

#: the shortest stats_timeout (s) a driver runs with during the slow-backend check (it
#: is 3 times a healthy read when that is longer)
SHORT_STATS_TIMEOUT_S = 0.2


def _closed(ctx: CheckContext, drv: Any, what: str, *, probe: bool = True) -> None:
    """With the backend in trouble (``what``), a refresh must report every pool down."""
    try:
        report = drv.get_volume_stats(refresh=True)
    except Exception as exc:
        raise CheckFailed(f"get_volume_stats(refresh=True) raised {type(exc).__name__}: "
                          f"{exc} {what}; it must return a report whose pools are down (a "
                          f"raise leaves the scheduler with the last, stale report)") from None
    pools = report.get("pools") if isinstance(report, dict) else None
    problems = [str(v) for v in validate_stats(report)]
    for pool in pools if isinstance(pools, list) else ():
        if not isinstance(pool, dict):
            continue
        label = f"pool {pool.get('pool_name')!r}"
        if pool.get("backend_state") != "down":
            problems.append(f"{label} reports backend_state={pool.get('backend_state')!r} "
                            f"(provisioned {pool.get('provisioned_capacity_gb')!r}, free "
                            f"{pool.get('free_capacity_gb')!r})")
        for key in ("free_capacity_gb", "max_volume_size_gb"):
            if key in pool and pool[key] != 0:
                problems.append(f"{label} still offers {key}={pool[key]}")
    if probe:
        name = ctx.name("closed")
        ctx.track_volume(drv, name)
        try:
            drv.create_volume(name, 1)
            problems.append("a 1 GiB create was admitted")
        except Exception:
            ctx.done(("volume", name))  # refused: there is nothing to delete
    if problems:
        raise CheckFailed(f"{what}: " + "; ".join(problems[:4]))


def _break_then_repair(ctx: CheckContext, drv: Any, brk: Callable[[], Any], what: str, *,
                       probe: bool = True) -> str:
    first_target(drv)  # up before the trouble
    ctx.defer(("backend", "broken"), "the broken backend", lambda: ctx.hooks.repair_backend(drv))
    brk()
    _closed(ctx, drv, what, probe=probe)
    ctx.hooks.repair_backend(drv)
    ctx.done(("backend", "broken"))
    if not any(p.get("backend_state", "up") == "up" for p in report_pools(drv)):
        raise CheckFailed("after repair_backend the pools stay down")
    return f"{what}: every pool down, no free capacity; back up after repair"


def _check_unreadable(ctx: CheckContext) -> str:
    drv = ctx.driver()
    return _break_then_repair(ctx, drv, lambda: ctx.hooks.break_backend(drv),
                              "with the backend unreadable")


def _check_failed_listing(ctx: CheckContext) -> str:
    drv = ctx.driver()
    ctx.create(drv, 1, first_target(drv))  # "no volumes" would then be a visible lie
    return _break_then_repair(ctx, drv, lambda: ctx.hooks.break_listing(drv),
                              "with the backend's volume listing failing")


def _shortened(drv: Any, timeout_s: float) -> bool:
    """Give ``drv`` ``stats_timeout = timeout_s``; False when its configuration cannot be
    changed (not the kit's frozen dataclass)."""
    conf = getattr(drv, "configuration", None)
    if not dataclasses.is_dataclass(conf):
        return False
    drv.configuration = dataclasses.replace(conf, stats_timeout=timeout_s)
    return True


def _slow(ctx: CheckContext, drv: Any, when: str) -> str:
    timeout = drv.configuration.stats_timeout
    delay = 3 * timeout
    return _break_then_repair(
        ctx, drv, lambda: ctx.hooks.slow_backend(drv, delay),
        f"with every backend read {delay:g} s slower than stats_timeout = {timeout:g} s "
        f"({when})", probe=False)  # a slow backend still answers creates


def _check_slow_backend(ctx: CheckContext) -> str:
    """The short timeout is configured before set-up, as an operator sets it (a driver may
    read it once, in do_setup), then changed on a live driver that reads it per call."""
    drv = ctx.driver()
    conf = getattr(drv, "configuration", None)
    if not number(getattr(conf, "stats_timeout", None)):
        raise CheckError(f"cannot tell the stats_timeout of {type(drv).__name__} (its "
                         f"configuration.stats_timeout)")
    start = time.monotonic()
    first_target(drv)  # up, and how long a read takes when the backend is well
    short = max(SHORT_STATS_TIMEOUT_S, round(3 * (time.monotonic() - start), 1))
    configured = ctx.driver(configure=lambda new: _shortened(new, short))
    if configured.configuration.stats_timeout != short:
        if conf.stats_timeout * 4 > ctx.remaining_s():
            raise CheckSkipped(f"stats_timeout = {conf.stats_timeout:g} s cannot be shortened "
                               f"(the configuration of {type(drv).__name__} is not the "
                               f"kit's): a backend slower than it would outlast the check")
        return _slow(ctx, drv, "its configuration cannot be shortened")
    verdicts = [_slow(ctx, configured, "configured before set-up")]
    with ctx.scoped():
        _shortened(drv, short)
        try:
            verdicts.append(_slow(ctx, drv, "changed after set-up"))
        except CheckFailed as exc:  # Cinder never changes a live driver's options
            if "backend_state='up'" not in str(exc):
                raise
            verdicts.append("a change after set-up is not seen (read once at set-up)")
    return "; ".join(verdicts)


def _check_failed_write(ctx: CheckContext) -> str:
    drv = ctx.driver()
    target, hooks = first_target(drv), ctx.hooks
    unit = ctx.unit_gb(drv, target)
    if ctx.room_gb(drv, target) < 2 * unit:
        raise CheckSkipped(f"{target} has no room for {2 * unit} GiB")
    volume = ctx.create(drv, unit, target)
    if hooks.write_data is not None:  # a backend that copies data then has some to copy
        hooks.write_data(drv, volume, 0, pattern(4096, 1))
    try:
        snap = ctx.snapshot(drv, volume)  # can it snapshot at all?
        drv.delete_snapshot(snap)
        ctx.done(("snapshot", snap))
        snapshots = True
    except (NotImplementedError, InvalidInput):
        snapshots = False
    ctx.defer(("backend", "fault"), "the armed write fault", lambda: hooks.repair_backend(drv))
    name = ctx.name("failed")
    attempts = [("a create", lambda: drv.create_volume(name, 1, pool_name=target.pool_name,
                                                       extra_specs=target.specs),
                 ("volume", name)),
                (f"an extend from {unit} to {2 * unit} GiB",
                 lambda: drv.extend_volume(volume, 2 * unit), None)]
    if snapshots:
        attempts.append(("a snapshot", lambda: drv.create_snapshot(name, volume),
                         ("snapshot", name)))
    done = []
    for what, attempt, probe in attempts:
        if probe is not None:
            (ctx.track_volume if probe[0] == "volume" else ctx.track_snapshot)(drv, name)
        hooks.fail_next_write(drv)
        try:
            done.append(refusal(ctx, drv, f"{what} the backend failed half-way", attempt,
                                BackendError, "it must raise BackendError and leave nothing "
                                "behind (the backend as before, the report unchanged)",
                                probe=probe))
        finally:
            hooks.repair_backend(drv)
    ctx.done(("backend", "fault"))
    return "; ".join(done)


_CLAUSE = (f"{PLACEMENT}: count usage from the authoritative source and stay consistent "
           f"while it is unavailable; the kit's stats contract (a pool that cannot be read "
           f"is reported down)")

CHECKS: tuple[Check, ...] = (
    behaviour("failclosed.unreadable", "Stats fail closed when the backend cannot be read",
              _CLAUSE, _check_unreadable, hooks=("break_backend", "repair_backend")),
    behaviour("failclosed.failed-listing", "A failed volume listing is a down pool, never "
              "'no volumes'", _CLAUSE, _check_failed_listing,
              hooks=("break_listing", "repair_backend")),
    behaviour("failclosed.slow-backend", "A backend slower than stats_timeout is a down "
              "pool, never 'unknown'", f"{_CLAUSE}; the kit's stats_timeout option",
              _check_slow_backend, hooks=("slow_backend", "repair_backend")),
    behaviour("failclosed.failed-write", "A create, extend or snapshot the backend fails "
              "half-way raises BackendError and leaves nothing behind", "driver_kit API: "
              "backend_create_volume ('a failure must leave no volume behind'); Cinder "
              "reschedules on VolumeBackendAPIException", _check_failed_write,
              hooks=TRUTH + ("fail_next_write", "repair_backend"),
              optional_hooks=("write_data",)),
)
