"""What each LVM command really did, recorded from inside the simulator's lock.

``AuditSimulator`` is the LVM simulator plus two records: the faults a
command met (kept per thread, for the operation that ran it) and, for every
command whose change reached the state file, the LVs it created, removed or
changed, with the pool's provisioned bytes before and after. The mutation
record is written after the state file was replaced and before the lock is
released, so the records of all processes are in commit order by ``seq``
(the VG's sequence number) and ``t`` (the host's monotonic clock).

``Recorder`` wraps any runner (the simulator or real LVM) and keeps, per
thread, each command an operation ran: its name, exit code and faults.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from lvm_driver.driver import SNAPSHOT_TAG, VOLUME_TAG
from lvm_driver.read.report_cache import DeviceSources
from lvm_driver.run.executor import CommandResult, LVMTimeoutError, Runner
from lvm_driver.simulator import LVMSimulator

from tests.campaign.journal import Journal

_LOCAL = threading.local()

#: the tag prefix of everything the driver marks as its own
DRIVER_TAG_PREFIX = "driver_kit"


def set_current_op(op_id: int | str | None) -> None:
    """The operation this thread is running (its commands are attributed to it)."""
    _LOCAL.op = op_id
    _LOCAL.commands = []
    _LOCAL.read_t = None


def current_op() -> int | str | None:
    return getattr(_LOCAL, "op", None)


def note_admission_read(t: float | None) -> None:
    """When the read this thread's admission used was taken (monotonic clock)."""
    _LOCAL.read_t = t


def take_admission_read() -> float | None:
    t = getattr(_LOCAL, "read_t", None)
    _LOCAL.read_t = None
    return t


def take_commands() -> list[list[Any]]:
    """The commands this thread ran since ``set_current_op``: [command, exit, faults]."""
    commands = getattr(_LOCAL, "commands", [])
    _LOCAL.commands = []
    return commands


def _note_fault(kind: str) -> None:
    faults = getattr(_LOCAL, "faults", None)
    if faults is not None:
        faults.append(kind)


def fault_kind(fault: dict[str, Any]) -> str:
    """The campaign's name for an injected fault record of the simulator."""
    if fault.get("delay_s") is not None:
        return "slow"
    if fault.get("fail_after_apply"):
        return "hang_after_apply" if fault.get("hang") else "fail_after_apply"
    if fault.get("hang"):
        return "hang"
    if fault.get("malformed_output"):
        return "malformed_output"
    if fault.get("exit_code") == 0:
        return "empty_report" if fault.get("stdout") else "masked_ok"
    return f"exit_{fault.get('exit_code')}"


def is_driver_tagged(tags: list[str] | tuple[str, ...]) -> bool:
    return any(tag.startswith(DRIVER_TAG_PREFIX) for tag in tags)


def is_volume(rec: dict[str, Any]) -> bool:
    """A thin LV counts as provisioned unless it is a snapshot: the driver's snapshot tag
    (which outlives the origin), or an origin and no volume tag (docs/operators.md, `list`)."""
    return SNAPSHOT_TAG not in rec["tags"] and (not rec.get("origin")
                                                or VOLUME_TAG in rec["tags"])


def lv_map(state: dict[str, Any], vg_name: str) -> dict[str, dict[str, Any]]:
    """The VG's LVs by uuid, as the campaign compares them: name, kind, bytes, tags."""
    vg = state.get("vgs", {}).get(vg_name)
    if vg is None:
        return {}
    extent = vg["extent_size"]
    return {lv["uuid"]: {"name": name, "kind": lv["kind"], "bytes": lv["extents"] * extent,
                         "tags": list(lv["tags"]), "origin": lv.get("origin"),
                         "pool": lv.get("pool")}
            for name, lv in vg["lvs"].items()}


def vg_totals(state: dict[str, Any], vg_name: str, pool: str) -> dict[str, int]:
    """Thin provisioned bytes of ``pool`` (snapshots apart), linear bytes, VG free bytes."""
    vg = state["vgs"][vg_name]
    extent = vg["extent_size"]
    thin = linear = 0
    used = vg["pmspare_extents"]
    for lv in vg["lvs"].values():
        if lv["kind"] == "thin" and lv["pool"] == pool and is_volume(lv):
            thin += lv["extents"] * extent
        elif lv["kind"] == "linear":
            linear += lv["extents"] * extent
            used += lv["extents"]
        elif lv["kind"] == "thin-pool":
            used += lv["extents"] + lv["metadata_extents"]
    return {"thin": thin, "linear": linear, "vg_free": (vg["extent_count"] - used) * extent}


def diff(before: dict[str, dict[str, Any]],
         after: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """LVs created, removed and changed between two ``lv_map`` results (by uuid)."""
    created = [dict(rec, uuid=u) for u, rec in after.items() if u not in before]
    removed = [dict(rec, uuid=u) for u, rec in before.items() if u not in after]
    changed = [{"uuid": u, "before": before[u], "after": rec}
               for u, rec in after.items() if u in before and before[u] != rec]
    return {"created": created, "removed": removed, "changed": changed}


class AuditSimulator(LVMSimulator):
    """The simulator, recording what each command did to one VG.

    ``immune``: this instance's commands skip every injected fault (the
    operator and the coordinator are not under test) and leave them pending.
    """

    def __init__(self, state_file: str, *, role: str, journal: Journal | None,
                 vg_name: str, pool_name: str, immune: bool = False):
        super().__init__(state_file=state_file)
        self.role = role
        self.journal = journal
        self.vg_name = vg_name
        self.pool_name = pool_name
        self.immune = immune
        self._audit = threading.local()
        #: the last mutation record of this thread (the operator reads its uuids)
        self.last_mutation: dict[str, Any] | None = None

    def __call__(self, argv: list[str], env: dict[str, str],
                 timeout_s: float) -> CommandResult:
        self._audit.pending = None
        try:
            return super().__call__(argv, env, timeout_s)
        finally:
            self._audit.pending = None

    def _run(self, state: dict[str, Any], argv: list[str], timeout_s: float) -> CommandResult:
        vg = state.get("vgs", {}).get(self.vg_name)
        self._audit.pending = None if vg is None else {
            "argv": list(argv), "before": lv_map(state, self.vg_name),
            "totals": vg_totals(state, self.vg_name, self.pool_name)}
        return super()._run(state, argv, timeout_s)

    def remove_exact(self, name: str, uuid: str) -> bool:
        """``lvremove -f`` of ``name`` if, under the lock, it is still the LV ``uuid``."""
        argv = ["lvremove", "-f", f"{self.vg_name}/{name}"]
        with self._transaction(argv) as state:
            lv = state["vgs"].get(self.vg_name, {}).get("lvs", {}).get(name)
            if lv is None or lv["uuid"] != uuid:
                return False
            return self._run(state, argv, 60.0).exit_code == 0

    def _take_fault(self, state: dict[str, Any], argv: list[str]) -> dict[str, Any] | None:
        if self.immune:
            return None
        fault = LVMSimulator._take_fault(state, argv)
        if fault is not None:
            _note_fault(fault_kind(fault))
        return fault

    def _io_fault(self, operation: str, argv: list[str] | None) -> bool:
        if self.immune:
            return False
        hit = super()._io_fault(operation, argv)
        if hit and operation == "header":  # read outside any LVM command: its own record
            commands = getattr(_LOCAL, "commands", None)
            if commands is not None:
                commands.append(["pv header read", "EIO", ["io_header"]])
        elif hit:
            _note_fault(f"io_{operation}")
        return hit

    def _save(self, state: dict[str, Any], *, fail: bool = False) -> None:
        super()._save(state, fail=fail)
        pending = getattr(self._audit, "pending", None)
        if pending is None or self.vg_name not in state.get("vgs", {}):
            return
        changes = diff(pending["before"], lv_map(state, self.vg_name))
        if not any(changes.values()):
            # nothing changed yet: the save that used up a hang or delay fault before
            # the command ran; the command's own save follows
            return
        self._audit.pending = None
        record = {"ev": "mut", "role": self.role, "op": current_op(), "argv": pending["argv"],
                  "seq": state["vgs"][self.vg_name]["seqno"], "t": time.monotonic(),
                  "totals_before": pending["totals"],
                  "totals_after": vg_totals(state, self.vg_name, self.pool_name),
                  **changes}
        for rec in changes["removed"]:  # LVM forgets the origin of their snapshots
            rec["snapshots"] = sorted(other["name"] for other in pending["before"].values()
                                      if other.get("origin") == rec["name"]
                                      and other["kind"] == "thin" and not is_volume(other))
        self.last_mutation = record
        if self.journal is not None:
            self.journal.write(record)


def follow_into_threads() -> None:
    """Threads started during an operation work for it (the driver may read the backend
    in a thread of its own): they inherit the operation and its command list."""
    if getattr(threading.Thread, "_campaign_follows", False):
        return
    init, run = threading.Thread.__init__, threading.Thread.run

    def __init__(self: threading.Thread, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._campaign_op = (current_op(), getattr(_LOCAL, "commands", None))

    def _run(self: threading.Thread) -> None:
        op, commands = getattr(self, "_campaign_op", (None, None))
        if commands is not None:
            _LOCAL.op, _LOCAL.commands = op, commands
        run(self)

    threading.Thread.__init__ = __init__  # type: ignore[method-assign]
    threading.Thread.run = _run  # type: ignore[method-assign]
    threading.Thread._campaign_follows = True  # type: ignore[attr-defined]


class Recorder:
    """A runner that keeps, per thread, what each command of the current operation met."""

    def __init__(self, runner: Runner):
        self.runner = runner

    def device_sources(self) -> DeviceSources:
        """The wrapped runner's header and pool-status reads (the kernel's on real LVM)."""
        provide = getattr(self.runner, "device_sources", None)
        return provide() if callable(provide) else DeviceSources()

    def __call__(self, argv: list[str], env: dict[str, str],
                 timeout_s: float) -> CommandResult:
        _LOCAL.faults = []
        name = argv[1] if argv and argv[0] == "lvm" and len(argv) > 1 else argv[0]
        entry: list[Any] = [name, None, _LOCAL.faults]
        commands = getattr(_LOCAL, "commands", None)
        if commands is not None:
            commands.append(entry)
        try:
            result = self.runner(argv, env, timeout_s)
            entry[1] = result.exit_code
        except LVMTimeoutError:
            entry[1] = "timeout"
            raise
        finally:
            _LOCAL.faults = None
            slow = "slow_timeout" if entry[1] == "timeout" else "slow_ok"
            entry[2] = [slow if kind == "slow" else kind for kind in entry[2]]
        return result
