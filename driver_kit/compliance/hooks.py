"""The hook contract: how the harness reaches the backend without going through the driver.

A vendor gives ``ComplianceHooks``: a *truth* hook that says what the backend
itself reports (its own API, its own units), hooks that change the backend
behind the driver's back (volumes made and resized out of band), and hooks that
break it (unreadable, a failing volume listing, slow answers). The harness
compares every report with the truth, so a driver cannot grade its own work.

Hooks are found, nearest first, on each class of the driver's MRO: hooks
registered for it with ``register_hooks``, its ``COMPLIANCE_HOOKS`` class
attribute, then the ``COMPLIANCE_HOOKS`` of the module that defines it. Fields
merge (a subclass may replace one hook and inherit the rest), so a vendor's
subclass in another module keeps its base's hooks. Hooks given explicitly to a
run (``--hooks``, ``Runner(hooks=...)``) are used as they are, instead.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Iterable, Mapping

__all__ = ["BackendTruth", "ComplianceHooks", "GUIDE", "HOOK_ARGUMENTS", "PoolTruth",
           "REQUIRED_HOOKS", "VolumeTruth", "find_hooks", "register_hooks"]

#: where a vendor reads the rules and the hook contract
GUIDE = "docs/writing-a-driver.md"


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolTruth:
    """One pool as the backend's own API describes it, in bytes.

    Pools naming the same ``capacity_group`` draw on one physical capacity (one
    disk group): each then reports that capacity, its free space and every
    volume of the group. ``used_bytes`` is what the pool physically holds (the
    report's ``total_used_capacity_gb``); ``free_bytes`` is the backend's own free
    figure when it is not ``capacity_bytes - used_bytes`` (a thin pool whose
    metadata bounds it, a directory on a file system others use too).
    The backend gives each volume ``allocation_unit_bytes`` at a time. A pool of the
    array that this backend is not configured to serve is given with ``served=False``:
    it is not in the report, but its volumes count for the pools of its capacity group.
    """

    pool_name: str
    capacity_bytes: int
    used_bytes: int
    free_bytes: int | None = None
    capacity_group: str | None = None
    allocation_unit_bytes: int = 1
    served: bool = True

    @property
    def group(self) -> str:
        """The capacity group (the pool's own name when it shares nothing)."""
        return self.capacity_group or f"pool:{self.pool_name}"

    @property
    def available_bytes(self) -> int:
        """What the report's free capacity must say, before rounding."""
        if self.free_bytes is not None:
            return self.free_bytes
        return max(0, self.capacity_bytes - self.used_bytes)

    def allocated_bytes(self, size_bytes: int) -> int:
        """What a volume of ``size_bytes`` takes: whole allocation units."""
        unit = self.allocation_unit_bytes
        return -(-size_bytes // unit) * unit


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeTruth:
    """One volume or snapshot as the backend lists it; ``snapshot_of`` names a
    snapshot's origin ('' when the backend does not record it; None for a volume,
    clones and copies included)."""

    name: str
    pool_name: str
    size_bytes: int
    thin: bool
    snapshot_of: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendTruth:
    """Every pool and every volume and snapshot on the backend, read at one instant."""

    pools: tuple[PoolTruth, ...]
    volumes: tuple[VolumeTruth, ...] = ()

    def pool(self, name: str) -> PoolTruth | None:
        return next((p for p in self.pools if p.pool_name == name), None)

    def volume(self, name: str) -> VolumeTruth | None:
        return next((v for v in self.volumes if v.name == name), None)

    def pool_volumes(self, pool_name: str) -> list[VolumeTruth]:
        """The volumes (snapshots apart) on ``pool_name`` itself."""
        return [v for v in self.volumes if v.pool_name == pool_name and v.snapshot_of is None]

    def snapshot_bytes(self, pool_name: str) -> int:
        """The virtual sizes of the snapshots on ``pool_name`` (the kit's
        ``snapshot_capacity_gb``, reported apart from provisioned)."""
        return sum(v.size_bytes for v in self.volumes
                   if v.pool_name == pool_name and v.snapshot_of is not None)

    def group_volumes(self, pool_name: str) -> list[VolumeTruth]:
        """The volumes (snapshots apart) on every pool of ``pool_name``'s capacity group."""
        pool = self.pool(pool_name)
        if pool is None:
            return []
        members = {p.pool_name for p in self.pools if p.group == pool.group}
        return [v for v in self.volumes if v.pool_name in members and v.snapshot_of is None]

    def provisioned_bytes(self, pool_name: str) -> int:
        """The Queens spec's provisioned capacity of a pool: every volume of its capacity
        group at its allocated size, made by the driver or not, snapshots excluded."""
        units = {p.pool_name: p for p in self.pools}
        return sum(units[v.pool_name].allocated_bytes(v.size_bytes)
                   for v in self.group_volumes(pool_name))


@dataclass(frozen=True, slots=True, kw_only=True)
class ComplianceHooks:
    """The vendor's hooks; each gets the live driver instance a check is using.

    Hooks in ``REQUIRED_HOOKS`` are needed to certify a driver: without one, the
    must check ``hooks.required`` fails saying what to add (and the checks that
    need it skip, pointing there). The others are optional.
    """

    #: what the backend says, read through its own API (never the driver's stats path)
    read_truth: Callable[[Any], BackendTruth] | None = None
    #: create a ``size_gb`` GiB volume ``name`` in pool ``pool_name`` without the driver
    create_out_of_band: Callable[[Any, str, int, str], None] | None = None
    #: grow volume ``name`` to ``new_size_gb`` GiB without the driver (may be fractional,
    #: such as 2.5: the backend rounds it up to its allocation unit)
    resize_out_of_band: Callable[[Any, str, float], None] | None = None
    #: delete what ``create_out_of_band`` made (default: ``driver.delete_volume(name)``)
    delete_out_of_band: Callable[[Any, str], None] | None = None
    #: make the backend unreadable for this driver (array unplugged, directory gone)
    break_backend: Callable[[Any], None] | None = None
    #: make the backend's volume listing fail while the rest of it answers
    break_listing: Callable[[Any], None] | None = None
    #: make every backend read of this driver take ``delay_s`` seconds longer
    slow_backend: Callable[[Any, float], None] | None = None
    #: undo ``break_backend``, ``break_listing`` and ``slow_backend``
    repair_backend: Callable[[Any], None] | None = None
    #: how many requests this driver has sent to its backend so far (proves a cache)
    backend_calls: Callable[[Any], int] | None = None
    #: write ``data`` at ``offset_bytes`` into volume ``name`` through the backend's data
    #: path, as a user of the volume would (not through the driver)
    write_data: Callable[[Any, str, int, bytes], None] | None = None
    #: read ``length`` bytes at ``offset_bytes`` of volume or snapshot ``name`` from the
    #: backend (holes read as zeros)
    read_data: Callable[[Any, str, int, int], bytes] | None = None
    #: make the backend's next write for this driver (a create, extend or snapshot)
    #: fail once it has begun; ``repair_backend`` disarms it when nothing wrote
    fail_next_write: Callable[[Any], None] | None = None
    #: put ``name`` on pool ``pool_name``: something that takes space there but is not a
    #: volume (a file of another application, a half-made upload)
    create_stray: Callable[[Any, str, str], None] | None = None
    #: remove what ``create_stray`` made
    delete_stray: Callable[[Any, str], None] | None = None

    def available(self) -> dict[str, bool]:
        """Which hooks are set."""
        return {f.name: getattr(self, f.name) is not None for f in fields(self)}

    def missing(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` that are not set."""
        return [name for name in names if getattr(self, name) is None]

    def bad_signatures(self) -> dict[str, str]:
        """Each set hook that cannot be called with its arguments, and why."""
        bad = {}
        for name, arguments in HOOK_ARGUMENTS.items():
            hook = getattr(self, name)
            if hook is None:
                continue
            try:
                signature = inspect.signature(hook)
            except (TypeError, ValueError):
                continue  # a builtin or C callable: nothing to read, trusted
            try:
                signature.bind(*arguments)
            except TypeError as exc:
                bad[name] = (f"{name}{signature} cannot be called as "
                             f"{name}({', '.join(arguments)}): {exc}")
        return bad

    def merged(self, fallback: "ComplianceHooks") -> "ComplianceHooks":
        """These hooks, with ``fallback``'s where these have none."""
        return replace(fallback, **{f.name: getattr(self, f.name) for f in fields(self)
                                    if getattr(self, f.name) is not None})


#: the hooks a driver needs to be certified
REQUIRED_HOOKS: tuple[str, ...] = ("read_truth", "create_out_of_band", "resize_out_of_band",
                                   "break_backend", "break_listing", "slow_backend",
                                   "repair_backend")

#: the arguments the harness calls each hook with, in order
HOOK_ARGUMENTS: Mapping[str, tuple[str, ...]] = {
    "read_truth": ("driver",),
    "create_out_of_band": ("driver", "name", "size_gb", "pool_name"),
    "resize_out_of_band": ("driver", "name", "new_size_gb"),
    "delete_out_of_band": ("driver", "name"),
    "break_backend": ("driver",),
    "break_listing": ("driver",),
    "slow_backend": ("driver", "delay_s"),
    "repair_backend": ("driver",),
    "backend_calls": ("driver",),
    "write_data": ("driver", "name", "offset_bytes", "data"),
    "read_data": ("driver", "name", "offset_bytes", "length"),
    "fail_next_write": ("driver",),
    "create_stray": ("driver", "name", "pool_name"),
    "delete_stray": ("driver", "name"),
}

_REGISTERED: dict[type, ComplianceHooks] = {}


def register_hooks(driver_class: type, hooks: ComplianceHooks) -> None:
    """Give ``driver_class`` (and its subclasses, wherever they are defined) these hooks."""
    if not isinstance(driver_class, type):
        raise TypeError(f"hooks are registered for a driver class, got {driver_class!r}")
    if not isinstance(hooks, ComplianceHooks):
        raise TypeError(f"expected ComplianceHooks, got {hooks!r}")
    _REGISTERED[driver_class] = hooks


def _declared(cls: type) -> Iterable[Any]:
    yield _REGISTERED.get(cls)
    yield cls.__dict__.get("COMPLIANCE_HOOKS")
    yield getattr(sys.modules.get(cls.__module__), "COMPLIANCE_HOOKS", None)


def find_hooks(driver_class: type) -> tuple[ComplianceHooks, Mapping[str, str]]:
    """The hooks of ``driver_class`` through its MRO, and where each hook was found."""
    found = ComplianceHooks()
    origin: dict[str, str] = {}
    for cls in driver_class.__mro__:
        for hooks in _declared(cls):
            if not isinstance(hooks, ComplianceHooks):
                continue
            for name, present in hooks.available().items():
                if present and name not in origin:
                    origin[name] = f"{cls.__module__}.{cls.__qualname__}"
            found = found.merged(hooks)
    return found, origin
