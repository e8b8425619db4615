"""One campaign worker process: a driver shared by a few threads, each running its queue.

``python -m tests.campaign.worker RUN_DIR SLOT INCARNATION``. The plan comes
from the run's ``config.json`` (same seed, same plan); a worker started again
after its predecessor was killed skips every operation the predecessor
started (the one it was killed in stays 'unknown'). Each operation is
journaled when it starts and when it ends, with its outcome and the LVM
commands it ran.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from typing import Any

from driver_kit import (BackendError, CapacityExceeded, DriverKitError, SnapshotNotFound,
                        VolumeNotFound, load_backend_config)
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.run.executor import LVMExecutor, ProcessRunner

from tests.campaign import audit
from tests.campaign.journal import Journal, read_all
from tests.campaign.plan import DELETES, Op, make_plan

#: LVM's usual timeout, for what the campaign does not put under test
QUIET_TIMEOUT_S = 120.0
#: how often a client tries a delete the backend failed
DELETE_ATTEMPTS = 3


def load_config(run_dir: str) -> dict[str, Any]:
    with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as handle:
        return json.load(handle)


def build_driver(cfg: dict[str, Any], journal: Journal | None, role: str, *,
                 under_test: bool = True) -> ThinLVMDriver:
    """The driver as a service would run it, its LVM commands recorded for the campaign.

    Not ``under_test`` (the set-up and the probe): LVM's usual timeout instead of
    the campaign's tiny one, and no injected fault.
    """
    overrides = dict(cfg["overrides"])
    if not under_test:
        overrides.update(lvm_command_timeout=QUIET_TIMEOUT_S, stats_timeout=QUIET_TIMEOUT_S)
    conf = load_backend_config(extra_opts=LVM_OPTS, overrides=overrides)
    if cfg["mode"] == "sim":
        runner: Any = audit.AuditSimulator(cfg["state_file"], role=role, journal=journal,
                                           vg_name=cfg["vg"], pool_name=cfg["pool"],
                                           immune=not under_test)
    else:
        runner = ProcessRunner()
    executor = LVMExecutor(runner=audit.Recorder(runner),
                           timeout_s=conf.get("lvm_command_timeout"), retry_delay_s=0.01)
    driver = ThinLVMDriver(conf, executor=executor, notifier=lambda event, payload: None)
    _time_admission_reads(driver)
    return driver


def _time_admission_reads(driver: ThinLVMDriver) -> None:
    """Note, for each admission, when the read it decided on was taken.

    The admission gate may hand one read to several requests in a row; what
    the operator did after that read is not the driver's to see, and the cap
    rule needs to know when it was. Without the gate (a driver built another
    way) the request's start stands in for it.
    """
    gate = getattr(driver, "_gate", None)
    if gate is None or not hasattr(gate, "hold"):
        return
    hold = gate.hold
    last_read = [None]

    @contextlib.contextmanager
    def timed_hold(key: str, read_facts: Any, **kwargs: Any) -> Any:
        def timed_read() -> Any:
            last_read[0] = time.monotonic()  # under the gate's lock: one reader at a time
            return read_facts()

        with hold(key, timed_read, **kwargs) as session:
            audit.note_admission_read(last_read[0])
            yield session

    gate.hold = timed_hold


def set_up(cfg: dict[str, Any], journal: Journal | None, role: str) -> None:
    """do_setup and check_for_setup_error as Cinder runs them (not under test)."""
    driver = build_driver(cfg, journal, role, under_test=False)
    driver.do_setup()
    driver.check_for_setup_error()


def _info(info: Any) -> dict[str, Any]:
    return {"size_gb": info.size_gb, "thin": info.thin, "pool": info.pool_name}


def _spec(thin: bool) -> dict[str, str]:
    return {"provisioning:type": "thin" if thin else "thick"}


def perform(driver: ThinLVMDriver, op: Op) -> dict[str, Any] | None:
    """Run one operation through the driver's public API; its result, if it has one."""
    kind = op.kind
    if kind in ("create_thin", "create_thick"):
        return _info(driver.create_volume(op.name, op.size_gb,
                                          extra_specs=_spec(kind == "create_thin")))
    if kind == "extend":
        volume = driver.backend_find_volume(op.name)
        if volume is None:
            raise VolumeNotFound(f"no volume {op.name!r}")
        return _info(driver.extend_volume(op.name, volume.size_gb + op.grow_gb))
    if kind == "delete":
        driver.delete_volume(op.name)
        return None
    if kind == "snapshot":
        return _info(driver.create_snapshot(op.name, op.source))
    if kind == "delete_snapshot":
        driver.delete_snapshot(op.name)
        return None
    if kind in ("clone", "from_snapshot"):
        size = None
        if op.grow_gb:
            find = driver.backend_find_volume if kind == "clone" else driver.backend_find_snapshot
            source = find(op.source)
            if source is None:
                raise (VolumeNotFound if kind == "clone" else SnapshotNotFound)(
                    f"no source {op.source!r}")
            size = source.size_gb + op.grow_gb
        if kind == "clone":
            return _info(driver.create_cloned_volume(op.name, op.source, size))
        return _info(driver.create_volume_from_snapshot(op.name, op.source, size))
    if kind == "stats":
        stats = driver.get_volume_stats(refresh=True)
        return {"pools": [{"pool": p["pool_name"], "state": p.get("backend_state"),
                           "total_gb": p["total_capacity_gb"],
                           "max_gb": p.get("max_volume_size_gb")} for p in stats["pools"]]}
    raise ValueError(f"unknown operation kind {kind!r}")


def run_op(driver: ThinLVMDriver, op: Op, journal: Journal) -> None:
    """Journal the start, run the operation, journal its outcome and commands."""
    audit.set_current_op(op.id)
    journal.write({"ev": "start", "op": op.id, "t": time.monotonic(), "pid": os.getpid()})
    record: dict[str, Any] = {"ev": "end", "op": op.id}
    # a client retries a delete the backend failed (Cinder's error_deleting, retried)
    attempts = DELETE_ATTEMPTS if op.kind in DELETES else 1
    for attempt in range(1, attempts + 1):
        record["attempts"] = attempt
        try:
            record.update(result=perform(driver, op), outcome="ok")
            break
        except CapacityExceeded as exc:
            record.update(outcome="refused", etype=type(exc).__name__, msg=str(exc)[:300])
            break
        except BackendError as exc:
            record.update(outcome="error", etype=type(exc).__name__, msg=str(exc)[:300])
        except DriverKitError as exc:
            record.update(outcome="error", etype=type(exc).__name__, msg=str(exc)[:300])
            break
        except Exception as exc:  # a traceback a user would see: checked as a violation
            record.update(outcome="crash", etype=type(exc).__name__, msg=str(exc)[:300])
            break
    record["t"] = time.monotonic()
    record["read_t"] = audit.take_admission_read()
    record["cmds"] = audit.take_commands()
    audit.set_current_op(None)
    journal.write(record)


def started_ops(run_dir: str, slot: int) -> set[int]:
    """Operations any earlier incarnation of this slot started."""
    return {rec["op"] for rec in read_all(run_dir, f"ops-p{slot}-*.jsonl")
            if rec.get("ev") == "start"}


def main(argv: list[str]) -> int:
    run_dir, slot, incarnation = argv[0], int(argv[1]), int(argv[2])
    cfg = load_config(run_dir)
    logging.basicConfig(level=logging.ERROR,
                        filename=os.path.join(run_dir, f"worker-p{slot}.log"))
    plan = make_plan(**cfg["plan"])
    threads = cfg["threads"]
    queues = plan[slot * threads:(slot + 1) * threads]
    skip = started_ops(run_dir, slot)
    audit.follow_into_threads()
    journal = Journal(os.path.join(run_dir, f"ops-p{slot}-{incarnation}.jsonl"))
    set_up(cfg, journal, "driver")
    driver = build_driver(cfg, journal, "driver")
    failures: list[BaseException] = []

    def loop(queue: list[Op]) -> None:
        try:
            for op in queue:
                if op.id not in skip:
                    run_op(driver, op, journal)
        except BaseException as exc:  # the campaign's own bug: fail the worker loudly
            failures.append(exc)
            raise

    workers = [threading.Thread(target=loop, args=(q,), name=f"p{slot}t{i}")
               for i, q in enumerate(queues)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
