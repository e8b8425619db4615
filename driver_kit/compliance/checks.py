"""The catalogue: every compliance check with its id, title, spec clause and severity.

Two kinds. *Report* checks judge one ``get_volume_stats(refresh=True)`` dict and
reuse ``driver_kit.validate_stats`` (each maps to its violation ids; the rules
live in one place). *Behaviour* checks drive a live driver through the kit's
operations API (create, extend, snapshot, delete) and read the effect back from
its reports. A check raises ``CheckFailed``, ``CheckSkipped`` or ``CheckError``;
returning means it passed (a returned string is a note for the result).

Every volume a check creates is named with the run's prefix and registered for
clean-up *before* the create is attempted, so the runner can remove it even when
the check fails, raises or hangs.
"""

from __future__ import annotations

import fnmatch
import gc
import itertools
import logging
import math
import multiprocessing
import queue
import threading
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Literal, Mapping

import psutil

from driver_kit import (AlreadyExists, CapacityExceeded, InvalidInput, InvalidSize,
                        calculate_virtual_free_capacity, validate_stats)
from driver_kit.stats import is_number

__all__ = ["BY_ID", "CATALOGUE", "SETUP", "Check", "CheckContext", "CheckError", "CheckFailed",
           "CheckSkipped", "ComplianceHooks", "find_checks", "set_up"]

Severity = Literal["must", "should"]

_KILO = "specs/000 Kilo over-subscription"
_QUEENS = "specs/001 Queens provisioning improvements"
_ZED = "specs/002 Zed capacity factors"
_PLACEMENT = "specs/003 Nova count usage from placement"


class CheckFailed(Exception):
    """The driver breaks the rule; the message says how."""


class CheckSkipped(Exception):
    """The check cannot apply to this driver; the message says why."""


class CheckError(Exception):
    """The check could not reach a verdict (the driver misbehaved in another way)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ComplianceHooks:
    """Optional vendor hooks; a check that needs an absent hook is skipped, saying so.

    Each hook gets the live driver instance the check is using.
    """

    #: create a ``size_gb`` GiB volume on the backend *without* the driver (out of band)
    create_out_of_band: Callable[[Any, str, int], None] | None = None
    #: delete what ``create_out_of_band`` made (default: ``driver.delete_volume(name)``)
    delete_out_of_band: Callable[[Any, str], None] | None = None
    #: make the backend unreadable for this driver (array unplugged, directory gone)
    break_backend: Callable[[Any], None] | None = None
    #: undo ``break_backend``
    repair_backend: Callable[[Any], None] | None = None

    def available(self) -> dict[str, bool]:
        """Which hooks are set (for the capability profile)."""
        return {f.name: getattr(self, f.name) is not None for f in fields(self)}


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


# ---------------------------------------------------------------- report helpers

def _number(value: Any) -> bool:
    return is_number(value) and math.isfinite(value)


def _pools(drv: Any) -> list[dict[str, Any]]:
    report = drv.get_volume_stats(refresh=True)
    pools = report.get("pools") if isinstance(report, dict) else None
    if not isinstance(pools, list) or not pools or \
            not all(isinstance(p, dict) for p in pools):
        raise CheckError("get_volume_stats(refresh=True) returned no usable pools")
    return pools


def _target_pool(drv: Any) -> dict[str, Any]:
    """The pool a default create lands on: the first up thin pool, else the first up pool."""
    pools = _pools(drv)
    up = [p for p in pools if p.get("backend_state", "up") == "up"]
    if not up:
        reasons = "; ".join(str(p.get("down_reason", "no reason given")) for p in pools)
        raise CheckError(f"no pool is up on a freshly set-up driver: {reasons}")
    return ([p for p in up if p.get("thin_provisioning_support") is True] or up)[0]


def _pool(drv: Any, pool_name: str) -> dict[str, Any]:
    for pool in _pools(drv):
        if pool.get("pool_name") == pool_name:
            return pool
    raise CheckError(f"pool {pool_name!r} vanished from the report")


def _provisioned(pool: Mapping[str, Any]) -> float:
    value = pool.get("provisioned_capacity_gb")
    if not _number(value):
        raise CheckError(f"pool {pool.get('pool_name')!r} reports no numeric "
                         f"provisioned_capacity_gb ({value!r})")
    return float(value)


def _total_provisioned(drv: Any) -> float:
    return sum(_provisioned(p) for p in _pools(drv))


def _cumulative_room_gb(pool: Mapping[str, Any]) -> int:
    """Whole GiB all new volumes together may take: the report's virtual free capacity.

    Taken from the pool's capacity factors, or computed from its numbers with the
    kit's public Cinder-exact function when it reports none.
    """
    thin = pool.get("thin_provisioning_support") is True
    kind = "thin" if thin else "thick"
    for factors in pool.get("capacity_factors") or ():
        if isinstance(factors, dict) and factors.get("provisioned_type") == kind \
                and _number(factors.get("virtual_free_capacity")):
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


def _room_gb(pool: Mapping[str, Any]) -> int:
    """The largest single volume the report says fits now (``max_volume_size_gb``)."""
    largest = pool.get("max_volume_size_gb")
    if isinstance(largest, int) and not isinstance(largest, bool) and largest >= 0:
        return largest
    return _cumulative_room_gb(pool)


def _same(a: float, b: float) -> bool:
    return abs(a - b) < 0.005


# ---------------------------------------------------------------- report checks

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
    _make_out_of_band(ctx, drv, 1)
    if drv.get_volume_stats(refresh=False) != first:
        raise CheckFailed("get_volume_stats(refresh=False) saw a change made on the "
                          "backend; it must serve the cached report")
    return "the cached report, unchanged by a volume made out of band"


# ---------------------------------------------------------------- behaviour checks

def _check_provisioned_tracks(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool = _target_pool(drv)
    name_ = pool["pool_name"]
    size = min(2, _room_gb(pool))
    if size < 1:
        raise CheckError(f"pool {name_!r} has no room for a 1 GiB volume")
    before = _provisioned(pool)
    volume = ctx.create(drv, size, name_)
    after = _provisioned(_pool(drv, name_))
    if not _same(after - before, size):
        raise CheckFailed(f"provisioned_capacity_gb went {before} -> {after} after creating "
                          f"a {size} GiB volume; it must rise by exactly {size}")
    ctx.delete(drv, volume)
    final = _provisioned(_pool(drv, name_))
    if not _same(final, before):
        raise CheckFailed(f"provisioned_capacity_gb is {final} after deleting the {size} GiB "
                          f"volume; it must fall back to {before}")
    return f"{before} -> {after} -> {final} GiB"


def _check_snapshots_apart(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool = _target_pool(drv)
    name_ = pool["pool_name"]
    volume = ctx.create(drv, 1, name_)
    with_volume = _pool(drv, name_)
    snap = ctx.name("snap")
    ctx.defer(("snapshot", snap), f"snapshot {snap}", lambda: drv.delete_snapshot(snap))
    try:
        drv.create_snapshot(snap, volume)
    except NotImplementedError as exc:
        ctx.done(("snapshot", snap))
        ctx.notes["snapshots_supported"] = False
        raise CheckSkipped(f"the driver does not support snapshots ({exc})") from None
    ctx.notes["snapshots_supported"] = True
    with_snapshot = _pool(drv, name_)
    before, after = _provisioned(with_volume), _provisioned(with_snapshot)
    if not _same(before, after):
        raise CheckFailed(f"provisioned_capacity_gb went {before} -> {after} when a snapshot "
                          f"of a 1 GiB volume was taken; snapshots must not count")
    snap_before = with_volume.get("snapshot_capacity_gb")
    snap_after = with_snapshot.get("snapshot_capacity_gb")
    ctx.notes["snapshot_capacity_reported"] = (
        _number(snap_before) and _number(snap_after) and snap_after > snap_before)
    drv.delete_snapshot(snap)
    ctx.done(("snapshot", snap))
    return f"provisioned stayed {after} GiB; snapshot_capacity_gb {snap_before} -> {snap_after}"


def _make_out_of_band(ctx: CheckContext, drv: Any, size_gb: int) -> str:
    hooks = ctx.hooks
    name = ctx.name("oob")
    undo = (lambda: hooks.delete_out_of_band(drv, name)) if hooks.delete_out_of_band \
        else (lambda: drv.delete_volume(name))
    ctx.defer(("oob", name), f"out-of-band volume {name}", undo)
    hooks.create_out_of_band(drv, name, size_gb)
    return name


def _check_out_of_band(ctx: CheckContext) -> str:
    if ctx.hooks.create_out_of_band is None:
        raise CheckSkipped("no create_out_of_band hook: give ComplianceHooks("
                           "create_out_of_band=...) to show volumes made outside the "
                           "driver are counted")
    drv = ctx.driver()
    before = _total_provisioned(drv)
    _make_out_of_band(ctx, drv, 2)
    after = _total_provisioned(drv)
    if not _same(after - before, 2):
        raise CheckFailed(f"provisioned_capacity_gb went {before} -> {after} after a 2 GiB "
                          f"volume appeared on the backend outside the driver; it must "
                          f"count every volume on the pool")
    return f"{before} -> {after} GiB"


def _refusal(ctx: CheckContext, drv: Any, before: Mapping[str, Any], what: str,
             attempt: Callable[[], Any], expected: type[Exception], rule: str, *,
             probe: str | None = None) -> str:
    """``attempt`` must raise ``expected`` and leave the pool ``before`` describes as it was.

    ``what`` names the attempt in the verdict, ``rule`` says what it must do; a
    ``probe`` volume it would have made is no longer tracked once it is refused.
    """
    try:
        attempt()
    except expected:
        if probe is not None:
            ctx.done(("volume", probe))  # refused: there is nothing to delete
    except Exception as exc:
        raise CheckFailed(f"{what} raised {type(exc).__name__}: {exc}; {rule}") from None
    else:
        raise CheckFailed(f"{what} succeeded; {rule}")
    after = _pool(drv, before["pool_name"])
    changed = [k for k in ("provisioned_capacity_gb", "total_volumes")
               if before.get(k) != after.get(k)]
    if changed:
        raise CheckFailed(f"{what} was refused but changed the pool: " + ", ".join(
            f"{k} {before.get(k)} -> {after.get(k)}" for k in changed))
    return f"{what}: {expected.__name__}, nothing changed"


_OVER_CAP = "it must be refused with driver_kit.CapacityExceeded and the breakdown"


def _check_create_over_cap(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool = _target_pool(drv)
    room = _room_gb(pool)
    name = ctx.name("over")
    ctx.track_volume(drv, name)
    return _refusal(ctx, drv, pool, f"a create of {room + 1} GiB, past the over-subscription "
                    f"cap (max_volume_size_gb {room})",
                    lambda: drv.create_volume(name, room + 1, pool_name=pool["pool_name"]),
                    CapacityExceeded, _OVER_CAP, probe=name)


def _check_extend_over_cap(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool_name = _target_pool(drv)["pool_name"]
    volume = ctx.create(drv, 1, pool_name)
    pool = _pool(drv, pool_name)
    room = _room_gb(pool)
    return _refusal(ctx, drv, pool, f"an extend of a 1 GiB volume to {room + 2} GiB, past "
                    f"the over-subscription cap (max_volume_size_gb {room})",
                    lambda: drv.extend_volume(volume, room + 2), CapacityExceeded, _OVER_CAP)


def _race_size(pool: Mapping[str, Any], workers: int) -> tuple[int, int]:
    """A size such that ``workers`` creates cannot all fit but at least one can."""
    largest, room = _room_gb(pool), _cumulative_room_gb(pool)
    if largest < 1 or room < 1:
        raise CheckSkipped(f"pool {pool.get('pool_name')!r} has no room left to race for")
    size = min(largest, room // (workers // 2) + 1)
    if size * workers <= room:
        raise CheckSkipped(f"{workers} creates of the largest admissible size ({size} GiB) "
                           f"all fit in {room} GiB: cannot provoke a race")
    return size, room


def _judge_race(ctx: CheckContext, drv: Any, pool_name: str, before: float, size: int,
                room: int, names: list[str], outcomes: list[str | None], workers: str) -> str:
    for name, outcome in zip(names, outcomes):
        if outcome == "refused":
            ctx.done(("volume", name))  # nothing to delete
    admitted = outcomes.count("admitted")
    others = sorted({o for o in outcomes if o not in ("admitted", "refused")}, key=str)
    after = _provisioned(_pool(drv, pool_name))
    summary = (f"{len(outcomes)} {workers} each created {size} GiB with room for {room} "
               f"GiB: {admitted} admitted")
    if admitted * size > room:
        raise CheckFailed(f"{summary} = {admitted * size} GiB, past the cap by "
                          f"{admitted * size - room} GiB")
    if after - before > room + 0.005:
        raise CheckFailed(f"{summary}, but provisioned_capacity_gb rose {before} -> {after}, "
                          f"past the cap")
    if admitted == 0:
        raise CheckFailed(f"{summary}: every create was refused though a {size} GiB volume "
                          f"fit" + (f" ({'; '.join(map(str, others))})" if others else ""))
    return summary


def _check_parallel_threads(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool = _target_pool(drv)
    workers = 8
    size, room = _race_size(pool, workers)
    names = [ctx.name("race") for _ in range(workers)]
    for name in names:
        ctx.track_volume(drv, name)
    outcomes: list[str | None] = [None] * workers
    barrier = threading.Barrier(workers)

    def create(index: int) -> None:
        try:
            barrier.wait(ctx.remaining_s())
        except threading.BrokenBarrierError:
            pass
        try:
            drv.create_volume(names[index], size, pool_name=pool["pool_name"])
            outcomes[index] = "admitted"
        except CapacityExceeded:
            outcomes[index] = "refused"
        except Exception as exc:  # any refusal counts; the cap is what is judged
            outcomes[index] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=create, args=(i,), daemon=True,
                                name=f"driver-kit-race-{i}") for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(ctx.remaining_s())
    if any(t.is_alive() for t in threads):
        raise CheckError("parallel creates did not finish in time")
    return _judge_race(ctx, drv, pool["pool_name"], _provisioned(pool), size, room, names,
                       outcomes, "threads")


def _create_in_process(spec: Any, name: str, size_gb: int, pool_name: str, barrier: Any,
                       results: Any, index: int, timeout_s: float) -> None:
    """Child process body: rebuild the driver from its spec, wait for the others, create."""
    logging.getLogger().addHandler(logging.NullHandler())  # refusals are expected here
    try:
        from driver_kit.compliance.runner import load_driver
        drv = set_up(load_driver(spec)())
        try:
            barrier.wait(timeout_s)
        except threading.BrokenBarrierError:
            pass
        try:
            drv.create_volume(name, size_gb, pool_name=pool_name)
            outcome = "admitted"
        except CapacityExceeded:
            outcome = "refused"
    except BaseException as exc:  # reported to the parent, never raised in a child
        outcome = f"{type(exc).__name__}: {exc}"
    results.put((index, outcome))


def _check_parallel_processes(ctx: CheckContext) -> str:
    if ctx.spec is None:
        raise CheckSkipped("no importable driver spec (module:Class + config file): child "
                           "processes cannot rebuild the driver")
    drv = ctx.driver()
    pool = _target_pool(drv)
    workers = 4
    size, room = _race_size(pool, workers)
    names = [ctx.name("proc") for _ in range(workers)]
    for name in names:
        ctx.track_volume(drv, name)
    mp = multiprocessing.get_context("spawn")
    barrier, results = mp.Barrier(workers), mp.Queue()
    outcomes: list[str | None] = [None] * workers
    procs = [mp.Process(target=_create_in_process, daemon=True, name=f"driver-kit-proc-{i}",
                        args=(ctx.spec, names[i], size, pool["pool_name"], barrier, results,
                              i, ctx.remaining_s() / 2)) for i in range(workers)]
    try:
        for proc in procs:
            proc.start()
        for _ in procs:
            index, outcome = results.get(timeout=ctx.remaining_s())
            outcomes[index] = outcome
    except queue.Empty:
        raise CheckError(f"only {workers - outcomes.count(None)} of {workers} processes "
                         f"reported in time") from None
    finally:
        for proc in procs:
            if proc.pid is not None:
                proc.join(2.0)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
            proc.close()
        results.close()
        results.join_thread()
    return _judge_race(ctx, drv, pool["pool_name"], _provisioned(pool), size, room, names,
                       outcomes, "processes")


def _check_create_existing(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool_name = _target_pool(drv)["pool_name"]
    volume = ctx.create(drv, 1, pool_name)
    return _refusal(ctx, drv, _pool(drv, pool_name),
                    f"a second create of the existing volume {volume!r}",
                    lambda: drv.create_volume(volume, 2, pool_name=pool_name), AlreadyExists,
                    "documented: it raises driver_kit.AlreadyExists and changes nothing")


def _check_delete_missing(ctx: CheckContext) -> str:
    drv = ctx.driver()
    before = _total_provisioned(drv)
    ghost = ctx.name("ghost")
    try:
        drv.delete_volume(ghost)
    except Exception as exc:
        raise CheckFailed(f"deleting the missing volume {ghost!r} raised "
                          f"{type(exc).__name__}: {exc}; documented: it succeeds "
                          f"(idempotent)") from None
    after = _total_provisioned(drv)
    if not _same(before, after):
        raise CheckFailed(f"deleting a missing volume changed provisioned_capacity_gb "
                          f"{before} -> {after}")
    return "succeeded, nothing changed"


def _check_extend_smaller(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool = _target_pool(drv)
    if _room_gb(pool) < 2:
        raise CheckError(f"pool {pool['pool_name']!r} has no room for a 2 GiB volume")
    volume = ctx.create(drv, 2, pool["pool_name"])
    return _refusal(ctx, drv, _pool(drv, pool["pool_name"]),
                    "an extend of a 2 GiB volume to 1 GiB",
                    lambda: drv.extend_volume(volume, 1), InvalidSize,
                    "documented: it raises driver_kit.InvalidSize and changes nothing")


_CYCLES = 2


def _exercise(ctx: CheckContext, drv: Any, pool_name: str) -> Callable[[], None]:
    """One round of every operation, within 2 GiB of room (snapshots are admitted for
    their volume's size); the first round finds out whether snapshots work."""
    snapshots: list[bool] = []

    def cycle() -> None:
        volume = ctx.create(drv, 1, pool_name, tag="cyc")
        drv.get_volume_stats(refresh=True)
        if not snapshots or snapshots[0]:
            snap = ctx.name("cycsnap")
            ctx.defer(("snapshot", snap), f"snapshot {snap}", lambda: drv.delete_snapshot(snap))
            try:
                drv.create_snapshot(snap, volume)
                snapshots[:] = [True]
                drv.delete_snapshot(snap)
            except NotImplementedError:
                snapshots[:] = [False]
            ctx.done(("snapshot", snap))
        drv.extend_volume(volume, 2)
        ctx.delete(drv, volume)
        drv.get_volume_stats(refresh=True)
    return cycle


def _check_no_fd_leak(ctx: CheckContext) -> str:
    drv = ctx.driver()
    cycle = _exercise(ctx, drv, _target_pool(drv)["pool_name"])
    me = psutil.Process()
    cycle()  # warm-up: lazy imports, caches, lock files
    gc.collect()
    before, paths = me.num_fds(), {f.path for f in me.open_files()}
    for _ in range(_CYCLES):
        cycle()
    gc.collect()
    after = me.num_fds()
    if after > before:
        new = sorted({f.path for f in me.open_files()} - paths)
        raise CheckFailed(f"{after - before} file descriptors leaked over {_CYCLES} rounds "
                          f"of create/stats/snapshot/extend/delete"
                          + (f" (new open files: {', '.join(new[:5])})" if new else ""))
    return f"{before} open file descriptors before and after {_CYCLES} rounds"


def _live_children(me: psutil.Process, known: set[int]) -> list[str]:
    found = []
    for child in me.children(recursive=True):
        if child.pid in known:
            continue
        try:
            found.append(f"pid {child.pid} ({' '.join(child.cmdline()[:3]) or child.name()}, "
                         f"{child.status()})")
        except psutil.Error:
            continue  # it exited while we looked
    return found


def _check_no_child_leak(ctx: CheckContext) -> str:
    drv = ctx.driver()
    cycle = _exercise(ctx, drv, _target_pool(drv)["pool_name"])
    me = psutil.Process()
    cycle()
    known = {p.pid for p in me.children(recursive=True)}
    for _ in range(_CYCLES):
        cycle()
    deadline = time.monotonic() + 1.0
    while (leaked := _live_children(me, known)) and time.monotonic() < deadline:
        time.sleep(0.05)  # give commands that are exiting a moment to be reaped
    if leaked:
        raise CheckFailed(f"{len(leaked)} child processes outlived the operations that "
                          f"started them: {'; '.join(leaked[:5])}")
    return f"no child process left after {_CYCLES} rounds"


def _check_fail_closed(ctx: CheckContext) -> str:
    hooks = ctx.hooks
    if hooks.break_backend is None:
        raise CheckSkipped("no break_backend hook: give ComplianceHooks(break_backend=..., "
                           "repair_backend=...) to show the stats fail closed")
    drv = ctx.driver()
    _target_pool(drv)
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
    if not any(p.get("backend_state", "up") == "up" for p in _pools(drv)):
        raise CheckFailed("after repair_backend the pools stay down")
    return "pools down with no free capacity, creates refused, back up after repair"


# ---------------------------------------------------------------- the catalogue

SETUP = Check(
    id="driver.setup", title="The driver loads, is a driver_kit VolumeDriver and sets up",
    clause="harness: the volume manager's lifecycle (construct, do_setup, "
           "check_for_setup_error)", severity="must", kind="setup")


def _report(id_: str, title: str, clause: str, *violations: str) -> Check:
    return Check(id=id_, title=title, clause=clause, severity="must", kind="report",
                 run=_report_check(violations), violation_ids=violations)


def _behaviour(id_: str, title: str, clause: str, run: Callable[[CheckContext], Any],
               severity: Severity = "must") -> Check:
    return Check(id=id_, title=title, clause=clause, severity=severity, kind="behaviour",
                 run=run)


CATALOGUE: tuple[Check, ...] = (
    _report("stats.required-fields", "Required fields present with the right types",
            f"{_QUEENS}, Terminology: each pool reports total, free and provisioned "
            f"capacity, reserved_percentage, ratio and provisioning support",
            "required-field", "field-type"),
    _report("stats.gib-2-decimals", "Capacities in GiB with at most 2 decimals",
            f"{_QUEENS}, Terminology (GB, Total capacity): 'reported in GB and with a "
            f"precision no greater than 2 decimals'", "gib-2-decimals"),
    _report("stats.no-infinite-unknown", "No 'infinite' or 'unknown' capacity",
            f"{_KILO}, Problem description: 'infinite' and 'unknown' 'could lead to over "
            f"provisioning'", "no-infinite-unknown"),
    _report("stats.no-allocated-capacity", "No driver-reported allocated_capacity_gb",
            f"{_QUEENS}, Allocated capacity: 'drivers should not calculate or report this "
            f"information on their get_volume_stats method'", "no-allocated-capacity"),
    _report("stats.free-le-total", "Free capacity never exceeds total capacity",
            f"{_QUEENS}, Free capacity: the physical capacity still available in the pool "
            f"(a part of total)", "free-le-total"),
    _report("stats.non-negative", "No negative capacity",
            f"{_QUEENS}, Terminology: capacities are amounts of space", "non-negative"),
    _report("stats.ratio-ge-1", "max_over_subscription_ratio is a number >= 1.0",
            f"{_QUEENS}, Over subscription ratio: 'with a greater or equal value to 1.0'; "
            f"{_KILO}, Terminology", "ratio-ge-1"),
    _report("stats.reserved-range", "reserved_percentage is within 0..100",
            f"{_QUEENS}, Reserved percentage: 'an integer value going from 0 up to 100'",
            "reserved-range"),
    _report("stats.provisioned-present", "provisioned_capacity_gb always present",
            f"{_QUEENS}, Provisioned capacity: 'This is a required field and must always "
            f"be present'", "provisioned-present"),
    _report("stats.provisioning-support-declared", "Thin and/or thick support declared",
            f"{_QUEENS}, Provisioning support: drivers 'indicate as capable of one of them "
            f"at least'; {_KILO}, Capabilities", "provisioning-support-declared"),
    _report("stats.capacity-factors-consistent",
            "Capacity factors agree with the reported numbers",
            f"{_ZED}, Proposed change: the dictionary calculate_capacity_factors() creates, "
            f"one per supported provisioning type", "capacity-factors-consistent"),
    Check(id="stats.refresh-cached", title="get_volume_stats(refresh=False) is served "
          "from the cache", clause="Cinder driver interface: get_volume_stats(refresh) "
          "updates only when refresh is True (the volume manager refreshes periodically)",
          severity="should", kind="report", run=_check_refresh_cached),
    _behaviour("provisioned.create-delete",
               "Provisioned rises by exactly the size on create and falls back on delete",
               f"{_QUEENS}, Provisioned capacity: the capacity used 'if all the volumes "
               f"present in there were completely full'", _check_provisioned_tracks),
    _behaviour("provisioned.excludes-snapshots", "A snapshot does not change provisioned",
               f"{_QUEENS}, Provisioned capacity: '*does not include snapshots*'",
               _check_snapshots_apart),
    _behaviour("provisioned.counts-out-of-band",
               "A volume created outside the driver is counted",
               f"{_KILO}, Terminology (provisioned_capacity: user B's volumes created "
               f"'directly, without using Cinder' count); {_QUEENS}: 'all other existing "
               f"volumes in that backend'", _check_out_of_band),
    _behaviour("admission.create-over-cap",
               "A create past the ratio cap is refused with CapacityExceeded, changing "
               "nothing", f"{_KILO}, LVM driver: create_volume checks so that 'over "
               f"provisioning will not happen even when a request didn't go through the "
               f"scheduler'", _check_create_over_cap),
    _behaviour("admission.extend-over-cap",
               "An extend past the ratio cap is refused with CapacityExceeded, changing "
               "nothing", f"{_KILO}, LVM driver: the same check in extend_volume",
               _check_extend_over_cap),
    _behaviour("admission.parallel-threads",
               "Parallel creates (threads) near the cap never admit past it",
               f"{_KILO}, LVM driver: over provisioning 'will not happen'; the kit's "
               f"per-backend admission lock", _check_parallel_threads),
    _behaviour("admission.parallel-processes",
               "Parallel creates (processes) near the cap never admit past it",
               f"{_KILO}, LVM driver; the kit's inter-process admission lock",
               _check_parallel_processes, severity="should"),
    _behaviour("ops.create-existing",
               "Creating an existing name raises AlreadyExists and changes nothing",
               "driver_kit API: VolumeDriver.create_volume is not idempotent (documented "
               "contract)", _check_create_existing),
    _behaviour("ops.delete-missing", "Deleting a missing volume succeeds (idempotent)",
               "driver_kit API: VolumeDriver.delete_volume is idempotent (documented "
               "contract)", _check_delete_missing),
    _behaviour("ops.extend-smaller",
               "Extending to a smaller size raises InvalidSize and changes nothing",
               "driver_kit API: VolumeDriver.extend_volume needs a larger size (documented "
               "contract)", _check_extend_smaller),
    _behaviour("resources.no-fd-leak", "No file descriptors leaked across operations",
               "harness: a volume service runs for months (no spec clause; psutil)",
               _check_no_fd_leak),
    _behaviour("resources.no-child-leak", "No child processes leaked across operations",
               "harness: a volume service runs for months (no spec clause; psutil)",
               _check_no_child_leak),
    _behaviour("stats.fail-closed",
               "Stats fail closed when the backend cannot be read",
               f"{_PLACEMENT}: count usage from the authoritative source and stay "
               f"consistent while it is unavailable; the kit's stats contract (a pool "
               f"that cannot be read is reported down)", _check_fail_closed),
)

#: the catalogue indexed by check id
BY_ID: Mapping[str, Check] = {c.id: c for c in CATALOGUE}


def find_checks(patterns: list[str] | tuple[str, ...] | None) -> tuple[Check, ...]:
    """The catalogue entries matching ids or shell patterns (all when ``patterns`` is empty).

    Raises ``ValueError`` naming any pattern that matches nothing.
    """
    if not patterns:
        return CATALOGUE
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(c.id, p) for c in CATALOGUE)]
    if unknown:
        raise ValueError(f"no check matches {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(BY_ID)}")
    return tuple(c for c in CATALOGUE if any(fnmatch.fnmatchcase(c.id, p) for p in patterns))
