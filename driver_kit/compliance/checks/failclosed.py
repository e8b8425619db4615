"""Fail-closed: when the backend cannot be read the report says so (pools down, no
free capacity) and creates are refused."""

from __future__ import annotations

from driver_kit import validate_stats
from driver_kit.compliance.checks.base import (PLACEMENT, Check, CheckContext, CheckFailed,
                                               CheckSkipped, behaviour, report_pools,
                                               target_pool)


def _check_fail_closed(ctx: CheckContext) -> str:
    hooks = ctx.hooks
    if hooks.break_backend is None:
        raise CheckSkipped("no break_backend hook: give ComplianceHooks(break_backend=..., "
                           "repair_backend=...) to show the stats fail closed")
    drv = ctx.driver()
    target_pool(drv)
    if hooks.repair_backend is not None:
        ctx.defer(("backend", "broken"), "the broken backend",
                  lambda: hooks.repair_backend(drv))
    hooks.break_backend(drv)
    try:
        report = drv.get_volume_stats(refresh=True)
    except Exception as exc:
        raise CheckFailed(f"get_volume_stats(refresh=True) raised {type(exc).__name__}: "
                          f"{exc} while the backend could not be read; it must return a "
                          f"report whose pools are down (a raise leaves the scheduler "
                          f"with the last, stale report)") from None
    pools = report.get("pools") if isinstance(report, dict) else None
    problems = [str(v) for v in validate_stats(report)]
    for pool in pools if isinstance(pools, list) else ():
        if not isinstance(pool, dict):
            continue
        label = f"pool {pool.get('pool_name')!r}"
        if pool.get("backend_state") != "down":
            problems.append(f"{label} reports backend_state={pool.get('backend_state')!r}")
        for key in ("free_capacity_gb", "max_volume_size_gb"):
            if key in pool and pool[key] != 0:
                problems.append(f"{label} still offers {key}={pool[key]}")
    probe = ctx.name("closed")
    ctx.track_volume(drv, probe)
    try:
        drv.create_volume(probe, 1)
        problems.append("a 1 GiB create was admitted while the backend could not be read")
    except Exception:
        ctx.done(("volume", probe))  # refused: there is nothing to delete
    if problems:
        raise CheckFailed("with the backend unreadable: " + "; ".join(problems[:4]))
    if hooks.repair_backend is None:
        return "pools down with no free capacity (no repair_backend hook to test recovery)"
    hooks.repair_backend(drv)
    ctx.done(("backend", "broken"))
    if not any(p.get("backend_state", "up") == "up" for p in report_pools(drv)):
        raise CheckFailed("after repair_backend the pools stay down")
    return "pools down with no free capacity, creates refused, back up after repair"


CHECKS: tuple[Check, ...] = (
    behaviour("stats.fail-closed",
               "Stats fail closed when the backend cannot be read",
               f"{PLACEMENT}: count usage from the authoritative source and stay "
               f"consistent while it is unavailable; the kit's stats contract (a pool "
               f"that cannot be read is reported down)", _check_fail_closed),
)
