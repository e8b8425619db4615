"""What every family of checks shares: the verdict exceptions, the catalogue entry, the
context a check runs in, and helpers that read a driver's report."""

from __future__ import annotations

import itertools
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

from driver_kit import InvalidInput, calculate_virtual_free_capacity
from driver_kit.compliance.hooks import ComplianceHooks
from driver_kit.stats import is_number

__all__ = ["Check", "CheckContext", "CheckError", "CheckFailed", "CheckSkipped", "Severity",
           "behaviour", "set_up"]

Severity = Literal["must", "should"]

KILO = "specs/000 Kilo over-subscription"
QUEENS = "specs/001 Queens provisioning improvements"
ZED = "specs/002 Zed capacity factors"
PLACEMENT = "specs/003 Nova count usage from placement"


class CheckFailed(Exception):
    """The driver breaks the rule; the message says how."""


class CheckSkipped(Exception):
    """The check cannot apply to this driver; the message says why."""


class CheckError(Exception):
    """The check could not reach a verdict (the driver misbehaved in another way)."""



@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One catalogue entry: what is checked, which clause demands it, and how."""

    id: str
    title: str
    clause: str
    severity: Severity
    kind: Literal["setup", "report", "behaviour"]
    run: Callable[["CheckContext"], str | None] | None = None
    violation_ids: tuple[str, ...] = ()


def set_up(drv: Any) -> Any:
    """Set a new driver up as Cinder's volume manager does: ``do_setup()``, then
    ``check_for_setup_error()`` (each when the object has it); returns ``drv``."""
    for step in ("do_setup", "check_for_setup_error"):
        method = getattr(drv, step, None)
        if callable(method):
            method()
    return drv


_OPERATIONS = ("create_volume", "delete_volume", "extend_volume", "create_snapshot",
               "delete_snapshot", "get_volume_stats")


class CheckContext:
    """What one check may use: fresh drivers, unique names, the shared report, clean-up."""

    def __init__(self, *, factory: Callable[[], Any], hooks: ComplianceHooks,
                 spec: Any, prefix: str, counter: itertools.count, deadline: float,
                 shared_report: Callable[[], dict[str, Any]], notes: dict[str, Any]) -> None:
        self.hooks = hooks
        self.spec = spec
        self.notes = notes
        self.deadline = deadline
        self._factory = factory
        self._prefix = prefix
        self._counter = counter
        self._shared_report = shared_report
        self._pending: dict[tuple[str, str], tuple[str, Callable[[], Any]]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ drivers
    def driver(self, *, operations: bool = True) -> Any:
        """A fresh, set-up driver, as Cinder's volume manager makes one."""
        drv = self._factory()
        missing = [m for m in _OPERATIONS if not callable(getattr(drv, m, None))]
        if operations and missing:
            raise CheckSkipped(f"{type(drv).__name__} lacks driver_kit's operations API "
                               f"({', '.join(missing)}); behaviour checks need it")
        return set_up(drv)

    def report(self) -> dict[str, Any]:
        """The run's one ``get_volume_stats(refresh=True)`` dict, taken once."""
        return self._shared_report()

    def remaining_s(self) -> float:
        """Seconds left before the runner gives up on this check, minus a margin."""
        return max(0.5, (self.deadline - time.monotonic()) * 0.8)

    def name(self, tag: str) -> str:
        """A volume or snapshot name unique to this run."""
        return f"{self._prefix}-{tag}{next(self._counter)}"

    # ------------------------------------------------------------ clean-up
    def defer(self, key: tuple[str, str], what: str, undo: Callable[[], Any]) -> None:
        """Register an undo step, run (last in, first out) when the check ends."""
        with self._lock:
            self._pending[key] = (what, undo)

    def done(self, key: tuple[str, str]) -> None:
        """The check undid ``key`` itself."""
        with self._lock:
            self._pending.pop(key, None)

    def track_volume(self, drv: Any, name: str) -> None:
        self.defer(("volume", name), f"volume {name}", lambda: drv.delete_volume(name))

    def create(self, drv: Any, size_gb: int, pool_name: str, tag: str = "vol") -> str:
        """Create a tracked volume and return its name."""
        name = self.name(tag)
        self.track_volume(drv, name)
        drv.create_volume(name, size_gb, pool_name=pool_name)
        return name

    def delete(self, drv: Any, name: str) -> None:
        drv.delete_volume(name)
        self.done(("volume", name))

    def cleanup(self) -> list[str]:
        """Undo everything still registered; return what could not be undone."""
        problems = []
        while True:
            with self._lock:
                if not self._pending:
                    return problems
                _, (what, undo) = self._pending.popitem()
            try:
                undo()
            except Exception as exc:  # keep cleaning; report what is left behind
                problems.append(f"could not clean up {what}: {type(exc).__name__}: {exc}")




def behaviour(id_: str, title: str, clause: str, run: Callable[[CheckContext], Any],
              severity: Severity = "must") -> Check:
    """A catalogue entry for a check that drives a live driver."""
    return Check(id=id_, title=title, clause=clause, severity=severity, kind="behaviour",
                 run=run)


# ---------------------------------------------------------------- report helpers

def number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def report_pools(drv: Any) -> list[dict[str, Any]]:
    report = drv.get_volume_stats(refresh=True)
    pools = report.get("pools") if isinstance(report, dict) else None
    if not isinstance(pools, list) or not pools or \
            not all(isinstance(p, dict) for p in pools):
        raise CheckError("get_volume_stats(refresh=True) returned no usable pools")
    return pools


def target_pool(drv: Any) -> dict[str, Any]:
    """The pool a default create lands on: the first up thin pool, else the first up pool."""
    pools = report_pools(drv)
    up = [p for p in pools if p.get("backend_state", "up") == "up"]
    if not up:
        reasons = "; ".join(str(p.get("down_reason", "no reason given")) for p in pools)
        raise CheckError(f"no pool is up on a freshly set-up driver: {reasons}")
    return ([p for p in up if p.get("thin_provisioning_support") is True] or up)[0]


def pool_named(drv: Any, pool_name: str) -> dict[str, Any]:
    for pool in report_pools(drv):
        if pool.get("pool_name") == pool_name:
            return pool
    raise CheckError(f"pool {pool_name!r} vanished from the report")


def provisioned_gb(pool: Mapping[str, Any]) -> float:
    value = pool.get("provisioned_capacity_gb")
    if not number(value):
        raise CheckError(f"pool {pool.get('pool_name')!r} reports no numeric "
                         f"provisioned_capacity_gb ({value!r})")
    return float(value)


def total_provisioned_gb(drv: Any) -> float:
    return sum(provisioned_gb(p) for p in report_pools(drv))


def cumulative_room_gb(pool: Mapping[str, Any]) -> int:
    """Whole GiB all new volumes together may take: the report's virtual free capacity.

    Taken from the pool's capacity factors, or computed from its numbers with the
    kit's public Cinder-exact function when it reports none.
    """
    thin = pool.get("thin_provisioning_support") is True
    kind = "thin" if thin else "thick"
    for factors in pool.get("capacity_factors") or ():
        if isinstance(factors, dict) and factors.get("provisioned_type") == kind \
                and number(factors.get("virtual_free_capacity")):
            return max(0, math.floor(factors["virtual_free_capacity"]))
    try:
        free = calculate_virtual_free_capacity(
            pool["total_capacity_gb"], pool["free_capacity_gb"],
            pool["provisioned_capacity_gb"], thin,
            pool["max_over_subscription_ratio"] if thin else 1.0,
            pool["reserved_percentage"], thin)
    except (InvalidInput, KeyError, TypeError) as exc:
        raise CheckError(f"cannot tell how much room pool {pool.get('pool_name')!r} "
                         f"has: {exc}") from None
    return max(0, math.floor(free))


def room_gb(pool: Mapping[str, Any]) -> int:
    """The largest single volume the report says fits now (``max_volume_size_gb``)."""
    largest = pool.get("max_volume_size_gb")
    if isinstance(largest, int) and not isinstance(largest, bool) and largest >= 0:
        return largest
    return cumulative_room_gb(pool)


def same(a: float, b: float) -> bool:
    return abs(a - b) < 0.005

