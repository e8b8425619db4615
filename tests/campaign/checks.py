"""The campaign's invariants, checked from LVM's own state and the commands' records.

Three sources, none of them the driver's view: the mutation records the
simulator writes under its lock (what each command created, removed or
resized, by which request), the requests' own journal (what each one
reported), and the VG read directly (the simulator's state file, or ``lvs``
on real LVM). Rules:

* ``cap_thin``: a driver command raised the thin pool's provisioned bytes
  above ``(total - reserved) * ratio`` (the operator's own LVs may push it
  there; the driver must then refuse);
* ``cap_thick``: a driver command left less than the thick pool's reserve free;
* ``foreign_removed``: a driver command removed an LV it did not make (the
  operator's, the pool, anything without the driver's tag);
* ``origin_removed``: a volume was removed while it had snapshots;
* ``wrong_remover``/``wrong_resize``: a request removed or grew an LV that
  was neither its own nor the one it was asked about;
* ``untagged_create``: the driver made an LV without its tag;
* ``success_without_lv``/``short_volume``: a create reported success, but its
  LV is missing or smaller than the size returned;
* ``failure_left_lv``: a failed request left an LV it made;
* ``delete_kept_lv``/``extend_short``: a delete or extend reported success
  and the LV stayed, or is smaller than returned;
* ``stats_up_after_fault``: a stats refresh whose last ``lvs`` was faulted
  reported a pool up (a refresh that reused the last report runs no ``lvs``:
  nothing to check; a faulted read is never reused);
* ``operator_lost``, ``unaccounted`` and, on real LVM, ``orphan_snapshot`` (a
  driver snapshot without its origin): the state itself;
* ``unexpected_exception``: the API raised something outside its error hierarchy;
* ``lock_stuck``, ``probe``, ``stuck``: from the coordinator.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from fractions import Fraction
from typing import Any

from lvm_driver.driver import SNAPSHOT_TAG

from tests.campaign.actors import WRITES
from tests.campaign.audit import is_driver_tagged, is_volume
from tests.campaign.plan import CREATES, Op

GiB = 1024 ** 3
#: the roles whose commands are the driver's (the probe is a fresh driver process)
DRIVER_ROLES = frozenset({"driver", "probe"})
#: roles whose LVs are not the driver's business
OUTSIDE_ROLES = frozenset({"operator", "setup", "janitor"})


def _gb(nbytes: float) -> str:
    return f"{float(nbytes) / GiB:.3f} GiB"


def _floor2_gb(nbytes: int) -> Decimal:
    return (Decimal(nbytes) / GiB).quantize(Decimal("0.01"), rounding=ROUND_FLOOR)


@dataclass(frozen=True)
class Limits:
    """The caps in bytes, computed from the pool's and the VG's sizes as docs/operators.md says."""

    cap_thin_bytes: Fraction
    thick_reserved_bytes: int

    @classmethod
    def compute(cls, pool_bytes: int, thick_total_bytes: int, ratio: float,
                reserved_percentage: int) -> "Limits":
        def reserved(total_gb: Decimal) -> int:  # Cinder's float floor
            return math.floor(float(total_gb) * (reserved_percentage / 100))

        thin_total = _floor2_gb(pool_bytes)
        cap = (Fraction(str(thin_total)) - reserved(thin_total)) * Fraction(str(ratio))
        cap = Fraction(math.ceil(cap * 100), 100)  # Cinder's filter takes it to 2 decimals
        thick_total = _floor2_gb(thick_total_bytes)
        return cls(cap_thin_bytes=cap * GiB,
                   thick_reserved_bytes=reserved(thick_total) * GiB)


@dataclass
class Violation:
    rule: str
    message: str
    t: float
    names: tuple[str, ...] = ()
    ops: tuple[Any, ...] = ()


@dataclass
class History:
    """One LV (one uuid) from its creation on."""

    name: str
    created_t: float
    created_by: Any
    role: str
    tags: list[str]
    kind: str
    origin: str | None
    sizes: list[tuple[float, int]] = field(default_factory=list)
    names: list[tuple[float, str]] = field(default_factory=list)
    removed_t: float | None = None
    removed_by: Any = None

    def alive_at(self, t: float) -> bool:
        return self.created_t < t and (self.removed_t is None or self.removed_t > t)

    def _at(self, series: list[tuple[float, Any]], t: float) -> Any:
        value = series[0][1]
        for when, item in series:
            if when <= t:
                value = item
        return value

    def bytes_at(self, t: float) -> int:
        return self._at(self.sizes, t)

    def name_at(self, t: float) -> str:
        return self._at(self.names, t)


def faulted(command: list[Any]) -> bool:
    """Whether a recorded command [name, exit, faults] met a fault that spoils its output."""
    _, exit_code, faults = command
    return exit_code != 0 or any(kind != "slow_ok" for kind in faults)


class Checker:
    """Collects violations; ``feed`` as records arrive, ``snapshot`` on each state read,
    ``finish`` once everything has stopped."""

    def __init__(self, ops: dict[Any, Op], limits: Limits, *, mode: str = "sim"):
        self.ops = ops
        self.limits = limits
        self.mode = mode
        self.violations: list[Violation] = []
        self.counts: Counter[str] = Counter()
        self._keys: set[tuple[str, Any]] = set()
        self.starts: dict[Any, dict[str, Any]] = {}
        self.ends: dict[Any, dict[str, Any]] = {}
        self.mutations: list[dict[str, Any]] = []
        self.history: dict[str, History] = {}
        self.created_by: dict[Any, list[str]] = defaultdict(list)
        self.faults_taken: Counter[str] = Counter()
        self._pending: list[dict[str, Any]] = []
        #: mutations over a cap, waiting for their request's admission read time
        self._caps_waiting: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        self.operator_lvs: list[History] = []
        #: (uuid, name, remover, creator, where, t) of removals by another request
        self.removed_for_others: list[tuple[Any, str, Any, Any, str, float]] = []

    # -- bookkeeping ------------------------------------------------------------------

    def add(self, rule: str, key: Any, message: str, t: float, names: tuple[str, ...] = (),
            ops: tuple[Any, ...] = ()) -> None:
        """Record a violation once per (rule, key)."""
        if (rule, key) in self._keys:
            return
        self._keys.add((rule, key))
        self.counts[rule] += 1
        self.violations.append(Violation(rule, message, t, names, ops))

    def op(self, op_id: Any) -> Op | None:
        return self.ops.get(op_id)

    def _describe(self, op_id: Any) -> str:
        op = self.op(op_id)
        if op is None:
            return f"request {op_id}" if op_id is not None else "a command outside any request"
        return f"request {op_id} ({op.kind} {op.name})"

    # -- records as they arrive ------------------------------------------------------------

    def feed(self, records: list[dict[str, Any]], horizon: float | None = None) -> None:
        """Take new journal records; mutations are applied in commit order up to ``horizon``
        (None: all), later ones wait for the next call (journals are read one by one)."""
        for rec in records:
            ev = rec.get("ev")
            if ev == "start":
                self.starts[rec["op"]] = rec
            elif ev == "end":
                self._end(rec)
            elif ev == "mut":
                self._pending.append(rec)
        self._pending.sort(key=lambda r: (r["t"], r["seq"]))
        ready = [r for r in self._pending if horizon is None or r["t"] < horizon]
        self._pending = self._pending[len(ready):]
        for rec in ready:
            self.mutations.append(rec)
            self._mutation(rec)

    def _end(self, rec: dict[str, Any]) -> None:
        cmds = rec.pop("cmds", [])
        for command in cmds:
            exit_code, faults = command[1], command[2]
            # a command still running when its request gave up on it (stats_timeout)
            command[2] = faults = ["slow_abandoned" if f == "slow" else f for f in faults]
            self.faults_taken.update(faults)
            if exit_code == "timeout" and not faults:  # real LVM: killed mid-flight
                self.faults_taken["killed at lvm_command_timeout"] += 1
        failed = [i for i, c in enumerate(cmds) if c[0] in WRITES and c[1] != 0]
        rec["cleanup_faults"] = sorted({f"{c[0]} {kind}" for c in cmds[failed[0] + 1:]
                                        for kind in c[2]} if failed else set())
        self.ends[rec["op"]] = rec
        for pending in self._caps_waiting.pop(rec["op"], []):
            self._caps(pending, rec.get("read_t"))
        op = self.op(rec["op"])
        if rec["outcome"] == "crash":
            self.add("unexpected_exception", rec["op"],
                     f"{self._describe(rec['op'])} raised {rec['etype']}: {rec.get('msg')}",
                     rec["t"], (op.name,) if op else (), (rec["op"],))
        if op is not None and op.kind == "stats" and rec["outcome"] == "ok":
            reads = [c for c in cmds if c[0] == "lvs"]
            up = [p["pool"] for p in rec["result"]["pools"] if p["state"] == "up"]
            if reads and faulted(reads[-1]) and up:
                self.add("stats_up_after_fault", rec["op"],
                         f"{self._describe(rec['op'])}: its last lvs was faulted "
                         f"(exit {reads[-1][1]}, {reads[-1][2] or 'no injected fault'}) and "
                         f"pools {up} were reported up", rec["t"], (), (rec["op"],))

    def _mutation(self, rec: dict[str, Any]) -> None:
        t, op_id, role = rec["t"], rec["op"], rec["role"]
        by_driver = role in DRIVER_ROLES
        where = f"`{' '.join(rec['argv'])}` of {self._describe(op_id)}"
        for lv in rec["created"]:
            history = History(lv["name"], t, op_id, role, lv["tags"], lv["kind"],
                              lv.get("origin"), [(t, lv["bytes"])], [(t, lv["name"])])
            self.history[lv["uuid"]] = history
            if role == "operator":
                self.operator_lvs.append(history)
            if by_driver:
                self.created_by[op_id].append(lv["uuid"])
                if not is_driver_tagged(lv["tags"]):
                    self.add("untagged_create", lv["uuid"],
                             f"{where} made {lv['name']} without the driver's tag "
                             f"(tags {lv['tags']})", t, (lv["name"],), (op_id,))
        for lv in rec["removed"]:
            history = self.history.get(lv["uuid"])
            if history is not None:
                history.removed_t, history.removed_by = t, op_id
            if by_driver:
                self._removal(lv, history, op_id, where, t)
        for change in rec["changed"]:
            self._change(change, op_id, by_driver, where, t)
        if by_driver:
            rec["where"] = where
            end = self.ends.get(op_id)
            if end is not None or op_id not in self.starts:
                self._caps(rec, (end or {}).get("read_t"))
            else:
                self._caps_waiting[op_id].append(rec)

    def _removal(self, lv: dict[str, Any], history: History | None, op_id: Any, where: str,
                 t: float) -> None:
        name = lv["name"]
        if not is_driver_tagged(lv["tags"]) or (history and history.role in OUTSIDE_ROLES):
            who = history.role if history else "someone else"
            self.add("foreign_removed", lv["uuid"],
                     f"{where} removed {name} ({lv['kind']}, {_gb(lv['bytes'])}, tags "
                     f"{lv['tags']}), made by {who}, not by the driver", t, (name,), (op_id,))
            return
        if lv.get("snapshots"):
            self.add("origin_removed", lv["uuid"],
                     f"{where} removed volume {name} while it had snapshots "
                     f"{lv['snapshots']}", t, (name, *lv["snapshots"]), (op_id,))
        op = self.op(op_id)
        creator = history.created_by if history else None
        asked = op is not None and op.name == name and (
            (op.kind == "delete" and is_volume(lv))
            or (op.kind == "delete_snapshot" and not is_volume(lv)))
        if not asked and (op_id is None or op_id != creator):
            # judged at the end (check_outcomes): the driver may finish, in a later
            # request of the same process, the clean-up of a failed request's LV
            self.removed_for_others.append((lv["uuid"], name, op_id, creator, where, t))

    def _change(self, change: dict[str, Any], op_id: Any, by_driver: bool, where: str,
                t: float) -> None:
        history = self.history.get(change["uuid"])
        before, after = change["before"], change["after"]
        if history is not None:
            history.sizes.append((t, after["bytes"]))
            history.names.append((t, after["name"]))
            history.tags, history.origin = after["tags"], after.get("origin")
        if not by_driver or after["bytes"] <= before["bytes"]:
            return
        op = self.op(op_id)
        asked = op is not None and op.kind == "extend" and op.name == after["name"]
        own = history is not None and history.created_by == op_id and op_id is not None
        if not (asked or own):
            self.add("wrong_resize", change["uuid"],
                     f"{where} grew {after['name']} from {_gb(before['bytes'])} to "
                     f"{_gb(after['bytes'])}", t, (after["name"],), (op_id,))

    def _operator_added(self, since: float, at: float, kind: str) -> int:
        """Bytes of the operator's LVs of ``kind`` made after ``since``, alive at ``at``."""
        return sum(h.bytes_at(at) for h in self.operator_lvs
                   if h.kind == kind and h.created_t > since and h.alive_at(at + 1e-9)
                   and (kind != "thin" or not h.origin))

    def _caps(self, rec: dict[str, Any], read_t: float | None) -> None:
        """The cap rules for one driver mutation. The driver cannot see what the operator
        did after the read its admission used (``read_t``; the request's start if it
        made none; any time if unknown): those LVs are taken off before comparing."""
        before, after = rec["totals_before"], rec["totals_after"]
        where, t = rec.pop("where"), rec["t"]
        if read_t is None:
            start = self.starts.get(rec["op"])
            if start is None:  # not a planned request (the probe): the operator had stopped
                read_t = t
            elif rec["op"] in self.ends:  # a request that made no admission read
                read_t = start["t"]
            else:  # killed: its read may be from any time before
                read_t = float("-inf")
        cap = self.limits.cap_thin_bytes
        thin_after = after["thin"] - self._operator_added(read_t, t, "thin")
        if after["thin"] > before["thin"] and thin_after > cap:
            names = tuple(lv["name"] for lv in rec["created"] + rec["removed"]) + tuple(
                c["after"]["name"] for c in rec["changed"])
            self.add("cap_thin", (rec["op"], rec["seq"]),
                     f"{where} took thin provisioned from {_gb(before['thin'])} to "
                     f"{_gb(after['thin'])} ({_gb(thin_after)} without the operator's LVs "
                     f"made since its admission read), above the cap {_gb(cap)}", t, names,
                     (rec["op"],))
        reserve = self.limits.thick_reserved_bytes
        free_after = after["vg_free"] + self._operator_added(read_t, t, "linear")
        if after["linear"] > before["linear"] and free_after < reserve:
            self.add("cap_thick", (rec["op"], rec["seq"]),
                     f"{where} left {_gb(free_after)} free in the VG (the operator's "
                     f"linear LVs made since its admission read given back), less than the "
                     f"thick pool's reserve {_gb(reserve)}", t,
                     tuple(lv["name"] for lv in rec["created"]), (rec["op"],))

    def flush(self) -> None:
        """Apply every waiting record (the end: killed requests never report)."""
        self.feed([], horizon=None)
        for op_id, pending in list(self._caps_waiting.items()):
            for rec in pending:
                self._caps(rec, self.ends.get(op_id, {}).get("read_t"))
        self._caps_waiting.clear()

    # -- the state itself -------------------------------------------------------------------

    def snapshot(self, lvs: dict[str, dict[str, Any]], operator_lvs: dict[str, str | None],
                 t: float) -> None:
        """State rules on one read of the VG; ``operator_lvs``: name -> uuid (None: unknown)."""
        names = {rec["name"] for rec in lvs.values()}
        for name, uuid in operator_lvs.items():
            if (uuid not in lvs) if uuid else (name not in names):
                self.add("operator_lost", uuid or name,
                         f"the operator's LV {name} is gone; the operator did not remove it",
                         t, (name,))
        thin_driver = 0
        for uuid, rec in lvs.items():
            # on the simulator origin_removed says who removed the origin (the operator
            # may remove its own LV that the driver snapshotted); real LVM cannot tell
            if self.mode == "real" and rec["kind"] == "thin" and \
                    SNAPSHOT_TAG in rec["tags"] and not rec["origin"]:
                self.add("orphan_snapshot", uuid,
                         f"snapshot {rec['name']} lost its origin (LVM forgot it when the "
                         f"origin was removed)", t, (rec["name"],))
            if rec["kind"] == "thin" and is_driver_tagged(rec["tags"]) and is_volume(rec):
                thin_driver += rec["bytes"]
        if thin_driver > self.limits.cap_thin_bytes:
            self.add("cap_thin", "state",
                     f"the driver's own thin volumes provision {_gb(thin_driver)}, above "
                     f"the cap {_gb(self.limits.cap_thin_bytes)}", t)
