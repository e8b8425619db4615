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
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Literal, Mapping, Sequence

from driver_kit import ConfigError
from driver_kit.compliance.checks import (BY_ID, SETUP, Check, CheckContext, CheckError,
                                          CheckFailed, CheckSkipped, ComplianceHooks,
                                          find_checks, set_up)
from driver_kit.compliance.spec import DriverSpec, LoadError, load_driver
from driver_kit.loading import import_object

__all__ = ["CheckResult", "DriverSpec", "LoadError", "RunReport", "Runner", "load_driver",
           "load_hooks", "run_checks"]

Status = Literal["passed", "failed", "skipped", "errored"]


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
        out = dict.fromkeys(("passed", "failed", "skipped", "errored"), 0)
        for r in self.results:
            out[r.status] += 1
        return out

    def by_status(self, *statuses: str) -> set[str]:
        """Ids of the results in any of ``statuses``."""
        return {r.id for r in self.results if r.status in statuses}


def _import_attr(path: str, what: str) -> Any:
    try:
        return import_object(path, what)
    except ConfigError as exc:
        raise LoadError(str(exc)) from exc


def load_hooks(path: str | None, driver_class: type | None = None) -> ComplianceHooks:
    """Hooks from ``module:attr`` (a ``ComplianceHooks`` or a callable returning one).

    Without a path, the driver module's ``COMPLIANCE_HOOKS`` is used when it has one.
    """
    if path:
        found = _import_attr(path, "hooks")
        if callable(found) and not isinstance(found, ComplianceHooks):
            found = found()
    elif driver_class is not None:
        found = getattr(sys.modules.get(driver_class.__module__), "COMPLIANCE_HOOKS", None)
        if found is None:
            return ComplianceHooks()
    else:
        return ComplianceHooks()
    if not isinstance(found, ComplianceHooks):
        raise LoadError(f"hooks {path or driver_class!r} gave {found!r}, not ComplianceHooks")
    return found


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
    rebuild the driver in child processes), or both.
    """

    def __init__(self, factory: Callable[[], Any] | None = None, *,
                 spec: DriverSpec | None = None, hooks: ComplianceHooks | None = None,
                 hooks_path: str | None = None, only: Sequence[str] | None = None,
                 timeout_s: float = 60.0) -> None:
        if factory is None and spec is None:
            raise ValueError("give a driver factory or a DriverSpec")
        if timeout_s <= 0:
            raise ValueError(f"timeout must be positive, got {timeout_s!r}")
        self.checks = find_checks(list(only or ()))
        self.timeout_s = float(timeout_s)
        self.hooks = hooks or ComplianceHooks()
        self._factory = factory
        self._spec = spec
        self._hooks_path = hooks_path
        self._prefix = f"dkc-{uuid.uuid4().hex[:6]}"
        self._counter = itertools.count(1)
        self._notes: dict[str, Any] = {}
        self._setup: CheckResult | None = None
        self._setup_driver: Any = None
        self._report_lock = threading.Lock()
        self._report_state: tuple[str, Any] | None = None
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
        if not self._hooks_path and not any(self.hooks.available().values()) \
                and hasattr(self._factory, "spec"):  # a driver named by path
            self.hooks = load_hooks(None, type(drv))
        self._setup_driver = set_up(drv)
        hooks = [k for k, v in self.hooks.available().items() if v]
        return f"{type(drv).__qualname__} set up; hooks: {', '.join(hooks) or 'none'}"

    def setup(self) -> CheckResult:
        """Load and set the driver up once; later calls return the same result."""
        if self._setup is None:
            self._setup = self._execute(SETUP, self._do_setup, cleanup=None)
        return self._setup

    # ------------------------------------------------------------ shared report
    def _shared_report(self) -> dict[str, Any]:
        with self._report_lock:
            state = self._report_state
            if state is None:
                self._report_state = ("pending", None)
        if state is None:
            try:
                report = self._setup_driver.get_volume_stats(refresh=True)
            except Exception as exc:
                self._report_state = ("error", f"get_volume_stats(refresh=True) raised "
                                               f"{_describe(exc)}")
                raise CheckError(self._report_state[1]) from None
            self._report_state = ("ok", report)
            self._notes["report"] = report
            return report
        kind, value = state
        if kind == "ok":
            return value
        if kind == "pending":
            raise CheckError("an earlier get_volume_stats(refresh=True) never returned")
        raise CheckError(value)

    def _prefetch_report(self) -> None:
        try:
            self._shared_report()
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
        else:
            ctx = CheckContext(factory=self._factory, hooks=self.hooks, spec=self._spec,
                               prefix=self._prefix, counter=self._counter,
                               deadline=time.monotonic() + self.timeout_s,
                               shared_report=self._shared_report, notes=self._notes)
            result = self._execute(check, lambda: check.run(ctx), ctx.cleanup)
        self._results[check.id] = result
        return result

    def run(self) -> RunReport:
        """Set up, run every selected check, and build the report."""
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        start = time.monotonic()
        setup = self.setup()
        if setup.status == "passed":  # the report the profile describes, taken once
            _call(self._prefetch_report, self.timeout_s, "driver-kit-report")
        results = [setup] + [self.run_one(c.id) for c in self.checks]
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
            "ratio_enforced": {"create": self._verdict("admission.create-over-cap"),
                               "extend": self._verdict("admission.extend-over-cap")},
            "parallel_safe": {"threads": self._verdict("admission.parallel-threads"),
                              "processes": self._verdict("admission.parallel-processes")},
            "out_of_band_counted": self._verdict("provisioned.counts-out-of-band"),
            "snapshots_supported": self._notes.get("snapshots_supported"),
            "snapshots_apart": self._verdict("provisioned.excludes-snapshots"),
            "snapshot_capacity_reported": self._notes.get("snapshot_capacity_reported"),
            "fail_closed": self._verdict("stats.fail-closed"),
            "stats_cached": self._verdict("stats.refresh-cached"),
            "leak_free": {"fds": self._verdict("resources.no-fd-leak"),
                          "child_processes": self._verdict("resources.no-child-leak")},
            "hooks": self.hooks.available(),
            "multi_process_spec": self._spec is not None,
        }


def run_checks(factory: Callable[[], Any] | None = None, *, spec: DriverSpec | None = None,
               hooks: ComplianceHooks | None = None, hooks_path: str | None = None,
               only: Sequence[str] | None = None, timeout_s: float = 60.0) -> RunReport:
    """Run the catalogue (or the ``only`` ids/patterns) and return the report."""
    return Runner(factory, spec=spec, hooks=hooks, hooks_path=hooks_path, only=only,
                  timeout_s=timeout_s).run()
