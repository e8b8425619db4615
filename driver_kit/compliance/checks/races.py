"""Admission under races: creates in parallel threads, and in parallel processes each
building its own driver, never admit past the cap, on every pool and type.

A race is judged against the cap recomputed before every decision: starting
from the truth read before the race, the harness works out how many of the
creates could be admitted one after another (an ``auto`` ratio grows with each,
a thick create takes free space from its whole capacity group); more admitted
than that is a lost race.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import queue
import threading
from typing import Any, Callable

from driver_kit import CapacityExceeded, GiB
from driver_kit.compliance.checks import expect
from driver_kit.compliance.checks.base import (KILO, Check, CheckContext, CheckError,
                                               CheckFailed, CheckSkipped, LatePool, Target,
                                               behaviour, each_target, set_up)

__all__ = ["CHECKS"]

THREADS = 8
PROCESSES = 4


def _admissible(ctx: CheckContext, drv: Any, target: Target, size_gb: int,
                workers: int) -> int:
    """How many of ``workers`` creates of ``size_gb`` fit one after another now."""
    settings, report_pool = expect.settings_of(drv), LatePool(drv, target.pool_name)
    figures = ctx.expected(drv, target)
    for fitted in range(workers):
        try:
            decision = expect.admission(figures, report_pool, size_bytes=size_gb * GiB,
                                        thin=target.thin, settings=settings)
        except LookupError as exc:
            raise CheckError(f"cannot tell how much room {target} has: {exc}") from None
        if not decision.admitted:
            return fitted
        figures = expect.advanced(figures, settings, size_bytes=size_gb * GiB,
                                  thin=target.thin)
    return workers


def _race_size(ctx: CheckContext, drv: Any, target: Target,
               workers: int) -> tuple[int, int] | None:
    """(size, how many fit) such that not all ``workers`` creates fit but one does."""
    room = ctx.room_gb(drv, target)
    for size in sorted({room // (workers // 2) + 1, room // 2 + 1, room}):
        if 1 <= size <= room:
            fitted = _admissible(ctx, drv, target, size, workers)
            if 1 <= fitted < workers:
                return size, fitted
    return None


def _judge(ctx: CheckContext, target: Target, size: int, fitted: int, names: list[str],
           outcomes: list[str | None], workers: str) -> str:
    for name, outcome in zip(names, outcomes):
        if outcome == "refused":
            ctx.done(("volume", name))  # nothing to delete
    admitted = outcomes.count("admitted")
    others = sorted({o for o in outcomes if o not in ("admitted", "refused")}, key=str)
    summary = (f"{target}: {len(outcomes)} {workers} each created {size} GiB where "
               f"{fitted} fit one after another: {admitted} admitted")
    if admitted > fitted:
        raise CheckFailed(f"{summary}, past the cap (recomputed before each decision)")
    if admitted == 0:
        raise CheckFailed(f"{summary}: every create was refused though {fitted} fitted"
                          + (f" ({'; '.join(map(str, others))})" if others else ""))
    return summary


def _races(ctx: CheckContext, drv: Any, workers: int,
           race: Callable[[Target, int, list[str]], list[str | None]], kind: str) -> str:
    skipped: list[str] = []

    def one(target: Target) -> str | None:
        found = _race_size(ctx, drv, target, workers)
        if found is None:
            skipped.append(f"{target}: {workers} creates cannot be made to race (all fit or "
                           f"none does, the cap recomputed before each)")
            return None
        size, fitted = found
        names = [ctx.name("race") for _ in range(workers)]
        for name in names:
            ctx.track_volume(drv, name)
        return _judge(ctx, target, size, fitted, names, race(target, size, names), kind)
    try:
        done = each_target(ctx, drv, one)
    except CheckSkipped:
        raise CheckSkipped("; ".join(skipped)) from None
    return "; ".join([done] + skipped)


def _outcome(create: Callable[[], Any]) -> str:
    try:
        create()
        return "admitted"
    except CapacityExceeded:
        return "refused"
    except Exception as exc:  # any refusal counts; the cap is what is judged
        return f"{type(exc).__name__}: {exc}"


def _check_parallel_threads(ctx: CheckContext) -> str:
    drv = ctx.driver()

    def race(target: Target, size: int, names: list[str]) -> list[str | None]:
        outcomes: list[str | None] = [None] * THREADS
        barrier = threading.Barrier(THREADS)

        def create(index: int) -> None:
            try:
                barrier.wait(ctx.remaining_s())
            except threading.BrokenBarrierError:
                pass
            outcomes[index] = _outcome(lambda: drv.create_volume(
                names[index], size, pool_name=target.pool_name, extra_specs=target.specs))

        threads = [threading.Thread(target=create, args=(i,), daemon=True,
                                    name=f"driver-kit-race-{i}") for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(ctx.remaining_s())
        if any(t.is_alive() for t in threads):
            raise CheckError("parallel creates did not finish in time")
        return outcomes
    return _races(ctx, drv, THREADS, race, "threads")


def _race_in_process(make: Callable[[], Callable[[], Any]], tasks: Any,
                     barrier: Any, results: Any, index: int, timeout_s: float) -> None:
    """Child process body: build the driver (``make()`` gives its factory), then for each
    task wait for the others and create."""
    logging.getLogger().addHandler(logging.NullHandler())  # refusals are expected here
    failure = ""
    try:
        drv = set_up(make()())
    except BaseException as exc:  # reported to the parent, never raised in a child
        drv, failure = None, f"{type(exc).__name__}: {exc}"
    while (task := tasks.get(timeout=timeout_s)) is not None:
        name, size_gb, pool_name, specs = task
        try:
            barrier.wait(timeout_s)
        except threading.BrokenBarrierError:
            pass
        outcome = failure if drv is None else _outcome(lambda: drv.create_volume(
            name, size_gb, pool_name=pool_name, extra_specs=specs))
        results.put((index, outcome))


def _given(factory: Callable[[], Any]) -> Callable[[], Any]:
    return factory


class _Workers:
    """``PROCESSES`` child processes that race on command, round after round."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        if ctx.spec is not None and ctx.build is not None:
            # a fresh interpreter builds the driver by name, as another service would
            mp = multiprocessing.get_context("spawn")
            make: Callable[[], Callable[[], Any]] = functools.partial(ctx.build, ctx.spec)
        else:  # a factory cannot be named: the children are forked with it
            mp = multiprocessing.get_context("fork")
            make = functools.partial(_given, ctx.factory)
        self.barrier, self.results = mp.Barrier(PROCESSES), mp.Queue()
        self.tasks = [mp.Queue() for _ in range(PROCESSES)]
        self.procs = [mp.Process(target=_race_in_process, daemon=True,
                                 name=f"driver-kit-proc-{i}",
                                 args=(make, self.tasks[i], self.barrier,
                                       self.results, i, ctx.remaining_s() / 2))
                      for i in range(PROCESSES)]
        for proc in self.procs:
            proc.start()

    def race(self, target: Target, size: int, names: list[str]) -> list[str | None]:
        outcomes: list[str | None] = [None] * PROCESSES
        for index, tasks in enumerate(self.tasks):
            tasks.put((names[index], size, target.pool_name, target.specs))
        try:
            for _ in self.procs:
                index, outcome = self.results.get(timeout=self.ctx.remaining_s())
                outcomes[index] = outcome
        except queue.Empty:
            raise CheckError(f"only {PROCESSES - outcomes.count(None)} of {PROCESSES} "
                             f"processes reported in time") from None
        return outcomes

    def close(self) -> None:
        for tasks in self.tasks:
            tasks.put(None)
        for proc in self.procs:
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
            proc.close()
        for q in (*self.tasks, self.results):
            q.close()
            q.join_thread()


def _check_parallel_processes(ctx: CheckContext) -> str:
    drv = ctx.driver()
    workers = _Workers(ctx)
    unseen: list[str] = []

    def race(target: Target, size: int, names: list[str]) -> list[str | None]:
        outcomes = workers.race(target, size, names)
        on_backend = {v.name for v in ctx.truth(drv).volumes}
        admitted = [n for n, o in zip(names, outcomes) if o == "admitted"]
        if admitted and not on_backend.intersection(admitted):
            unseen.append(str(target))
        return outcomes
    try:
        verdict = _races(ctx, drv, PROCESSES, race, "processes")
    except CheckFailed:
        if not unseen:
            raise
        verdict = ""
    finally:
        workers.close()
    if unseen:
        raise CheckSkipped(f"the volumes the child processes made on {', '.join(unseen)} are "
                           f"not on this process's backend: it is not shared between "
                           f"processes, so they cannot race for it")
    return verdict


CHECKS: tuple[Check, ...] = (
    behaviour("admission.parallel-threads",
              "Parallel creates (threads) near the cap never admit past it",
              f"{KILO}, LVM driver: over provisioning 'will not happen'; the kit's "
              f"per-backend admission lock", _check_parallel_threads),
    behaviour("admission.parallel-processes",
              "Parallel creates (processes) near the cap never admit past it",
              f"{KILO}, LVM driver; the kit's inter-process admission lock (Cinder runs "
              f"several volume services on one backend)", _check_parallel_processes),
)
