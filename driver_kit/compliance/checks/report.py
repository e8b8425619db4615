"""Report rules: each judges one ``get_volume_stats(refresh=True)`` dict, reusing
``driver_kit.validate_stats`` (each check maps to its violation ids), and the cache
that serves ``refresh=False``."""

from __future__ import annotations

from typing import Any, Callable

from driver_kit import validate_stats
from driver_kit.compliance.checks.base import (KILO, QUEENS, ZED, Check, CheckContext,
                                               CheckFailed, CheckSkipped)
from driver_kit.compliance.checks.provisioned import make_out_of_band


def _report_check(violation_ids: tuple[str, ...]) -> Callable[[CheckContext], None]:
    def run(ctx: CheckContext) -> None:
        found = [v for v in validate_stats(ctx.report()) if v.id in violation_ids]
        if found:
            more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
            raise CheckFailed("; ".join(str(v) for v in found[:3]) + more)
    return run


def _check_refresh_cached(ctx: CheckContext) -> str | None:
    drv = ctx.driver(operations=False)
    reads = [0]
    original = getattr(drv, "backend_read_pools", None)
    if callable(original):
        def counted() -> Any:
            reads[0] += 1
            return original()
        drv.backend_read_pools = counted
    first = drv.get_volume_stats(refresh=True)
    if reads[0]:
        reads[0] = 0
        again = [drv.get_volume_stats(), drv.get_volume_stats(refresh=False)]
        if reads[0]:
            raise CheckFailed(f"get_volume_stats(refresh=False) read the backend {reads[0]} "
                              f"times in 2 calls; it must serve the cached report")
        if any(r != first for r in again):
            raise CheckFailed("get_volume_stats(refresh=False) returned a report that "
                              "differs from the last refresh")
        return "2 cached calls, 0 backend reads"
    if ctx.hooks.create_out_of_band is None:
        raise CheckSkipped("cannot observe backend reads: the driver has no "
                           "backend_read_pools hook and no create_out_of_band hook is given")
    make_out_of_band(ctx, drv, 1)
    if drv.get_volume_stats(refresh=False) != first:
        raise CheckFailed("get_volume_stats(refresh=False) saw a change made on the "
                          "backend; it must serve the cached report")
    return "the cached report, unchanged by a volume made out of band"

def _report(id_: str, title: str, clause: str, *violations: str) -> Check:
    return Check(id=id_, title=title, clause=clause, severity="must", kind="report",
                 run=_report_check(violations), violation_ids=violations)


CHECKS: tuple[Check, ...] = (
    _report("stats.required-fields", "Required fields present with the right types",
            f"{QUEENS}, Terminology: each pool reports total, free and provisioned "
            f"capacity, reserved_percentage, ratio and provisioning support",
            "required-field", "field-type"),
    _report("stats.gib-2-decimals", "Capacities in GiB with at most 2 decimals",
            f"{QUEENS}, Terminology (GB, Total capacity): 'reported in GB and with a "
            f"precision no greater than 2 decimals'", "gib-2-decimals"),
    _report("stats.no-infinite-unknown", "No 'infinite' or 'unknown' capacity",
            f"{KILO}, Problem description: 'infinite' and 'unknown' 'could lead to over "
            f"provisioning'", "no-infinite-unknown"),
    _report("stats.no-allocated-capacity", "No driver-reported allocated_capacity_gb",
            f"{QUEENS}, Allocated capacity: 'drivers should not calculate or report this "
            f"information on their get_volume_stats method'", "no-allocated-capacity"),
    _report("stats.free-le-total", "Free capacity never exceeds total capacity",
            f"{QUEENS}, Free capacity: the physical capacity still available in the pool "
            f"(a part of total)", "free-le-total"),
    _report("stats.non-negative", "No negative capacity",
            f"{QUEENS}, Terminology: capacities are amounts of space", "non-negative"),
    _report("stats.ratio-ge-1", "max_over_subscription_ratio is a number >= 1.0",
            f"{QUEENS}, Over subscription ratio: 'with a greater or equal value to 1.0'; "
            f"{KILO}, Terminology", "ratio-ge-1"),
    _report("stats.reserved-range", "reserved_percentage is within 0..100",
            f"{QUEENS}, Reserved percentage: 'an integer value going from 0 up to 100'",
            "reserved-range"),
    _report("stats.provisioned-present", "provisioned_capacity_gb always present",
            f"{QUEENS}, Provisioned capacity: 'This is a required field and must always "
            f"be present'", "provisioned-present"),
    _report("stats.provisioning-support-declared", "Thin and/or thick support declared",
            f"{QUEENS}, Provisioning support: drivers 'indicate as capable of one of them "
            f"at least'; {KILO}, Capabilities", "provisioning-support-declared"),
    _report("stats.capacity-factors-consistent",
            "Capacity factors agree with the reported numbers",
            f"{ZED}, Proposed change: the dictionary calculate_capacity_factors() creates, "
            f"one per supported provisioning type", "capacity-factors-consistent"),
    Check(id="stats.refresh-cached", title="get_volume_stats(refresh=False) is served "
          "from the cache", clause="Cinder driver interface: get_volume_stats(refresh) "
          "updates only when refresh is True (the volume manager refreshes periodically)",
          severity="should", kind="report", run=_check_refresh_cached),
)
