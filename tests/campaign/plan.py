"""The campaign's operations: a deterministic plan per seed, dealt to worker threads.

The plan is made sequentially from a rough model of what exists (names
planned created and not yet planned deleted, and their GiB, kept under a
budget so that most requests find a pool with room and some find it full).
Each volume and its snapshots and copies belong to one thread (a client
working on its own volumes in order), so a follow-up never overtakes its
create and nothing leaks by accident. The races are deliberate: a
duplicate create of the same name from another process, an extend from
another process against the owner's delete, a retried create right after
its original, requests naming the operator's LVs, and everything sharing
the pool's capacity, the admission lock and the faults.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Any

#: every kind of operation, with its weight in the mix
WEIGHTS: dict[str, int] = {
    "create_thin": 20, "create_thick": 7, "extend": 12, "delete": 13, "snapshot": 8,
    "delete_snapshot": 7, "clone": 5, "from_snapshot": 4, "stats": 10,
    "retry": 4, "duplicate": 3, "extend_vs_delete": 3, "foreign": 4,
}
#: the operations that make an LV named ``name``
CREATES = frozenset({"create_thin", "create_thick", "snapshot", "clone", "from_snapshot"})
#: the operations that remove the LV named ``name``
DELETES = frozenset({"delete", "delete_snapshot"})
#: the operations that make a volume (snapshots are not volumes)
VOLUME_CREATES = CREATES - {"snapshot"}
THIN_SIZES_GB = (1, 1, 2, 2, 3, 4, 6)
THICK_SIZES_GB = (1, 1, 2, 3)
MAX_SNAPSHOTS = 14
PRESSURE_PERIOD = 500


@dataclass(frozen=True, slots=True)
class Op:
    """One request to the driver: what, on which name, from which source, how big."""

    id: int
    kind: str
    name: str = ""
    source: str = ""
    size_gb: int = 0
    grow_gb: int = 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in ("", 0)}


def operator_name(index: int) -> str:
    """The name the operator gives its ``index``-th LV (driver names never look like it)."""
    return f"opr{index}"


@dataclass
class _Volume:
    thin: bool
    size_gb: int
    queues: list[int]   # the owner first, then any queue that may also create it


class _Planner:
    def __init__(self, seed: int, total: int, queues: int, thin_gb: float, thick_gb: float):
        self.rng = random.Random(f"plan-{seed}")
        self.total = total
        self.queues: list[list[Op]] = [[] for _ in range(queues)]
        self.budget = {True: thin_gb, False: thick_gb}
        self.next_id = 0
        self.volumes: dict[str, _Volume] = {}
        self.snapshots: dict[str, tuple[str, int]] = {}  # name -> (origin, its queue)
        self.operator_names = max(8, total // 40)

    def add(self, queue: int, kind: str, **fields: Any) -> Op:
        op = Op(self.next_id, kind, **fields)
        self.next_id += 1
        self.queues[queue % len(self.queues)].append(op)
        return op

    def new_queue(self) -> int:
        """The least loaded queue takes the next new volume (or stats request)."""
        return min(range(len(self.queues)), key=lambda q: (len(self.queues[q]), q))

    def other_queue(self, queue: int) -> int:
        """A queue of another process, as far as there is one."""
        return (queue + max(1, len(self.queues) // 2)) % len(self.queues)

    def pick(self, names: list[str]) -> str | None:
        return self.rng.choice(names[-24:]) if names else None  # recent ones, mostly

    def used_gb(self, thin: bool) -> int:
        return sum(v.size_gb for v in self.volumes.values() if v.thin == thin)

    def room(self, thin: bool, size: int) -> bool:
        """Whether the model keeps ``size`` more GiB under the budget; if not, a delete
        is planned first. The budget swings between half and 110% of the pool's room
        over ``PRESSURE_PERIOD`` requests: stretches with room, stretches at the cap."""
        swing = 0.8 + 0.3 * math.sin(2 * math.pi * self.next_id / PRESSURE_PERIOD)
        return self.used_gb(thin) + size <= self.budget[thin] * swing

    def plan(self) -> list[list[Op]]:
        kinds = list(WEIGHTS)
        weights = [WEIGHTS[k] for k in kinds]
        if not self.budget[False]:
            weights[kinds.index("create_thick")] = 0
        while self.next_id < self.total:
            kind = self.rng.choices(kinds, weights)[0]
            if len(self.snapshots) > MAX_SNAPSHOTS and kind == "snapshot":
                kind = "delete_snapshot"
            getattr(self, f"_{kind}")()
        return self.queues

    # -- one method per kind --------------------------------------------------

    def _create(self, thin: bool, note: str = "") -> Op:
        size = self.rng.choice(THIN_SIZES_GB if thin else THICK_SIZES_GB)
        if not self.room(thin, size):
            self._delete(thin)
        queue = self.new_queue()
        name = f"{'v' if thin else 'k'}{self.next_id}"
        self.volumes[name] = _Volume(thin, size, [queue])
        return self.add(queue, "create_thin" if thin else "create_thick", name=name,
                        size_gb=size, note=note)

    def _create_thin(self) -> None:
        self._create(True)

    def _create_thick(self) -> None:
        self._create(False)

    def _extend(self) -> None:
        name = self.pick(list(self.volumes))
        if name is None:
            return self._create_thin()
        volume = self.volumes[name]
        grow = self.rng.choice((1, 1, 2, 3))
        if not self.room(volume.thin, grow):
            return self._delete(volume.thin)
        volume.size_gb += grow
        self.add(volume.queues[0], "extend", name=name, grow_gb=grow)

    def _delete(self, thin: bool | None = None, name: str | None = None,
                note: str = "") -> None:
        name = name or self.pick([n for n, v in self.volumes.items() if thin in (None, v.thin)])
        if name is None:
            return self._stats()
        volume = self.volumes.pop(name)
        snapshots = [(s, q) for s, (origin, q) in self.snapshots.items() if origin == name]
        first = self.rng.random() < 0.6  # most clients delete the snapshots first
        if snapshots and not first:  # the others are refused (a volume with snapshots)
            self.add(volume.queues[0], "delete", name=name, note="has snapshots")
        for snap, queue in snapshots:
            self.add(queue, "delete_snapshot", name=snap)
            del self.snapshots[snap]
        for queue in volume.queues:  # whoever may have made it deletes it
            self.add(queue, "delete", name=name, note=note)

    def _snapshot(self) -> None:
        origin = self.pick([n for n, v in self.volumes.items() if v.thin])
        if origin is None:
            return self._create_thin()
        name = f"s{self.next_id}"
        queue = self.volumes[origin].queues[0]
        self.snapshots[name] = (origin, queue)
        self.add(queue, "snapshot", name=name, source=origin)

    def _delete_snapshot(self) -> None:
        name = self.pick(list(self.snapshots))
        if name is None:
            return self._snapshot()
        _, queue = self.snapshots.pop(name)
        self.add(queue, "delete_snapshot", name=name)

    def _copy(self, kind: str, source: str | None, queue: int, size: int,
              prefix: str) -> None:
        if source is None:
            return self._create_thin()
        grow = self.rng.choice((0, 0, 1))
        size += grow
        if not self.room(True, size):
            return self._delete(True)
        name = f"{prefix}{self.next_id}"
        self.volumes[name] = _Volume(True, size, [queue])
        self.add(queue, kind, name=name, source=source, grow_gb=grow)

    def _clone(self) -> None:
        source = self.pick([n for n, v in self.volumes.items() if v.thin])
        volume = self.volumes.get(source or "")
        self._copy("clone", source, volume.queues[0] if volume else 0,
                   volume.size_gb if volume else 0, "c")

    def _from_snapshot(self) -> None:
        snapshot = self.pick(list(self.snapshots))
        origin, queue = self.snapshots.get(snapshot or "", ("", 0))
        size = self.volumes[origin].size_gb if origin in self.volumes else 1
        self._copy("from_snapshot", snapshot, queue, size, "f")

    def _stats(self) -> None:
        self.add(self.new_queue(), "stats")

    def _retry(self) -> None:
        """A create, then the same create again from the same client."""
        first = self._create(self.rng.random() < 0.8)
        self.add(self.volumes[first.name].queues[0], first.kind, name=first.name,
                 size_gb=first.size_gb, note="retry")

    def _duplicate(self) -> None:
        """Two clients in different processes create the same name at about the same time."""
        first = self._create(True)
        volume = self.volumes[first.name]
        other = self.other_queue(volume.queues[0])
        volume.queues.append(other)
        self.add(other, "create_thin", name=first.name,
                 size_gb=self.rng.choice(THIN_SIZES_GB), note="duplicate")

    def _extend_vs_delete(self) -> None:
        """Another process extends a volume while its owner deletes it."""
        name = self.pick(list(self.volumes))
        if name is None:
            return self._create_thin()
        owner = self.volumes[name].queues[0]
        self.add(self.other_queue(owner), "extend", name=name, grow_gb=1,
                 note="races a delete")
        self._delete(name=name, note="races an extend")

    def _foreign(self) -> None:
        """Requests naming LVs the driver did not make: the operator's."""
        name = operator_name(self.rng.randrange(self.operator_names))
        kind = self.rng.choice(("delete", "delete", "delete_snapshot", "extend", "clone",
                                "create_thin"))
        queue = self.new_queue()
        if kind == "clone":
            clone = f"c{self.next_id}"
            self.volumes[clone] = _Volume(True, 1, [queue])
            self.add(queue, kind, name=clone, source=name, note="foreign")
        elif kind == "create_thin":  # the driver takes a name the operator may want
            self.volumes.setdefault(name, _Volume(True, 1, [])).queues.append(queue)
            self.add(queue, kind, name=name, size_gb=1, note="foreign")
        else:
            self.add(queue, kind, name=name, grow_gb=1 if kind == "extend" else 0,
                     note="foreign")


def make_plan(seed: int, ops: int, procs: int, threads: int, *, thin_budget_gb: float,
              thick_budget_gb: float) -> list[list[Op]]:
    """``procs * threads`` queues of operations, ``ops`` in all (give or take a pair);
    queue ``p * threads + t`` is thread ``t`` of process ``p``. The budgets bound the
    GiB the plan's own model keeps alive per provisioning type (0: no thick volumes)."""
    if ops < 1 or procs < 1 or threads < 1:
        raise ValueError("ops, procs and threads must be at least 1")
    return _Planner(seed, ops, procs * threads, thin_budget_gb, thick_budget_gb).plan()


def ops_by_id(plan: list[list[Op]]) -> dict[int, Op]:
    return {op.id: op for queue in plan for op in queue}


def planned_names(plan: list[list[Op]]) -> list[tuple[int, str]]:
    """(id, name) of the requests that create a volume, in plan order (the operator
    squats some of these names just before the driver gets to them)."""
    ops = sorted((op for queue in plan for op in queue), key=lambda op: op.id)
    return [(op.id, op.name) for op in ops
            if op.kind in VOLUME_CREATES and not op.name.startswith("opr")]
