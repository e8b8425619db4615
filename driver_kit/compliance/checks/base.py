"""What every family of checks shares: the verdict exceptions, the catalogue entry, the
context a check runs in (fresh drivers, names, clean-up, the truth hook), and helpers
that read a driver's report."""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Mapping

from driver_kit import GiB
from driver_kit.capacity import AdmissionDecision
from driver_kit.compliance.checks import expect
from driver_kit.compliance.hooks import BackendTruth, ComplianceHooks
from driver_kit.stats import is_number

__all__ = ["Check", "CheckContext", "CheckError", "CheckFailed", "CheckSkipped", "Severity",
           "Target", "behaviour", "set_up"]

Severity = Literal["must", "should"]

KILO = "specs/000 Kilo over-subscription"
QUEENS = "specs/001 Queens provisioning improvements"
ZED = "specs/002 Zed capacity factors"
PLACEMENT = "specs/003 Nova count usage from placement"
#: the hooks a check needs to tell the truth from the report
TRUTH = ("read_truth",)


class CheckFailed(Exception):
    """The driver breaks the rule; the message says how."""


class CheckSkipped(Exception):
    """The check cannot apply to this driver; the message says why."""


class CheckError(Exception):
    """The check could not reach a verdict (the driver misbehaved in another way)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One catalogue entry: what is checked, which clause demands it, how, and which
    hooks it needs (without them it is skipped; ``hooks.required`` fails instead)."""

    id: str
    title: str
    clause: str
    severity: Severity
    kind: Literal["setup", "report", "behaviour"]
    run: Callable[["CheckContext"], str | None] | None = None
    violation_ids: tuple[str, ...] = ()
    hooks: tuple[str, ...] = ()
    #: hooks the check uses when they are given (it runs without them)
    optional_hooks: tuple[str, ...] = ()


def behaviour(id_: str, title: str, clause: str, run: Callable[[CheckContext], Any], *,
              hooks: tuple[str, ...] = TRUTH, optional_hooks: tuple[str, ...] = (),
              severity: Severity = "must") -> Check:
    """A catalogue entry for a check that drives a live driver."""
    return Check(id=id_, title=title, clause=clause, severity=severity, kind="behaviour",
                 run=run, hooks=hooks, optional_hooks=optional_hooks)


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


@dataclass(frozen=True, slots=True)
class Target:
    """A pool and one provisioning type its report declares: where a check acts."""

    pool_name: str
    thin: bool

    @property
    def specs(self) -> dict[str, str]:
        """The extra specs that ask for this provisioning type."""
        return {"provisioning:type": "thin" if self.thin else "thick"}

    def __str__(self) -> str:
        return f"pool {self.pool_name!r} ({'thin' if self.thin else 'thick'})"


class CheckContext:
    """What one check may use: fresh drivers, unique names, the shared report and tour,
    the vendor's hooks, clean-up."""

    def __init__(self, *, factory: Callable[[], Any], hooks: ComplianceHooks, spec: Any,
                 prefix: str, counter: itertools.count, deadline: float,
                 shared: Mapping[str, Callable[[], Any]], notes: dict[str, Any],
                 scale: int = 64, build: Callable[[Any], Callable[[], Any]] | None = None,
                 ) -> None:
        self.hooks = hooks
        self.spec = spec
        #: makes a driver factory from ``spec`` (importable, so another process can too)
        self.build = build
        self.notes = notes
        self.deadline = deadline
        self.scale = scale
        self._factory = factory
        #: makes fresh drivers, not yet set up (children forked from this process use it)
        self.factory = factory
        self._prefix = prefix
        self._counter = counter
        self._shared = shared
        self._pending: dict[tuple[str, str], tuple[str, Callable[[], Any]]] = {}
        self._lock = threading.Lock()
        #: operations the driver said it does not offer (on some pool or type)
        self.unsupported: list[str] = []

    # ------------------------------------------------------------ drivers
    def driver(self, *, operations: bool = True,
               configure: Callable[[Any], None] | None = None) -> Any:
        """A fresh, set-up driver, as Cinder's volume manager makes one; ``configure``
        edits it before its set-up, as an operator's configuration would."""
        drv = self._factory()
        missing = [m for m in _OPERATIONS if not callable(getattr(drv, m, None))]
        if operations and missing:
            raise CheckSkipped(f"{type(drv).__name__} lacks driver_kit's operations API "
                               f"({', '.join(missing)}); behaviour checks need it")
        if configure is not None:
            configure(drv)
        return set_up(drv)

    def not_supported(self, what: str, exc: BaseException) -> None:
        """Note that the driver does not offer ``what`` (it raised ``exc``)."""
        with self._lock:
            self.unsupported.append(f"{what} ({type(exc).__name__}: {exc})")

    def report(self) -> dict[str, Any]:
        """The run's one ``get_volume_stats(refresh=True)`` dict, taken once."""
        return self._shared["report"]()

    def tour(self) -> Any:
        """The run's one tour of states (``checks.tour.Tour``), walked once."""
        return self._shared["tour"]()

    def remaining_s(self) -> float:
        """Seconds left before the runner gives up on this check, minus a margin."""
        return max(0.5, (self.deadline - time.monotonic()) * 0.8)

    def name(self, tag: str) -> str:
        """A volume or snapshot name unique to this run."""
        return f"{self._prefix}-{tag}{next(self._counter)}"

    def unit_gb(self, drv: Any, target: "Target | str") -> int:
        """The whole GiB of the pool's allocation unit (at least 1): sizes that are whole
        units, so that every create and extend of a check changes what it should."""
        name = target if isinstance(target, str) else target.pool_name
        if self.hooks.read_truth is not None:
            pool = self.truth(drv).pool(name)
            unit = pool.allocation_unit_bytes if pool is not None else 1
        else:  # the driver's own word is all there is (a kit driver's admission unit)
            says = getattr(drv, "allocation_unit_bytes", None)
            unit = says(name) if callable(says) else 1
        return max(1, -(-int(unit) // GiB))

    # ------------------------------------------------------------ the truth
    def truth(self, drv: Any) -> BackendTruth:
        """What the backend says now, through the vendor's ``read_truth`` hook."""
        try:
            truth = self.hooks.read_truth(drv)
        except Exception as exc:
            raise CheckError(f"the read_truth hook raised {type(exc).__name__}: {exc}") \
                from None
        if not isinstance(truth, BackendTruth):
            raise CheckError(f"the read_truth hook returned {truth!r}, not a BackendTruth")
        return truth

    def expected(self, drv: Any, target: Target,
                 truth: BackendTruth | None = None) -> expect.Expected:
        """What the report of ``target``'s pool must say now."""
        found = expect.expected_pool(truth or self.truth(drv), target.pool_name,
                                     expect.settings_of(drv), thin=target.thin)
        if found is None:
            raise CheckError(f"the truth hook knows no pool {target.pool_name!r}")
        return found

    def room_gb(self, drv: Any, target: Target, truth: BackendTruth | None = None) -> int:
        """The largest whole-GiB request admission must accept on ``target`` now."""
        try:
            return expect.room_gb(self.expected(drv, target, truth),
                                  LatePool(drv, target.pool_name), thin=target.thin,
                                  settings=expect.settings_of(drv))
        except LookupError as exc:
            raise CheckError(f"cannot tell how much room {target} has: {exc}") from None

    def must_admit(self, drv: Any, target: Target, size_gb: int,
                   truth: BackendTruth | None = None, *, from_gb: int = 0,
                   ) -> AdmissionDecision:
        """The decision admission must take now on a ``size_gb`` volume on ``target``
        (or on growing one from ``from_gb``)."""
        try:
            return expect.admission(self.expected(drv, target, truth),
                                    LatePool(drv, target.pool_name),
                                    size_bytes=size_gb * GiB, from_bytes=from_gb * GiB,
                                    thin=target.thin, settings=expect.settings_of(drv))
        except LookupError as exc:
            raise CheckError(f"cannot tell how much room {target} has: {exc}") from None

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

    def track_snapshot(self, drv: Any, name: str) -> None:
        self.defer(("snapshot", name), f"snapshot {name}", lambda: drv.delete_snapshot(name))

    def create(self, drv: Any, size_gb: int, target: Target, tag: str = "vol") -> str:
        """Create a tracked volume on ``target`` and return its name."""
        name = self.name(tag)
        self.track_volume(drv, name)
        drv.create_volume(name, size_gb, pool_name=target.pool_name, extra_specs=target.specs)
        return name

    def delete(self, drv: Any, name: str) -> None:
        drv.delete_volume(name)
        self.done(("volume", name))

    def snapshot(self, drv: Any, volume: str) -> str:
        """Snapshot ``volume`` (tracked); NotImplementedError when the driver cannot."""
        name = self.name("snap")
        self.track_snapshot(drv, name)
        try:
            drv.create_snapshot(name, volume)
        except NotImplementedError:
            self.done(("snapshot", name))
            raise
        return name

    def out_of_band(self, drv: Any, size_gb: int, pool_name: str) -> str:
        """A volume made on ``pool_name`` through the hook, behind the driver (tracked)."""
        hooks, name = self.hooks, self.name("oob")
        undo = (lambda: hooks.delete_out_of_band(drv, name)) if hooks.delete_out_of_band \
            else (lambda: drv.delete_volume(name))
        self.defer(("oob", name), f"out-of-band volume {name}", undo)
        hooks.create_out_of_band(drv, name, size_gb, pool_name)
        return name

    def remove_out_of_band(self, name: str) -> None:
        """Undo ``out_of_band`` now."""
        with self._lock:
            _, undo = self._pending.pop(("oob", name))
        undo()

    @contextlib.contextmanager
    def scoped(self) -> Iterator[None]:
        """Undo, on leaving (last in, first out), what was registered inside."""
        with self._lock:
            before = set(self._pending)
        try:
            yield
        finally:
            with self._lock:
                made = [key for key in self._pending if key not in before]
            for key in reversed(made):
                with self._lock:
                    _, undo = self._pending.pop(key)
                undo()

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


# ---------------------------------------------------------------- report helpers

def number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def report_pools(drv: Any) -> list[dict[str, Any]]:
    """The pools of a fresh report (``refresh=True``)."""
    report = drv.get_volume_stats(refresh=True)
    pools = report.get("pools") if isinstance(report, dict) else None
    if not isinstance(pools, list) or not pools or \
            not all(isinstance(p, dict) for p in pools):
        raise CheckError("get_volume_stats(refresh=True) returned no usable pools")
    return pools


def up_pools(drv: Any) -> list[dict[str, Any]]:
    """The pools of a fresh report that are up (CheckError when none is)."""
    pools = report_pools(drv)
    up = [p for p in pools if p.get("backend_state", "up") == "up"]
    if not up:
        reasons = "; ".join(str(p.get("down_reason", "no reason given")) for p in pools)
        raise CheckError(f"no pool is up on a freshly set-up driver: {reasons}")
    return up


def targets(drv: Any) -> list[Target]:
    """Every up pool with every provisioning type its report declares (thin first)."""
    return [Target(str(pool.get("pool_name")), thin) for pool in up_pools(drv)
            for thin in (True, False)
            if pool.get(f"{'thin' if thin else 'thick'}_provisioning_support") is True]


def each_target(ctx: CheckContext, drv: Any, one: Callable[[Target], str | None]) -> str:
    """``one`` on every target, each starting from a clean backend (pools sharing capacity
    would otherwise see each other's volumes); their notes, or CheckSkipped if none."""
    done = []
    for target in targets(drv):
        note = one(target)
        problems = ctx.cleanup()
        if problems:
            raise CheckError("; ".join(problems))
        if note:
            done.append(note)
    if not done:
        if ctx.unsupported:
            raise CheckSkipped("not supported by the driver: "
                               + "; ".join(dict.fromkeys(ctx.unsupported)))
        raise CheckSkipped("no pool has room to test this operation")
    return "; ".join(done)


def first_target(drv: Any) -> Target:
    """Where a default create lands: the first up thin pool, else the first up pool."""
    found = targets(drv)
    if not found:
        raise CheckError("no up pool declares thin or thick provisioning")
    return ([t for t in found if t.thin] or found)[0]


def pool_named(drv: Any, pool_name: str) -> dict[str, Any]:
    """The pool ``pool_name`` of a fresh report."""
    for pool in report_pools(drv):
        if pool.get("pool_name") == pool_name:
            return pool
    raise CheckError(f"pool {pool_name!r} vanished from the report")


class LatePool(Mapping[str, Any]):
    """The pool ``pool_name`` of a fresh report, read only when first looked at (the
    capacity math needs it only for settings a driver's configuration does not give)."""

    def __init__(self, drv: Any, pool_name: str) -> None:
        self._drv, self._name = drv, pool_name
        self._pool: dict[str, Any] | None = None

    def _read(self) -> dict[str, Any]:
        if self._pool is None:
            self._pool = pool_named(self._drv, self._name)
        return self._pool

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


def provisioned_gb(pool: Mapping[str, Any]) -> float:
    value = pool.get("provisioned_capacity_gb")
    if not number(value):
        raise CheckError(f"pool {pool.get('pool_name')!r} reports no numeric "
                         f"provisioned_capacity_gb ({value!r})")
    return float(value)


def total_provisioned_gb(drv: Any) -> float:
    return sum(provisioned_gb(p) for p in report_pools(drv))


def same(a: float, b: float) -> bool:
    """Equal to the report's precision (2 decimals)."""
    return abs(a - b) < 0.005
