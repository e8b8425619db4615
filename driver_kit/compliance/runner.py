"""Runs the catalogue against a driver: one check at a time, each with a timeout.

A run first sets the driver up (import, config, construct, ``do_setup``,
``check_for_setup_error``); that step is reported as the ``driver.setup`` check.
Every catalogue check then gets fresh driver instances from the factory, runs in
a worker thread and is abandoned (reported *errored*) when it outlives the
timeout; the run goes on. Whatever a check registered for clean-up is undone
afterwards, whatever its verdict.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable, Literal, Mapping, Sequence

from driver_kit import ConfigError
from driver_kit.compliance.checks import (BY_ID, CATALOGUE, SETUP, Check, CheckContext,
                                          CheckError, CheckFailed, CheckSkipped,
                                          ComplianceHooks, find_checks, set_up)
from driver_kit.compliance.checks.tour import walk
from driver_kit.compliance.cinder_front import ADMISSION_CHECKS, CINDER_MANAGER_GUARDS
from driver_kit.compliance.hooks import REQUIRED_HOOKS, find_hooks
from driver_kit.compliance.spec import DriverSpec, LoadError, load_driver
from driver_kit.loading import import_object

__all__ = ["CheckResult", "DriverSpec", "LoadError", "RunReport", "Runner", "load_driver",
           "load_hooks", "run_checks"]

#: "delegated": the check rests on the kit's admission, which for a Cinder driver is the
#: scheduler's job (reported as "relies on the scheduler", never blocking)
Status = Literal["passed", "failed", "skipped", "errored", "delegated"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """The verdict of one check, with the reason a reader needs."""

    id: str
    title: str
    clause: str
    severity: str
    status: Status
    reason: str
    duration_s: float

    @property
    def blocking(self) -> bool:
        """A must check that did not pass (skips never block)."""
        return self.severity == "must" and self.status in ("failed", "errored")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """Every result of one run, plus the driver's capability profile."""

    driver: str
    started_at: str
    duration_s: float
    results: tuple[CheckResult, ...]
    profile: Mapping[str, Any]

    @property
    def exit_code(self) -> int:
        """0 when every must check passed or was skipped, else 1."""
        return 1 if any(r.blocking for r in self.results) else 0

    def counts(self) -> dict[str, int]:
        """Results by status ("delegated" only when a run has some)."""
        out = dict.fromkeys(("passed", "failed", "skipped", "errored"), 0)
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def by_status(self, *statuses: str) -> set[str]:
        """Ids of the results in any of ``statuses``."""
        return {r.id for r in self.results if r.status in statuses}


def _import_attr(path: str, what: str) -> Any:
    try:
        return import_object(path, what)
    except ConfigError as exc:
        raise LoadError(str(exc)) from exc


def load_hooks(path: str) -> ComplianceHooks:
    """Hooks from ``module:attr`` (a ``ComplianceHooks`` or a callable returning one)."""
    found = _import_attr(path, "hooks")
    if callable(found) and not isinstance(found, ComplianceHooks):
        found = found()
    if not isinstance(found, ComplianceHooks):
        raise LoadError(f"hooks {path!r} gave {found!r}, not ComplianceHooks")
    return found


class _Once:
    """A value computed once, in its own thread, by the first caller's request; later
    callers wait for it. Once a caller gave up waiting, the others fail at once."""

    def __init__(self, compute: Callable[[], Any], what: str) -> None:
        self._compute, self._what = compute, what
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = self._abandoned = False
        self._value: Any = None
        self._error: str | None = None

    def _run(self) -> None:
        try:
            self._value = self._compute()
        except CheckError as exc:
            self._error = str(exc)
        except Exception as exc:
            self._error = f"{self._what} failed: {_describe(exc)}"
        finally:
            self._done.set()

    def get(self, wait_s: float) -> Any:
        with self._lock:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, daemon=True,
                                 name=f"driver-kit-{self._what.split()[0]}").start()
            elif self._abandoned and not self._done.is_set():
                raise CheckError(f"an earlier {self._what} never finished")
        if not self._done.wait(wait_s):
            self._abandoned = True
            raise CheckError(f"{self._what} did not finish within {wait_s:.3g} s")
        if self._error is not None:
            raise CheckError(self._error)
        return self._value


def _call(fn: Callable[[], Any], timeout_s: float,
          name: str) -> tuple[bool, Any, BaseException | None]:
    """Run ``fn`` in a daemon thread: (finished, value, exception)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller
            box["exc"] = exc

    thread = threading.Thread(target=target, daemon=True, name=name)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return False, None, None
    return True, box.get("value"), box.get("exc")


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"
    return text


class Runner:
    """Runs checks against one driver; ``run()`` for all, ``run_one(id)`` for a front end.

    Give a ``factory`` (a callable returning a fresh driver, not yet set up) or a
    ``spec`` (module:Class + config, which also lets the multi-process check
    rebuild the driver in child processes), or both. Without ``hooks`` or
    ``hooks_path`` the driver's own are used (``hooks.find_hooks``); with
    ``discover_hooks`` they are used too, under the hooks given. ``scale`` is
    how many volumes the tour makes in a pool (more than 60 shows a listing read
    only to its first page of 50).
    """

    def __init__(self, factory: Callable[[], Any] | None = None, *,
                 spec: DriverSpec | None = None, hooks: ComplianceHooks | None = None,
                 hooks_path: str | None = None, only: Sequence[str] | None = None,
                 timeout_s: float = 60.0, scale: int = 64,
                 discover_hooks: bool | None = None) -> None:
        if factory is None and spec is None:
            raise ValueError("give a driver factory or a DriverSpec")
        if timeout_s <= 0:
            raise ValueError(f"timeout must be positive, got {timeout_s!r}")
        if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
            raise ValueError(f"scale must be a whole number of volumes >= 1, got {scale!r}")
        self.checks = find_checks(list(only or ()))
        self.timeout_s = float(timeout_s)
        self.scale = scale
        self.hooks = hooks or ComplianceHooks()
        self._discover = discover_hooks if discover_hooks is not None \
            else hooks is None and hooks_path is None
        self._hooks_origin: dict[str, str] = {}
        self._bad_hooks: dict[str, str] = {}
        self._factory = factory
        self._spec = spec
        self._hooks_path = hooks_path
        self._prefix = f"dkc-{uuid.uuid4().hex[:6]}"
        self._counter = itertools.count(1)
        self._notes: dict[str, Any] = {}
        self._setup: CheckResult | None = None
        self._setup_driver: Any = None
        self._report = _Once(self._first_report, "get_volume_stats(refresh=True)")
        self._tour = _Once(self._walk, "tour of the pools")
        self._results: dict[str, CheckResult] = {}
        self.description = spec.describe() if spec else getattr(
            factory, "__qualname__", repr(factory))

    # ------------------------------------------------------------ setup
    def _do_setup(self) -> str:
        if self._factory is None:
            self._factory = load_driver(self._spec)
        if self._hooks_path:
            self.hooks = load_hooks(self._hooks_path)
        drv = self._factory()
        if not callable(getattr(drv, "get_volume_stats", None)):
            raise CheckFailed(f"the factory made {type(drv).__module__}."
                              f"{type(drv).__qualname__}, which has no get_volume_stats(): "
                              f"not a driver")
        if self._discover:
            found, origin = find_hooks(type(drv))
            given = {name for name, present in self.hooks.available().items() if present}
            self._hooks_origin = {k: v for k, v in origin.items() if k not in given}
            self.hooks = self.hooks.merged(found)
        # a hook the harness cannot call is reported by hooks.required, and the checks
        # needing it skip as they do without it
        self._bad_hooks = self.hooks.bad_signatures()
        self._notes["bad_hooks"] = self._bad_hooks
        self.hooks = replace(self.hooks, **dict.fromkeys(self._bad_hooks))
        self._setup_driver = set_up(drv)
        hooks = [k for k, v in self.hooks.available().items() if v]
        return f"{type(drv).__qualname__} set up; hooks: {', '.join(hooks) or 'none'}"

    def setup(self) -> CheckResult:
        """Load and set the driver up once; later calls return the same result."""
        if self._setup is None:
            self._setup = self._execute(SETUP, self._do_setup, cleanup=None)
        return self._setup

    # ------------------------------------------------------------ shared by the checks
    def _first_report(self) -> dict[str, Any]:
        try:
            report = self._setup_driver.get_volume_stats(refresh=True)
        except Exception as exc:
            raise CheckError(f"get_volume_stats(refresh=True) raised {_describe(exc)}") \
                from None
        self._notes["report"] = report
        return report

    def _context(self, timeout_s: float) -> CheckContext:
        shared: dict[str, Callable[[], Any]] = {}
        ctx = CheckContext(factory=self._factory, hooks=self.hooks, spec=self._spec,
                           prefix=self._prefix, counter=self._counter,
                           deadline=time.monotonic() + timeout_s, notes=self._notes,
                           shared=shared, scale=self.scale, build=load_driver)
        shared.update(report=lambda: self._report.get(ctx.remaining_s()),
                      tour=lambda: self._tour.get(ctx.remaining_s()))
        return ctx

    def _walk(self) -> Any:
        ctx = self._context(self.timeout_s)
        try:
            tour = walk(ctx)
        finally:
            problems = ctx.cleanup()
        if problems:
            tour.notes.extend(problems)
        return tour

    def _prefetch_report(self) -> None:
        try:
            self._report.get(self.timeout_s)
        except CheckError:
            pass  # the report checks say why

    # ------------------------------------------------------------ running
    def _execute(self, check: Check, fn: Callable[[], Any],
                 cleanup: Callable[[], list[str]] | None) -> CheckResult:
        start = time.monotonic()
        finished, value, exc = _call(fn, self.timeout_s, f"driver-kit-{check.id}")
        if not finished:
            status, reason = "errored", (f"did not finish within {self.timeout_s:g} s (the "
                                         f"driver hung?); abandoned, the run goes on")
        elif exc is None:
            status, reason = "passed", str(value or "")
        elif isinstance(exc, CheckFailed):
            status, reason = "failed", str(exc)
        elif isinstance(exc, CheckSkipped):
            status, reason = "skipped", str(exc)
        elif isinstance(exc, CheckError):
            status, reason = "errored", str(exc)
        elif check is SETUP:  # whatever stops the driver from setting up fails it
            status, reason = "failed", str(exc) if isinstance(exc, LoadError) \
                else _describe(exc)
        else:
            status, reason = "errored", _describe(exc)
        if cleanup is not None:
            done, problems, cexc = _call(cleanup, min(self.timeout_s, 30.0),
                                         f"driver-kit-cleanup-{check.id}")
            if not done:
                reason += " [clean-up did not finish]"
            elif cexc is not None or problems:
                reason += " [clean-up: " + "; ".join(
                    problems or [_describe(cexc)]) + "]"
        return CheckResult(id=check.id, title=check.title, clause=check.clause,
                           severity=check.severity, status=status, reason=reason.strip(),
                           duration_s=round(time.monotonic() - start, 3))

    def run_one(self, check_id: str) -> CheckResult:
        """Run one catalogue check (setting the driver up first if needed)."""
        check = BY_ID.get(check_id)
        if check is None:
            raise ValueError(f"unknown check {check_id!r}")
        setup = self.setup()
        if setup.status != "passed":
            result = CheckResult(id=check.id, title=check.title, clause=check.clause,
                                 severity=check.severity, status="errored",
                                 reason=f"not run: driver.setup {setup.status}: "
                                        f"{setup.reason}", duration_s=0.0)
        elif (why_not := self._not_for_cinder(check)) is not None:
            status, reason = why_not
            result = CheckResult(id=check.id, title=check.title, clause=check.clause,
                                 severity=check.severity, status=status, reason=reason,
                                 duration_s=0.0)
        elif missing := self.hooks.missing(check.hooks):
            wrong = [name for name in missing if name in self._bad_hooks]
            why = "whose signature is wrong" if wrong == missing else \
                "which the driver does not give" if not wrong else \
                "which the driver does not give or gives with a wrong signature"
            result = CheckResult(id=check.id, title=check.title, clause=check.clause,
                                 severity=check.severity, status="skipped",
                                 reason=f"needs the {', '.join(missing)} hook"
                                        f"{'s' if len(missing) > 1 else ''}, {why} (see "
                                        f"hooks.required)", duration_s=0.0)
        else:
            ctx = self._context(self.timeout_s)
            result = self._execute(check, lambda: check.run(ctx), ctx.cleanup)
        self._results[check.id] = result
        return result

    def _not_for_cinder(self, check: Check) -> tuple[Status, str] | None:
        """For a Cinder driver: the verdict of a check that does not apply to one."""
        if self._spec is None or not self._spec.cinder_driver:
            return None
        if check.id in ADMISSION_CHECKS:
            return "delegated", ("relies on the scheduler: for a Cinder driver, enforcing "
                                 "the cap is Cinder's scheduler's job (its CapacityFilter), "
                                 "not the driver's")
        if check.id in CINDER_MANAGER_GUARDS:
            return "skipped", f"not for a Cinder driver: {CINDER_MANAGER_GUARDS[check.id]}"
        return None

    def run(self, on_result: Callable[[CheckResult], None] | None = None) -> RunReport:
        """Set up, run every selected check, and build the report; ``on_result`` hears of
        each result as it comes (``driver.setup`` first), e.g. to show progress."""
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        start = time.monotonic()
        heard = on_result or (lambda result: None)
        setup = self.setup()
        heard(setup)
        if setup.status == "passed":  # the report the profile describes, taken once
            self._prefetch_report()
        results = [setup]
        for check in self.checks:
            results.append(self.run_one(check.id))
            heard(results[-1])
        return RunReport(driver=self.description, started_at=started,
                         duration_s=round(time.monotonic() - start, 3),
                         results=tuple(results), profile=self.profile())

    # ------------------------------------------------------------ profile
    def _verdict(self, check_id: str) -> bool | None:
        result = self._results.get(check_id)
        if result is None or result.status not in ("passed", "failed"):
            return None
        return result.status == "passed"

    def profile(self) -> dict[str, Any]:
        """What the run found the driver can do (None: not known from this run)."""
        report = self._notes.get("report")
        pools = report.get("pools") if isinstance(report, dict) else None
        pools = [p for p in pools if isinstance(p, dict)] if isinstance(pools, list) else []

        def any_pool(key: str) -> bool | None:
            return any(p.get(key) is True for p in pools) if pools else None
        return {
            "driver": self.description,
            "pools": [{k: p.get(k) for k in (
                "pool_name", "backend_state", "thin_provisioning_support",
                "thick_provisioning_support", "max_over_subscription_ratio",
                "reserved_percentage", "total_capacity_gb")} for p in pools],
            "thin_provisioning": any_pool("thin_provisioning_support"),
            "thick_provisioning": any_pool("thick_provisioning_support"),
            "ratio_enforced": {op: self._verdict(f"admission.{op}-over-cap")
                               for op in ("create", "extend", "snapshot", "copy")},
            "cap_holds_when_filled": self._verdict("admission.fill-to-cap"),
            "parallel_safe": {"threads": self._verdict("admission.parallel-threads"),
                              "processes": self._verdict("admission.parallel-processes")},
            "agrees_with_backend": {c.id.split(".", 1)[1]: self._verdict(c.id)
                                    for c in CATALOGUE if c.id.startswith("truth.")},
            "out_of_band_counted": self._verdict("provisioned.counts-out-of-band"),
            "snapshots_supported": self._notes.get("snapshots_supported"),
            "snapshots_apart": self._verdict("provisioned.excludes-snapshots"),
            "snapshot_capacity_reported": self._notes.get("snapshot_capacity_reported"),
            "fail_closed": {c.id.split(".", 1)[1]: self._verdict(c.id)
                            for c in CATALOGUE if c.id.startswith("failclosed.")},
            "stats_cached": self._verdict("stats.refresh-cached"),
            "leak_free": {"fds": self._verdict("resources.no-fd-leak"),
                          "child_processes": self._verdict("resources.no-child-leak")},
            "hooks": self.hook_profile(),
            "multi_process_spec": self._spec is not None,
        }


    def hook_profile(self) -> dict[str, dict[str, Any]]:
        """Each hook: present, required, where it was found, and the checks it enables."""
        return {name: {"present": present, "required": name in REQUIRED_HOOKS,
                       "found_in": self._hooks_origin.get(name, "given to the run")
                       if present else None,
                       "enables": [c.id for c in CATALOGUE
                                   if name in c.hooks + c.optional_hooks]}
                for name, present in self.hooks.available().items()}


def run_checks(factory: Callable[[], Any] | None = None, *, spec: DriverSpec | None = None,
               hooks: ComplianceHooks | None = None, hooks_path: str | None = None,
               only: Sequence[str] | None = None, timeout_s: float = 60.0,
               scale: int = 64) -> RunReport:
    """Run the catalogue (or the ``only`` ids/patterns) and return the report."""
    return Runner(factory, spec=spec, hooks=hooks, hooks_path=hooks_path, only=only,
                  timeout_s=timeout_s, scale=scale).run()
