"""Backend truth: every report the run sees says what the backend says.

The truth hook reads the backend through its own API; each report field is
compared, pool by pool and state by state (the tour), with what the spec's
rounding makes of the truth (``checks.expect``). A field whose *form* is wrong
(a string, 3 decimals, negative) is left to the report rules, so one bug fails
one check. The hooks themselves are checked first: all required ones present,
and none going through the driver.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from driver_kit import GiB, validate_stats
from driver_kit.compliance.checks.base import (KILO, QUEENS, TRUTH, Check, CheckContext,
                                               CheckFailed, behaviour, first_target, number)
from driver_kit.compliance.checks.expect import Expected, Settings, expected_pool
from driver_kit.compliance.hooks import GUIDE, REQUIRED_HOOKS, BackendTruth

__all__ = ["CHECKS", "HOOK_CHECKS", "agrees", "counting_calls", "problems_in"]

_DRIVER_CALLS = ("create_volume", "delete_volume", "extend_volume", "create_snapshot",
                 "delete_snapshot", "create_cloned_volume", "create_volume_from_snapshot",
                 "get_volume_stats")


@contextlib.contextmanager
def counting_calls(drv: Any) -> Iterator[list[str]]:
    """Every call made to the driver's operations and ``backend_*`` methods meanwhile."""
    calls: list[str] = []
    names = [n for n in dir(drv) if n in _DRIVER_CALLS or n.startswith("backend_")]
    wrapped = []
    for name in names:
        method = getattr(drv, name, None)
        if not callable(method):
            continue

        def counted(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            calls.append(_name)
            return _method(*args, **kwargs)
        try:
            setattr(drv, name, counted)
        except AttributeError:
            continue  # read-only (slots): cannot be watched
        wrapped.append(name)
    try:
        yield calls
    finally:
        for name in wrapped:
            with contextlib.suppress(AttributeError):
                delattr(drv, name)


def _check_required_hooks(ctx: CheckContext) -> str:
    bad = {**ctx.notes.get("bad_hooks", {}), **ctx.hooks.bad_signatures()}
    missing = [name for name in ctx.hooks.missing(REQUIRED_HOOKS) if name not in bad]
    problems = []
    if missing:
        problems.append(f"the driver gives no {', '.join(missing)} hook"
                        f"{'s' if len(missing) > 1 else ''}: add them to its "
                        f"ComplianceHooks (COMPLIANCE_HOOKS in the driver's module or "
                        f"class, or register_hooks()); the checks needing them are skipped")
    if bad:
        problems.append("hooks with the wrong signature: " + "; ".join(bad.values()))
    if problems:
        raise CheckFailed(f"not certified: {'; '.join(problems)} (see {GUIDE}, "
                          f"'3. The hooks')")
    given = sum(ctx.hooks.available().values())
    return (f"{len(REQUIRED_HOOKS)} required hooks present; all {given} hooks given take "
            f"the harness's arguments")


def _check_hooks_independent(ctx: CheckContext) -> str:
    drv = ctx.driver()
    hooks, pool_name = ctx.hooks, first_target(drv).pool_name
    with counting_calls(drv) as calls:
        unit = ctx.unit_gb(drv, pool_name)
        truth_calls = list(calls)
        name = ctx.out_of_band(drv, unit, pool_name)
        hooks.resize_out_of_band(drv, name, 2 * unit)
        made_calls = calls[len(truth_calls):]
    for hook, used in (("read_truth", truth_calls), ("create_out_of_band or "
                                                     "resize_out_of_band", made_calls)):
        if used:
            raise CheckFailed(f"the {hook} hook went through the driver ({', '.join(used)}); "
                              f"it must use the backend's own API, or the harness would "
                              f"grade the driver with its own answers")
    seen = ctx.truth(drv).volume(name)
    if seen is None or seen.size_bytes < 2 * unit * GiB:
        raise CheckFailed(f"after create_out_of_band and resize_out_of_band to {2 * unit} "
                          f"GiB the "
                          f"truth hook shows {seen!r}: the hooks do not act on the backend "
                          f"the truth reads")
    if hooks.delete_out_of_band is not None:
        with counting_calls(drv) as calls:
            ctx.remove_out_of_band(name)
        if calls:
            raise CheckFailed(f"the delete_out_of_band hook went through the driver "
                              f"({', '.join(calls)})")
    return "read_truth and the out-of-band hooks never called the driver"


def _check_calls_counted(ctx: CheckContext) -> str:
    drv = ctx.driver(operations=False)
    before = ctx.hooks.backend_calls(drv)
    drv.get_volume_stats(refresh=True)
    after = ctx.hooks.backend_calls(drv)
    if not (isinstance(after, int) and isinstance(before, int) and after > before):
        raise CheckFailed(f"the backend_calls hook went {before!r} -> {after!r} over a "
                          f"get_volume_stats(refresh=True), which reads the backend: it "
                          f"does not count requests, so it cannot prove a cache")
    return f"{after - before} backend requests counted for one refresh"


# ---------------------------------------------------------------- fields

Comparison = Callable[[dict[str, Any], Expected], str | None]


def _differs(key: str, what: str, attr: str) -> Comparison:
    def compare(pool: dict[str, Any], expected: Expected) -> str | None:
        want = getattr(expected, attr)
        if number(pool.get(key)) and abs(pool[key] - want) < 0.005:
            return None
        return f"{key} {pool.get(key)!r}, the backend says {want} ({what})"
    return compare


def _ratio_and_reserved(pool: dict[str, Any], expected: Expected) -> str | None:
    reserved = expected.reserved_percentage
    if reserved is not None and pool.get("reserved_percentage") != reserved:
        return (f"reserved_percentage {pool.get('reserved_percentage')!r}, configured "
                f"{reserved}")
    ratio = pool.get("max_over_subscription_ratio")
    if pool.get("thin_provisioning_support") is not True or expected.ratio is None \
            or (number(ratio) and abs(ratio - expected.ratio) <= 0.01):
        return None
    return (f"max_over_subscription_ratio {ratio!r}, expected {expected.ratio} (the "
            f"configured ratio; for 'auto', 1 + provisioned / (total - free + 1) over the "
            f"backend's figures, 20 while nothing is provisioned)")


def _form_errors(report: Any) -> set[str]:
    """The fields ``validate_stats`` flags (left to the report rules); free above total
    flags both, as either may be the wrong one."""
    flagged = set()
    for v in validate_stats(report):
        flagged.add(v.field)
        if v.id == "free-le-total":
            flagged.add(v.field.replace("free_capacity_gb", "total_capacity_gb"))
    return flagged


def problems_in(report: Any, truth: BackendTruth, settings: Settings,
                compare: Comparison, reads: tuple[str, ...] | None = None) -> list[str]:
    """What ``compare`` finds wrong in one report, pool by pool, against ``truth``.

    A pool whose form the report rules flag is left to them: wholly, or, when the
    comparison says which fields it ``reads``, only if one of those is flagged (a
    malformed ratio must not hide a wrong total).
    """
    if not isinstance(report, dict):
        return []
    flagged, problems = _form_errors(report), []
    for index, pool in enumerate(report.get("pools") or ()):
        if not isinstance(pool, dict) or pool.get("backend_state", "up") != "up":
            continue
        expected = expected_pool(truth, str(pool.get("pool_name")), settings,
                                 thin=pool.get("thin_provisioning_support") is True)
        at = f"pools[{index}]"
        left = {at} | {f"{at}.{name}" for name in reads} if reads is not None else None
        if expected is None or any(f in left if left is not None else f.startswith(at)
                                   for f in flagged):
            continue
        problem = compare(pool, expected)
        if problem:
            problems.append(f"pool {pool.get('pool_name')!r} reports {problem}")
    return problems


def agrees(report: Any, truth: BackendTruth, settings: Settings) -> bool:
    """Whether every field of ``report`` is what ``truth`` makes of it."""
    return not any(problems_in(report, truth, settings, compare)
                   for compare in _COMPARISONS.values())


def _pool_problems(ctx: CheckContext, compare: Comparison,
                   reads: tuple[str, ...] | None) -> tuple[int, list[str]]:
    """(states judged, problems) of one field over the tour."""
    tour, problems, states = ctx.tour(), [], 0
    for obs in tour.observations:
        if obs.truth is None or not isinstance(obs.report, dict):
            continue
        states += 1
        problems += [f"{obs.label}: {problem}" for problem in
                     problems_in(obs.report, obs.truth, obs.settings, compare, reads)]
    return states, problems


def _truth_check(compare: Comparison,
                 reads: tuple[str, ...]) -> Callable[[CheckContext], str]:
    def run(ctx: CheckContext) -> str:
        states, problems = _pool_problems(ctx, compare, reads)
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            raise CheckFailed("; ".join(problems[:3]) + more)
        return f"{states} states agree with the backend; tour: {ctx.tour().summary()}"
    return run


def _check_pools(ctx: CheckContext) -> str:
    problems, states = [], 0
    for obs in ctx.tour().observations:
        pools = obs.report.get("pools") if isinstance(obs.report, dict) else None
        if obs.truth is None or not isinstance(pools, list):
            continue
        states += 1
        named = [p.get("pool_name") for p in pools if isinstance(p, dict)]
        real = [p.pool_name for p in obs.truth.pools if p.served]
        if sorted(map(str, named)) != sorted(real):
            problems.append(f"{obs.label}: the report names pools {named}, the backend "
                            f"serves {real}")
        for pool in pools:
            if isinstance(pool, dict) and pool.get("backend_state", "up") != "up":
                problems.append(f"{obs.label}: pool {pool.get('pool_name')!r} is reported "
                                f"down ({pool.get('down_reason')}) while the backend answers")
    if problems:
        raise CheckFailed("; ".join(problems[:3]))
    return f"the pools the backend serves, up, in all {states} states"


def _total_volumes(pool: dict[str, Any], expected: Expected) -> str | None:
    got = pool.get("total_volumes")
    if got in (expected.own_volumes, expected.total_volumes) and isinstance(got, int):
        return None
    group = "" if expected.own_volumes == expected.total_volumes else \
        f", or {expected.total_volumes} on its capacity group"
    return (f"total_volumes {got!r}, the backend has {expected.own_volumes} volumes on the "
            f"pool{group} (snapshots apart)")


def _group_volumes(pool: dict[str, Any], expected: Expected) -> str | None:
    got = pool.get("total_volumes")
    if got == expected.own_volumes != expected.total_volumes:
        return (f"total_volumes {got!r}, the pool's own volumes; its capacity group holds "
                f"{expected.total_volumes}")
    return None  # any other wrong count is truth.total-volumes's


def _snapshot_capacity(pool: dict[str, Any], expected: Expected) -> str | None:
    if "snapshot_capacity_gb" not in pool:
        return None  # an extra of the kit's report; Cinder's contract has no such field
    got = pool["snapshot_capacity_gb"]
    if number(got) and abs(got - expected.snapshot_gb) < 0.005:
        return None
    return (f"snapshot_capacity_gb {got!r}, the backend's snapshots on the pool take "
            f"{expected.snapshot_gb} (virtual sizes, rounded up)")


def _truth(id_: str, title: str, clause: str, severity: str = "must") -> Check:
    return Check(id=id_, title=title, clause=clause, severity=severity, kind="report",
                 run=_truth_check(_COMPARISONS[id_], _READS[id_]), hooks=TRUTH)


_ROUNDING = (f"{QUEENS}, Terminology: GiB, 2 decimals; the kit's conservative rounding "
             f"(total and free down, provisioned up)")

#: the report fields each comparison reads
_READS: dict[str, tuple[str, ...]] = {
    "truth.total": ("total_capacity_gb",), "truth.free": ("free_capacity_gb",),
    "truth.provisioned": ("provisioned_capacity_gb",),
    "truth.total-volumes": ("total_volumes",), "truth.total-volumes-group": ("total_volumes",),
    "truth.snapshot-capacity": ("snapshot_capacity_gb",),
    "truth.ratio": ("max_over_subscription_ratio", "reserved_percentage"),
}

_COMPARISONS: dict[str, Comparison] = {
    "truth.total": _differs("total_capacity_gb", "rounded down", "total_gb"),
    "truth.free": _differs("free_capacity_gb", "rounded down", "free_gb"),
    "truth.provisioned": _differs("provisioned_capacity_gb", "every volume of the pool's "
                                  "capacity group at its allocated size, rounded up",
                                  "provisioned_gb"),
    "truth.total-volumes": _total_volumes,
    "truth.total-volumes-group": _group_volumes,
    "truth.snapshot-capacity": _snapshot_capacity,
    "truth.ratio": _ratio_and_reserved,
}

HOOK_CHECKS: tuple[Check, ...] = (
    Check(id="hooks.required", title="The driver gives every required compliance hook",
          clause="harness: a driver is certified against its backend's own answers "
                 "(hook contract, contrib/README.md)", severity="must", kind="setup",
          run=_check_required_hooks),
    behaviour("hooks.independent", "The truth and out-of-band hooks do not go through "
              "the driver", f"harness: {KILO}, Terminology (volumes created 'directly, "
              f"without using Cinder')", _check_hooks_independent,
              hooks=("read_truth", "create_out_of_band", "resize_out_of_band"),
              optional_hooks=("delete_out_of_band",)),
    behaviour("hooks.calls-counted", "The backend_calls hook counts the requests a "
              "refresh sends", "harness: stats.refresh-cached proves a cache by counting "
              "backend requests (hook contract, contrib/README.md)", _check_calls_counted,
              hooks=("backend_calls",)),
)

CHECKS: tuple[Check, ...] = (
    Check(id="truth.pools", title="The report names the backend's pools, each up, in every "
          "state", clause=f"{QUEENS}, Terminology (the storage array's pool being used); "
          f"pool names are the scheduler's keys", severity="must", kind="report",
          run=_check_pools, hooks=TRUTH),
    _truth("truth.total", "total_capacity_gb is the backend's capacity in every state",
           f"{QUEENS}, Total capacity: 'the total physical capacity ... if no volumes were "
           f"present'; {_ROUNDING}"),
    _truth("truth.free", "free_capacity_gb is the backend's free space in every state",
           f"{QUEENS}, Free capacity: 'the current physical capacity available'; "
           f"{_ROUNDING}"),
    _truth("truth.provisioned", "provisioned_capacity_gb is the sum of the backend's "
           "volumes in every state", f"{QUEENS}, Provisioned capacity: 'all the volumes "
           f"present in there', 'all other existing volumes', 'does not include snapshots'; "
           f"{_ROUNDING}"),
    _truth("truth.total-volumes", "total_volumes counts the backend's volumes (the pool's "
           "own, or its capacity group's), snapshots apart, in every state",
           "Cinder driver interface (cinder/interface/volume_driver.py): total_volumes is "
           "'the total number of volumes on the storage backend', read only by custom "
           "filter and goodness functions; no spec defines it further"),
    _truth("truth.total-volumes-group", "On pools sharing a capacity group, total_volumes "
           "counts the whole group's volumes, as provisioned_capacity_gb does",
           f"the kit's rule, stricter than Cinder's: {QUEENS}, Provisioned capacity counts "
           f"'all other existing volumes' on the capacity the pool draws on; a filter "
           f"function reading total_volumes then sees the same volumes (should: neither "
           f"Cinder's scheduler nor a spec needs it)", severity="should"),
    _truth("truth.snapshot-capacity", "snapshot_capacity_gb, when reported, is the "
           "backend's snapshots on the pool in every state", f"{QUEENS}, Provisioned "
           f"capacity: snapshots are reported apart ('does not include snapshots'); the "
           f"kit's snapshot_capacity_gb, rounded up"),
    _truth("truth.ratio", "max_over_subscription_ratio and reserved_percentage are the "
           "configured ones ('auto' resolved by its formula) in every state",
           f"{QUEENS}, Over subscription ratio; {KILO}, 'auto': 1 + provisioned / "
           f"(total - free + 1), 20 on an empty pool"),
)
