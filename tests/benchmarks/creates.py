"""Creates with enforcement: LVM commands per create, burst throughput, over-commits.

Runs on the LVM simulator with a state file (``lvm_driver.simulator``): the
restored real VG has an inactive pool (no device-mapper here), so no thin LV
can be created on it. The simulator sits behind the same executor seam as real
LVM, so every LVM command the driver issues is counted by
``executor.commands_run`` (on a real host each is one process). The admission
lock is the real one (oslo.concurrency file lock) and the simulator serialises
its commands with a file lock, as LVM does with its VG lock.

The pool is set up near its cap: 100 GiB thin pool, ratio 2.0 (cap 200 GiB),
176 GiB already provisioned by an operator; a burst asks for 32 x 1 GiB, so 24
fit and 8 must be refused. Over-commits are counted from the final state:
volumes admitted beyond the cap.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from driver_kit import CapacityExceeded, GiB, load_backend_config
from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver

VG = "simvg"
POOL = "pool"
POOL_GB = 100
RATIO = 2.0
PREFILL = (11,) * 16          # GiB each: 176 GiB provisioned, 24 GiB of room
BURST = 32
SIZE_GB = 1
CAP_GB = POOL_GB * RATIO
ROOM = int((CAP_GB - sum(PREFILL)) // SIZE_GB)


def make_state(directory: str) -> str:
    """A simulator state file holding the VG, the pool and the operator's volumes."""
    from lvm_driver.simulator import LVMSimulator
    state = os.path.join(directory, "template.json")
    sim = LVMSimulator(state_file=state)
    sim.create_vg(VG, 4 * POOL_GB * GiB)
    vg = VolumeGroup(VG, executor=sim.executor())
    vg.create_thin_pool(POOL, POOL_GB * GiB)
    for index, size in enumerate(PREFILL):
        vg.create_thin_volume(f"operator-{index}", size * GiB, pool=POOL)
    return state


def fresh_copy(template: str, directory: str, tag: str) -> str:
    path = os.path.join(directory, f"state-{tag}.json")
    shutil.copyfile(template, path)
    return path


def make_driver(state_file: str, lock_path: str) -> ThinLVMDriver:
    conf = load_backend_config(extra_opts=LVM_OPTS, overrides={
        "volume_group": VG, "lvm_thin_pool_name": POOL, "lvm_create_thin_pool": False,
        "lvm_backend": "simulator", "lvm_simulator_state_file": state_file,
        "lock_path": lock_path, "max_over_subscription_ratio": str(RATIO),
        "reserved_percentage": 0})
    driver = ThinLVMDriver(conf)
    driver.do_setup()
    driver.check_for_setup_error()
    return driver


@dataclass(frozen=True, slots=True)
class BurstResult:
    label: str
    requests: int
    created: int
    refused: int
    errors: int
    commands: int
    wall_s: float
    over_commits: int
    overshoot_gb: float


def over_commits(state_file: str) -> tuple[int, float, int]:
    """(creates beyond the cap, GiB beyond the cap, burst volumes created) from the state."""
    from lvm_driver.simulator import LVMSimulator
    report = VolumeGroup(VG, executor=LVMSimulator(state_file=state_file).executor()).report()
    thin = [lv for lv in report.thin_volumes(POOL) if not lv.is_thin_snapshot]
    provisioned_gb = sum(lv.size_bytes for lv in thin) / GiB
    created = sum(1 for lv in thin if lv.name.startswith("burst-"))
    overshoot = max(0.0, provisioned_gb - CAP_GB)
    return max(0, created - ROOM), overshoot, created


def _create_many(create: Any, names: list[str], start: Any,
                 ) -> tuple[list[threading.Thread], dict[str, int]]:
    """Start one thread per name, each waiting for ``start``; returns threads and counts."""
    counts = {"created": 0, "refused": 0, "errors": 0}
    lock = threading.Lock()

    def one(name: str) -> None:
        start.wait()
        try:
            create(name)
            key = "created"
        except CapacityExceeded:
            key = "refused"
        except Exception:  # counted and shown; a burst must not have any
            key = "errors"
        with lock:
            counts[key] += 1

    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    for t in threads:
        t.start()
    return threads, counts


def burst_threads(template: str, workdir: str, tag: str, *, enforce: bool = True,
                  ) -> BurstResult:
    """32 creates from 32 threads of one process, sharing one driver (as Cinder does)."""
    state = fresh_copy(template, workdir, tag)
    driver = make_driver(state, os.path.join(workdir, f"locks-{tag}"))
    names = [f"burst-{i:02d}" for i in range(BURST)]
    if enforce:
        def create(name: str) -> None:
            driver.create_volume(name, SIZE_GB)
    else:  # what Cinder's LVM driver does at create: one lvcreate, no capacity check
        def create(name: str) -> None:
            driver.vg.create_thin_volume(name, SIZE_GB * GiB, pool=POOL)
    start = threading.Event()
    threads, counts = _create_many(create, names, start)
    before = driver.executor.commands_run
    t0 = time.perf_counter()
    start.set()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    commands = driver.executor.commands_run - before
    beyond, overshoot, created = over_commits(state)
    assert created == counts["created"], (created, counts)
    return BurstResult("threads" if enforce else "no-check", BURST, counts["created"],
                       counts["refused"], counts["errors"], commands, wall, beyond, overshoot)


def _worker(state: str, lock_path: str, names: list[str], start: Any, ready: Any,
            results: Any) -> None:
    import logging
    logging.basicConfig(level=logging.CRITICAL)  # refusals are expected here
    driver = make_driver(state, lock_path)
    threads, counts = _create_many(lambda n: driver.create_volume(n, SIZE_GB), names,
                                   start)
    before = driver.executor.commands_run
    ready.put(os.getpid())
    for t in threads:
        t.join()
    results.put((counts, driver.executor.commands_run - before, time.monotonic()))


def burst_processes(template: str, workdir: str, tag: str, *, processes: int = 4,
                    ) -> BurstResult:
    """32 creates from ``processes`` processes x (32 / processes) threads, one backend."""
    state = fresh_copy(template, workdir, tag)
    lock_path = os.path.join(workdir, f"locks-{tag}")
    ctx = multiprocessing.get_context("spawn")
    start, ready, results = ctx.Event(), ctx.Queue(), ctx.Queue()
    per = BURST // processes
    procs = [ctx.Process(target=_worker, args=(
        state, lock_path, [f"burst-{p}-{i:02d}" for i in range(per)], start, ready, results))
        for p in range(processes)]
    for p in procs:
        p.start()
    _collect(ready, procs, len(procs))
    t0 = time.monotonic()
    start.set()
    done = _collect(results, procs, len(procs))
    for p in procs:
        p.join(timeout=60)
    wall = max(end for _, _, end in done) - t0
    created = sum(c["created"] for c, _, _ in done)
    refused = sum(c["refused"] for c, _, _ in done)
    errors = sum(c["errors"] for c, _, _ in done)
    commands = sum(n for _, n, _ in done)
    beyond, overshoot, seen = over_commits(state)
    assert seen == created, (seen, created)
    return BurstResult(f"{processes} processes", BURST, created, refused, errors, commands,
                       wall, beyond, overshoot)


def _collect(queue: Any, procs: list[Any], count: int, timeout_s: float = 600.0) -> list[Any]:
    """``count`` items from ``queue``; fail fast if a worker died instead of hanging."""
    import queue as queue_module
    items: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(items) < count:
        try:
            items.append(queue.get(timeout=0.5))
        except queue_module.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for p in procs:
                    p.terminate()
                raise RuntimeError(f"create workers failed: exit codes "
                                   f"{[p.exitcode for p in procs]}")
    return items


def sequential(template: str, workdir: str, tag: str, count: int = 8) -> BurstResult:
    """Creates one after another: the cost of one create with enforcement."""
    state = fresh_copy(template, workdir, tag)
    driver = make_driver(state, os.path.join(workdir, f"locks-{tag}"))
    before = driver.executor.commands_run
    t0 = time.perf_counter()
    for i in range(count):
        driver.create_volume(f"burst-{i:02d}", SIZE_GB)
    wall = time.perf_counter() - t0
    beyond, overshoot, _ = over_commits(state)
    return BurstResult("sequential", count, count, 0, 0,
                       driver.executor.commands_run - before, wall, beyond, overshoot)


def run_all(runs: int, workdir: str | None = None) -> dict[str, list[BurstResult]]:
    """Every create measurement, ``runs`` times each, each run on a fresh state copy."""
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="dk-bench-creates-")
    try:
        template = make_state(workdir)
        out: dict[str, list[BurstResult]] = {"sequential": [], "threads": [],
                                             "processes": [], "no-check": []}
        for r in range(runs):
            out["sequential"].append(sequential(template, workdir, f"seq{r}"))
            out["threads"].append(burst_threads(template, workdir, f"thr{r}"))
            out["processes"].append(burst_processes(template, workdir, f"proc{r}"))
            out["no-check"].append(burst_threads(template, workdir, f"raw{r}", enforce=False))
        return out
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
