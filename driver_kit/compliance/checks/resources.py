"""Resources: a volume service runs for months, so operations leak no file descriptors
and no child processes."""

from __future__ import annotations

import gc
import time
from typing import Any, Callable

import psutil

from driver_kit import InvalidInput
from driver_kit.compliance.checks.base import (Check, CheckContext, CheckFailed, Target,
                                               behaviour, first_target)



CONFIRMING_ROUNDS = 2  # rounds that must each grow the count again before a leak is said


def _exercise(ctx: CheckContext, drv: Any, target: Target) -> Callable[[], None]:
    """One round of every operation, within 2 allocation units of room (snapshots are
    admitted for their volume's size); the first round finds out whether snapshots work."""
    snapshots: list[bool] = []
    unit = ctx.unit_gb(drv, target)

    def cycle() -> None:
        volume = ctx.create(drv, unit, target, tag="cyc")
        drv.get_volume_stats(refresh=True)
        if not snapshots or snapshots[0]:
            snap = ctx.name("cycsnap")
            ctx.defer(("snapshot", snap), f"snapshot {snap}", lambda: drv.delete_snapshot(snap))
            try:
                drv.create_snapshot(snap, volume)
                snapshots[:] = [True]
                drv.delete_snapshot(snap)
            except (NotImplementedError, InvalidInput):
                snapshots[:] = [False]
            ctx.done(("snapshot", snap))
        drv.extend_volume(volume, 2 * unit)
        ctx.delete(drv, volume)
        drv.get_volume_stats(refresh=True)
    return cycle


def _check_no_fd_leak(ctx: CheckContext) -> str:
    drv = ctx.driver()
    cycle = _exercise(ctx, drv, first_target(drv))
    me = psutil.Process()
    cycle()  # warm-up: lazy imports, caches, lock files
    gc.collect()
    before, paths = me.num_fds(), {f.path for f in me.open_files()}
    after = before
    # A leak per operation grows the count every round; another thread of the host
    # process (a test runner, a service) opening a file grows it once at most, so a
    # growth is a leak only when it repeats over the confirming rounds.
    for _ in range(1 + CONFIRMING_ROUNDS):
        cycle()
        gc.collect()
        count = me.num_fds()
        if count <= after:
            break
        after = count
    else:
        new = sorted({f.path for f in me.open_files()} - paths)
        raise CheckFailed(f"{after - before} file descriptors leaked over "
                          f"{1 + CONFIRMING_ROUNDS} rounds of "
                          f"create/stats/snapshot/extend/delete, more after each"
                          + (f" (new open files: {', '.join(new[:5])})" if new else ""))
    return f"{before} open file descriptors, no growth repeated over rounds of operations"


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
    cycle = _exercise(ctx, drv, first_target(drv))
    me = psutil.Process()
    cycle()
    known = {p.pid for p in me.children(recursive=True)}
    cycle()
    deadline = time.monotonic() + 1.0
    while (leaked := _live_children(me, known)) and time.monotonic() < deadline:
        time.sleep(0.05)  # give commands that are exiting a moment to be reaped
    if leaked:
        raise CheckFailed(f"{len(leaked)} child processes outlived the operations that "
                          f"started them: {'; '.join(leaked[:5])}")
    return "no child process left after a round of operations"


CHECKS: tuple[Check, ...] = (
    behaviour("resources.no-fd-leak", "No file descriptors leaked across operations",
               "harness: a volume service runs for months (no spec clause; psutil)",
               _check_no_fd_leak, hooks=()),
    behaviour("resources.no-child-leak", "No child processes leaked across operations",
               "harness: a volume service runs for months (no spec clause; psutil)",
               _check_no_child_leak, hooks=()),
)
