"""Report rules: the form of every report the run sees (the first one and each state of
the tour), reusing ``driver_kit.validate_stats`` (each check maps to its violation
ids), and the cache that serves ``refresh=False``."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from driver_kit import validate_stats
from driver_kit.compliance.checks.base import (KILO, QUEENS, ZED, Check, CheckContext,
                                               CheckError, CheckFailed, CheckSkipped)

__all__ = ["CHECKS", "observed_reports"]


def observed_reports(ctx: CheckContext) -> Iterator[tuple[str, Any]]:
    """(state, report) for the run's first report and every state of its tour."""
    yield "first report", ctx.report()
    try:
        tour = ctx.tour()
    except CheckError:
        return  # the first report is still judged; the tour's failure is reported there
    for observation in tour.observations:
        yield observation.label, observation.report


def _report_check(violation_ids: tuple[str, ...]) -> Callable[[CheckContext], str]:
    def run(ctx: CheckContext) -> str:
        found, states = [], 0
        for label, report in observed_reports(ctx):
            states += 1
            found += [f"{label}: {v}" for v in validate_stats(report) if v.id in violation_ids]
        if found:
            more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
            raise CheckFailed("; ".join(found[:3]) + more)
        return f"{states} reports"
    return run


def _count_reads(drv: Any) -> Callable[[], int] | None:
    """A counter of ``backend_read_pools`` calls on ``drv``, when it has that hook."""
    original = getattr(drv, "backend_read_pools", None)
    if not callable(original):
        return None
    reads = [0]

    def counted() -> Any:
        reads[0] += 1
        return original()
    drv.backend_read_pools = counted
    return lambda: reads[0]


def _check_refresh_cached(ctx: CheckContext) -> str | None:
    drv = ctx.driver(operations=False)
    calls = ctx.hooks.backend_calls
    counter = (lambda: calls(drv)) if calls is not None else _count_reads(drv)
    what = "backend requests (backend_calls hook)" if calls is not None \
        else "backend_read_pools calls"
    first = drv.get_volume_stats(refresh=True)
    if counter is not None:
        before = counter()
        again = [drv.get_volume_stats(), drv.get_volume_stats(refresh=False)]
        made = counter() - before
        if made:
            raise CheckFailed(f"get_volume_stats(refresh=False) made {made} {what} in 2 "
                              f"calls; it must serve the cached report")
        if any(r != first for r in again):
            raise CheckFailed("get_volume_stats(refresh=False) returned a report that "
                              "differs from the last refresh")
        return f"2 cached calls, 0 {what}"
    if ctx.hooks.create_out_of_band is None:
        raise CheckSkipped("cannot observe backend reads: no backend_calls hook, no "
                           "backend_read_pools and no create_out_of_band hook")
    ctx.out_of_band(drv, 1, str(first["pools"][0].get("pool_name")))
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
          "from the cache, with no backend I/O", clause="Cinder driver interface: "
          "get_volume_stats(refresh) updates only when refresh is True (the volume "
          "manager refreshes periodically)", severity="should", kind="report",
          run=_check_refresh_cached, optional_hooks=("backend_calls", "create_out_of_band")),
)
