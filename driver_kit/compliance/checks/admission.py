"""Admission: creates and extends past the over-subscription cap are refused, also when
threads or processes race for the last room."""

from __future__ import annotations

import logging
import multiprocessing
import queue
import threading
from typing import Any, Callable, Mapping

from driver_kit import CapacityExceeded
from driver_kit.compliance.checks.base import (KILO, Check, CheckContext, CheckError,
                                               CheckFailed, CheckSkipped, behaviour,
                                               cumulative_room_gb, pool_named,
                                               provisioned_gb, room_gb, set_up, target_pool)


def refusal(ctx: CheckContext, drv: Any, before: Mapping[str, Any], what: str,
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
    after = pool_named(drv, before["pool_name"])
    changed = [k for k in ("provisioned_capacity_gb", "total_volumes")
               if before.get(k) != after.get(k)]
    if changed:
        raise CheckFailed(f"{what} was refused but changed the pool: " + ", ".join(
            f"{k} {before.get(k)} -> {after.get(k)}" for k in changed))
    return f"{what}: {expected.__name__}, nothing changed"


_OVER_CAP = "it must be refused with driver_kit.CapacityExceeded and the breakdown"


def _check_create_over_cap(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool = target_pool(drv)
    room = room_gb(pool)
    name = ctx.name("over")
    ctx.track_volume(drv, name)
    return refusal(ctx, drv, pool, f"a create of {room + 1} GiB, past the over-subscription "
                    f"cap (max_volume_size_gb {room})",
                    lambda: drv.create_volume(name, room + 1, pool_name=pool["pool_name"]),
                    CapacityExceeded, _OVER_CAP, probe=name)


def _check_extend_over_cap(ctx: CheckContext) -> str:
    drv = ctx.driver()
    pool_name = target_pool(drv)["pool_name"]
    volume = ctx.create(drv, 1, pool_name)
    pool = pool_named(drv, pool_name)
    room = room_gb(pool)
    return refusal(ctx, drv, pool, f"an extend of a 1 GiB volume to {room + 2} GiB, past "
                    f"the over-subscription cap (max_volume_size_gb {room})",
                    lambda: drv.extend_volume(volume, room + 2), CapacityExceeded, _OVER_CAP)


def _race_size(pool: Mapping[str, Any], workers: int) -> tuple[int, int]:
    """A size such that ``workers`` creates cannot all fit but at least one can."""
    largest, room = room_gb(pool), cumulative_room_gb(pool)
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
    after = provisioned_gb(pool_named(drv, pool_name))
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
    pool = target_pool(drv)
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
    return _judge_race(ctx, drv, pool["pool_name"], provisioned_gb(pool), size, room, names,
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
    pool = target_pool(drv)
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
    return _judge_race(ctx, drv, pool["pool_name"], provisioned_gb(pool), size, room, names,
                       outcomes, "processes")


CHECKS: tuple[Check, ...] = (
    behaviour("admission.create-over-cap",
               "A create past the ratio cap is refused with CapacityExceeded, changing "
               "nothing", f"{KILO}, LVM driver: create_volume checks so that 'over "
               f"provisioning will not happen even when a request didn't go through the "
               f"scheduler'", _check_create_over_cap),
    behaviour("admission.extend-over-cap",
               "An extend past the ratio cap is refused with CapacityExceeded, changing "
               "nothing", f"{KILO}, LVM driver: the same check in extend_volume",
               _check_extend_over_cap),
    behaviour("admission.parallel-threads",
               "Parallel creates (threads) near the cap never admit past it",
               f"{KILO}, LVM driver: over provisioning 'will not happen'; the kit's "
               f"per-backend admission lock", _check_parallel_threads),
    behaviour("admission.parallel-processes",
               "Parallel creates (processes) near the cap never admit past it",
               f"{KILO}, LVM driver; the kit's inter-process admission lock",
               _check_parallel_processes, severity="should"),
)
