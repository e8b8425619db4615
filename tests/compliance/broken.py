"""Deliberately broken drivers, each with one realistic bug, and what the harness must say
about each: ``BROKEN`` maps a bug to the run that shows it and the exact set of checks
that must fail (everything else passes or is skipped).

Together they make every check of the catalogue fail at least once (the proof each
check can fail), and they cover every kind of bug real vendor drivers were seen to have.
"""

from __future__ import annotations

import copy
import dataclasses
import multiprocessing
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from contrib.shared_pool_driver import POOLS, SharedPoolDriver
from contrib.sparse_file_driver import SparseFileDriver
from driver_kit import (AlreadyExists, BackendError, CapacityExceeded, GiB, InvalidSize, MiB,
                        VolumeInfo, VolumeNotFound, admit, load_backend_config)
from driver_kit.compliance import ComplianceHooks, DriverSpec
from tests.compliance import drivers
from tests.compliance.drivers import (HAND_WRITTEN_HOOKS, HAND_WRITTEN_OPERATIONS_HOOKS,
                                      SNAP_MEMORY_HOOKS, HandWrittenOperations,
                                      HandWrittenReport, SnapMemoryDriver, memory_factory,
                                      rounds_free_up, sparse_config)

__all__ = ["BROKEN", "Broken"]


@dataclass(frozen=True, slots=True)
class Broken:
    """One broken driver: the bug, the checks it must fail, the run_checks() arguments,
    and the checks that cannot reach a verdict on it (errored)."""

    bug: str
    fails: frozenset[str]
    harness: Callable[[Path], dict[str, Any]]
    errors: frozenset[str] = frozenset()


# ------------------------------------------------------------------ report written by hand

def _report_only(mutate: Callable[[dict[str, Any]], None], *,
                 keep_factors: bool = False) -> Callable[[Path], dict[str, Any]]:
    return lambda tmp_path: {"factory": lambda: HandWrittenReport(
        mutate, keep_factors=keep_factors), "hooks": HAND_WRITTEN_HOOKS}


class HandWrittenStats(HandWrittenOperations):
    """The memory driver's operations behind a report its author computes by hand from
    the array (``figures(inner, pool)`` edits each pool), as drivers without the kit do."""

    def __init__(self, inner: Any, figures: Callable[[Any, dict[str, Any]], None]) -> None:
        super().__init__(inner)
        self._figures = figures

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        report = super().get_volume_stats(refresh=refresh)
        for pool in report["pools"]:
            if pool.get("backend_state") == "up":
                self._figures(self.inner, pool)
        return report


def _hand_written(figures: Callable[[Any, dict[str, Any]], None], *, used_bytes: int = 0,
                  **config: Any) -> Callable[[Path], dict[str, Any]]:
    def harness(tmp_path: Path) -> dict[str, Any]:
        make = memory_factory(tmp_path, **config)

        def factory() -> HandWrittenStats:
            inner = make()
            inner.used_bytes = used_bytes
            return HandWrittenStats(inner, figures)
        return {"factory": factory, "hooks": HAND_WRITTEN_OPERATIONS_HOOKS}
    return harness


def _unrounded_free(inner: Any, pool: dict[str, Any]) -> None:
    pool["free_capacity_gb"] = (inner.total_bytes - inner.used_bytes) / GiB


def _free_total_minus_provisioned(inner: Any, pool: dict[str, Any]) -> None:
    pool["free_capacity_gb"] = round(pool["total_capacity_gb"]
                                     - pool["provisioned_capacity_gb"], 2)


def _auto_as_20(inner: Any, pool: dict[str, Any]) -> None:
    pool["max_over_subscription_ratio"] = 20.0


class SlowReportedUnknown(HandWrittenStats):
    """Waits stats_timeout for a slow array, then keeps the pool up with free 'unknown'."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner, lambda inner, pool: None)
        self._last: dict[str, Any] | None = None

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        if self.inner.delay_s > self.configuration.stats_timeout and self._last:
            report = copy.deepcopy(self._last)
            for pool in report["pools"]:
                pool["free_capacity_gb"] = "unknown"
            return report
        self._last = super().get_volume_stats(refresh=refresh)
        return self._last


# ------------------------------------------------------------------ memory arrays

class DecimalGigabytes(SnapMemoryDriver):
    """The array's API says capacity in GB (10^9 bytes); the driver takes them for GiB."""

    def backend_read_pools(self) -> list[Any]:
        return [dataclasses.replace(f, total_bytes=round(f.total_bytes / 10 ** 9 * GiB),
                                    free_bytes=round(f.free_bytes / 10 ** 9 * GiB))
                for f in super().backend_read_pools()]


class TotalTimesRatio(SnapMemoryDriver):
    """Reports the over-subscribed size as total: physical capacity x ratio."""

    def backend_read_pools(self) -> list[Any]:
        ratio = float(self.configuration.max_over_subscription_ratio)
        return [dataclasses.replace(f, total_bytes=int(f.total_bytes * ratio))
                for f in super().backend_read_pools()]


class ReservedTwice(SnapMemoryDriver):
    """Takes reserved_percentage off total and free itself (the kit takes it off again)."""

    def backend_read_pools(self) -> list[Any]:
        keep = 100 - self.configuration.reserved_percentage
        return [dataclasses.replace(f, total_bytes=f.total_bytes * keep // 100,
                                    free_bytes=f.free_bytes * keep // 100)
                for f in super().backend_read_pools()]


class TotalMinusMetadata(SnapMemoryDriver):
    """Leaves the array's 5 GiB metadata area out of total (free is the array's)."""

    def backend_read_pools(self) -> list[Any]:
        return [dataclasses.replace(f, total_bytes=f.total_bytes - 5 * GiB)
                for f in super().backend_read_pools()]


class FreeInWholeGiB(SnapMemoryDriver):
    """Rounds free down to whole GiB (the array's GUI shows no decimals)."""

    def backend_read_pools(self) -> list[Any]:
        return [dataclasses.replace(f, free_bytes=f.free_bytes // GiB * GiB)
                for f in super().backend_read_pools()]


class FourthSnapshotCounted(SnapMemoryDriver):
    """Its array's API lists at most 3 snapshots of a volume as snapshots; later ones
    come as plain volumes, counted as provisioned."""

    def backend_read_pools(self) -> list[Any]:
        extra, seen = 0, {}
        for origin, size in self.snapshots.values():
            seen[origin] = seen.get(origin, 0) + 1
            extra += size if seen[origin] > 3 else 0
        return [dataclasses.replace(f, provisioned_bytes=f.provisioned_bytes + extra * GiB)
                for f in super().backend_read_pools()]


class SnapshotsAsVolumes(SnapMemoryDriver):
    """Counts snapshots in total_volumes."""

    def backend_read_pools(self) -> list[Any]:
        return [dataclasses.replace(f, total_volumes=f.total_volumes + len(self.snapshots))
                for f in super().backend_read_pools()]


class KeepsDeletedCounted(SnapMemoryDriver):
    """Deleted volumes go to a recycle bin that still counts as provisioned."""

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        self.trash: dict[str, int] = {}

    def backend_delete_volume(self, name: str) -> None:
        if name not in self.volumes:
            raise VolumeNotFound(name)
        self.trash[name] = self.volumes.pop(name)

    def backend_read_pools(self) -> list[Any]:
        return [dataclasses.replace(f, provisioned_bytes=f.provisioned_bytes
                                    + sum(self.trash.values()) * GiB)
                for f in super().backend_read_pools()]


class CountsSnapshots(SnapMemoryDriver):
    """Adds snapshots to provisioned capacity."""

    def backend_read_pools(self) -> list[Any]:
        return [dataclasses.replace(f, provisioned_bytes=f.provisioned_bytes + f.snapshot_bytes)
                for f in super().backend_read_pools()]


class CountsOnlyItsOwn(SnapMemoryDriver):
    """Counts provisioned from its own ledger, so volumes made by others are missed."""

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        self.mine: set[str] = set()

    def backend_create_volume(self, name: str, size_gb: int, **kwargs: Any) -> None:
        super().backend_create_volume(name, size_gb, **kwargs)
        self.mine.add(name)

    def backend_read_pools(self) -> list[Any]:
        ledger = sum(size for name, size in self.volumes.items() if name in self.mine)
        return [dataclasses.replace(f, provisioned_bytes=ledger * GiB)
                for f in super().backend_read_pools()]


class SizesFromItsLedger(SnapMemoryDriver):
    """Lists the array's volumes but takes their sizes from what it asked for, so a
    volume resized outside the driver keeps its old size."""

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        self.sizes: dict[str, int] = {}

    def backend_read_pools(self) -> list[Any]:
        for name, size in self.volumes.items():
            self.sizes.setdefault(name, size)  # first seen: its size then
        ledger = sum(self.sizes.get(name, 0) for name in self.volumes)
        return [dataclasses.replace(f, provisioned_bytes=ledger * GiB)
                for f in super().backend_read_pools()]

    def backend_extend_volume(self, name: str, new_size_gb: int) -> None:
        super().backend_extend_volume(name, new_size_gb)
        self.sizes[name] = new_size_gb


class ListingErrorMeansEmpty(SnapMemoryDriver):
    """Treats a failed volume listing as an empty pool."""

    def backend_read_pools(self) -> list[Any]:
        if not self.listing_broken:
            return super().backend_read_pools()
        self.listing_broken = False
        try:
            facts = super().backend_read_pools()
        finally:
            self.listing_broken = True
        return [dataclasses.replace(f, provisioned_bytes=0, total_volumes=0) for f in facts]


class ServesStaleFacts(SnapMemoryDriver):
    """Hides an unreachable array behind the last good read."""

    _last: list[Any] | None = None

    def backend_read_pools(self) -> list[Any]:
        try:
            self._last = super().backend_read_pools()
        except ConnectionError:
            if self._last is None:
                raise
        return self._last


class AlwaysRefreshes(SnapMemoryDriver):
    """Reads the backend on every call, refresh or not."""

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        return super().get_volume_stats(refresh=True)


class RefusesWithWrongError(SnapMemoryDriver):
    """Pre-checks space itself and refuses with a generic backend error."""

    def create_volume(self, name: str, size_gb: int, **kwargs: Any) -> VolumeInfo:
        pool = self.get_volume_stats(refresh=True)["pools"][0]
        if size_gb > pool["max_volume_size_gb"]:
            raise BackendError(f"not enough space for {size_gb} GiB")
        return super().create_volume(name, size_gb, **kwargs)


class ExtendSkipsAdmission(SnapMemoryDriver):
    """Grows volumes without asking admission (the create path is fine)."""

    def extend_volume(self, name: str, new_size_gb: int) -> VolumeInfo:
        volume = self.backend_find_volume(name)
        if volume is None:
            raise VolumeNotFound(name)
        if new_size_gb <= volume.size_gb:
            raise InvalidSize(f"{new_size_gb} GiB does not grow {name}")
        self.backend_extend_volume(name, new_size_gb)
        return dataclasses.replace(volume, size_gb=new_size_gb)


class SnapshotSkipsAdmission(SnapMemoryDriver):
    """Takes snapshots straight on the array ("they take no space")."""

    def create_snapshot(self, name: str, volume_name: str) -> VolumeInfo:
        volume = self.backend_find_volume(volume_name)
        if volume is None:
            raise VolumeNotFound(volume_name)
        self.backend_create_snapshot(name, volume)
        return dataclasses.replace(volume, name=name)


class CopySkipsAdmission(SnapMemoryDriver):
    """Clones and copies snapshots straight on the array ("a copy is not a new volume")."""

    def create_cloned_volume(self, name: str, source_name: str,
                             size_gb: int | None = None) -> VolumeInfo:
        source = self.backend_find_volume(source_name)
        self.backend_clone_volume(name, source, size_gb or source.size_gb)
        return dataclasses.replace(source, name=name, size_gb=size_gb or source.size_gb)

    def create_volume_from_snapshot(self, name: str, snapshot_name: str,
                                    size_gb: int | None = None) -> VolumeInfo:
        snapshot = self.backend_find_snapshot(snapshot_name)
        self.backend_create_volume_from_snapshot(name, snapshot, size_gb or snapshot.size_gb)
        return dataclasses.replace(snapshot, name=name)


class CopyKeepsSourceSize(SnapMemoryDriver):
    """Clones and copies snapshots at their source's size, whatever was asked."""

    def backend_clone_volume(self, name: str, source: VolumeInfo, size_gb: int) -> None:
        super().backend_clone_volume(name, source, source.size_gb)

    def backend_create_volume_from_snapshot(self, name: str, snapshot: VolumeInfo,
                                            size_gb: int) -> None:
        super().backend_create_volume_from_snapshot(name, snapshot, snapshot.size_gb)


class SmallCreatesSkipAdmission(SnapMemoryDriver):
    """A fast path: creates of 4 GiB or less are not worth asking admission about."""

    def create_volume(self, name: str, size_gb: int, **kwargs: Any) -> VolumeInfo:
        if size_gb > 4:
            return super().create_volume(name, size_gb, **kwargs)
        self.backend_create_volume(name, size_gb, pool_name="mem", thin=True)
        self._invalidate()
        return VolumeInfo(name=name, size_gb=size_gb, pool_name="mem", thin=True)


class ExtendsBy(SnapMemoryDriver):
    """Passes the new size to an array call that grows a volume *by* a size."""

    def backend_extend_volume(self, name: str, new_size_gb: int) -> None:
        self.command()
        self.volumes[name] += new_size_gb


class RacyCreate(SnapMemoryDriver):
    """Checks the cap, then creates, with no lock in between (a slow array widens the gap)."""

    def create_volume(self, name: str, size_gb: int, **kwargs: Any) -> VolumeInfo:
        self.validate_name(name)
        pool = self.get_volume_stats(refresh=True)["pools"][0]
        decision = admit(total_capacity=pool["total_capacity_gb"],
                         free_capacity=pool["free_capacity_gb"],
                         provisioned_capacity=pool["provisioned_capacity_gb"],
                         requested=size_gb, thin=True, pool_name="mem",
                         max_over_subscription_ratio=pool["max_over_subscription_ratio"],
                         reserved_percentage=pool["reserved_percentage"])
        if not decision.admitted:
            raise CapacityExceeded(decision)
        time.sleep(0.05)
        self.backend_create_volume(name, size_gb, pool_name="mem", thin=True)
        return VolumeInfo(name=name, size_gb=size_gb, pool_name="mem", thin=True)


class IdempotentCreate(SnapMemoryDriver):
    """Returns the existing volume when a name is taken, hiding the clash."""

    def create_volume(self, name: str, size_gb: int, **kwargs: Any) -> VolumeInfo:
        return self.backend_find_volume(name) or super().create_volume(name, size_gb, **kwargs)


class DeleteMissingRaises(SnapMemoryDriver):
    """Lets VolumeNotFound escape from delete."""

    def delete_volume(self, name: str) -> None:
        self.backend_delete_volume(self.validate_name(name))


class ShrinksOnExtend(SnapMemoryDriver):
    """Treats an extend to a smaller size as a shrink."""

    def extend_volume(self, name: str, new_size_gb: int) -> VolumeInfo:
        volume = self.backend_find_volume(name)
        if volume is not None and new_size_gb < volume.size_gb:
            self.backend_extend_volume(name, new_size_gb)
            return dataclasses.replace(volume, size_gb=new_size_gb)
        return super().extend_volume(name, new_size_gb)


class LeaksFileDescriptors(SnapMemoryDriver):
    """Opens a 'connection' on every backend read and never closes it."""

    def backend_read_pools(self) -> list[Any]:
        drivers.LEAKED_FILES.append(open(os.devnull, "rb"))
        return super().backend_read_pools()


class LeaksChildProcesses(SnapMemoryDriver):
    """Starts a helper process on every create and never waits for it."""

    def backend_create_volume(self, name: str, size_gb: int, **kwargs: Any) -> None:
        super().backend_create_volume(name, size_gb, **kwargs)
        drivers.LEAKED_CHILDREN.append(subprocess.Popen(["sleep", "30"]))


def _facts_edited(name: str, doc: str, edit: Callable[[Any, Any], dict[str, Any]]) -> type:
    """A SnapMemoryDriver whose pool facts get ``edit(driver, facts)``'s fields."""
    def backend_read_pools(self: Any) -> list[Any]:
        return [dataclasses.replace(f, **edit(self, f))
                for f in SnapMemoryDriver.backend_read_pools(self)]
    return type(name, (SnapMemoryDriver,), {"__doc__": doc,
                                            "backend_read_pools": backend_read_pools})


CountsStrays = _facts_edited(
    "CountsStrays", "Counts every object of its pool as a volume, other applications' too.",
    lambda driver, f: {"provisioned_bytes": f.provisioned_bytes
                       + sum(driver.strays.values()) * GiB,
                       "total_volumes": f.total_volumes + len(driver.strays)})
UsedInWholeMiB = _facts_edited(
    "UsedInWholeMiB", "Takes used capacity from an array API giving whole MiB, rounded down.",
    lambda driver, f: {"used_bytes": f.used_bytes // MiB * MiB})
SnapshotCapacityZero = _facts_edited(
    "SnapshotCapacityZero", "Reports no snapshot capacity (its array lists snapshots apart, "
    "in a call it never makes).", lambda driver, f: {"snapshot_bytes": 0})


class ListingTimeoutFromSetup(SnapMemoryDriver):
    """Gives the array's volume listing half of stats_timeout, read once in do_setup, and
    takes a listing that timed out for "no volumes"."""

    def do_setup(self) -> None:
        super().do_setup()
        self.listing_timeout_s = self.configuration.stats_timeout / 2

    def backend_read_pools(self) -> list[Any]:
        if self.delay_s <= self.listing_timeout_s:
            return super().backend_read_pools()
        time.sleep(self.listing_timeout_s)  # the listing gave up: taken for an empty array
        delay, self.delay_s = self.delay_s, 0.0
        try:
            facts = super().backend_read_pools()
        finally:
            self.delay_s = delay
        return [dataclasses.replace(f, provisioned_bytes=0, total_volumes=0) for f in facts]


class SnapshotSharesData(SnapMemoryDriver):
    """A snapshot points at its origin's blocks, with no copy on a later write."""

    def backend_create_snapshot(self, name: str, volume: VolumeInfo) -> None:
        super().backend_create_snapshot(name, volume)
        self.data[name] = self.data.setdefault(volume.name, {})


class LeavesFailedCreate(SnapMemoryDriver):
    """A create the array fails half-way leaves its half-made volume behind."""

    def backend_create_volume(self, name: str, size_gb: int, **kwargs: Any) -> None:
        if name in self.volumes:
            raise AlreadyExists(name)
        self.volumes[name] = size_gb
        self.command()


class FindRaisesKeyError(SnapMemoryDriver):
    """Looks a volume up by indexing the array's table: a missing one raises KeyError."""

    def backend_find_volume(self, name: str) -> VolumeInfo | None:
        return VolumeInfo(name=name, size_gb=self.volumes[name], pool_name="mem", thin=True)


class SnapshotNameReplaced(SnapMemoryDriver):
    """A snapshot under a taken name replaces the old snapshot."""

    def backend_create_snapshot(self, name: str, volume: VolumeInfo) -> None:
        self.snapshots.pop(name, None)
        super().backend_create_snapshot(name, volume)


class DeleteMissingSnapshotRaises(SnapMemoryDriver):
    """Lets SnapshotNotFound escape from delete_snapshot."""

    def delete_snapshot(self, name: str) -> None:
        self.backend_delete_snapshot(self.validate_name(name))


class DeletesAnyName(SnapMemoryDriver):
    """delete_snapshot removes whatever has the name: a volume too (one namespace)."""

    def backend_delete_snapshot(self, name: str) -> None:
        if self.volumes.pop(name, None) is None:
            super().backend_delete_snapshot(name)


class SizeInFractionalGiB(SparseFileDriver):
    """Gives a volume's size as bytes / GiB, a fraction for an unaligned volume."""

    def _find(self, name: str, snapshot: bool) -> VolumeInfo | None:
        found = super()._find(name, snapshot)
        if found is None:
            return None
        size = os.stat(self.path(name, snapshot=snapshot)).st_size
        return dataclasses.replace(found, size_gb=size / GiB, size_bytes=size)


class PathOfMissingVolume(SparseFileDriver):
    """Gives a volume's device path without asking whether the volume exists."""

    def backend_device_path(self, name: str) -> str:
        return self.path(name)


def _memory(cls: type, hooks: ComplianceHooks | None = None,
            **config: Any) -> Callable[[Path], dict[str, Any]]:
    def harness(tmp_path: Path) -> dict[str, Any]:
        return {"factory": memory_factory(tmp_path, cls, **config),
                **({"hooks": hooks} if hooks else {})}
    return harness


def _used(cls: type, used_gb: float) -> type:
    """``cls`` on an array where others have written ``used_gb``."""
    def __init__(self: Any, configuration: Any = None, **kwargs: Any) -> None:
        cls.__init__(self, configuration, **kwargs)
        self.used_bytes = int(used_gb * GiB)
    return type(cls.__name__, (cls,), {"__init__": __init__})


# ------------------------------------------------------------------ the shared-capacity array

class ThickCreatedThin(SharedPoolDriver):
    """Creates every volume thin (its array call has one default: thin)."""

    def backend_create_volume(self, name: str, size_gb: int, *, pool_name: str,
                              thin: bool) -> None:
        super().backend_create_volume(name, size_gb, pool_name=pool_name, thin=True)


class ThickNotProvisioned(SharedPoolDriver):
    """Counts only thin volumes as provisioned ("thick ones are already in used")."""

    def backend_read_pools(self) -> list[Any]:
        thick = sum(self.array.allocated(v["size_bytes"]) for v in self.list_all()
                    if not v["thin"] and v["snapshot_of"] is None)
        return [dataclasses.replace(f, provisioned_bytes=f.provisioned_bytes - thick)
                for f in super().backend_read_pools()]


class FirstPageOnly(SharedPoolDriver):
    """Reads the first page of the array's volume listing only."""

    def list_all(self) -> list[dict[str, Any]]:
        return self.array.list_volumes(0)


class EachPoolItsOwn(SharedPoolDriver):
    """Counts each pool's own volumes only, so both pools over-subscribe the disk group."""

    def backend_read_pools(self) -> list[Any]:
        volumes = [v for v in self.list_all() if v["snapshot_of"] is None]
        return [dataclasses.replace(
            f, provisioned_bytes=sum(self.array.allocated(v["size_bytes"])
                                     for v in volumes if v["pool"] == f.pool_name),
            total_volumes=sum(v["pool"] == f.pool_name for v in volumes))
            for f in super().backend_read_pools()]

    def capacity_group(self, pool_name: str) -> str:
        return pool_name


class AdmitsAsThinTwin(SharedPoolDriver):
    """Admits every request as a thin request on pool ``fast`` (the pool its admission
    code was first written for), whatever the pool and type asked for."""

    def _admit(self, session: Any, pool: Any, requested_gb: float, thin: bool) -> Any:
        fast = next(f for f in session.facts if f.pool_name == "fast")
        return super()._admit(session, fast, requested_gb, True)


class NamesByRank(SharedPoolDriver):
    """Names its pools by rank of their own volume count ("pool-0" holds the most)."""

    def _ranked(self) -> list[str]:
        counts = {name: 0 for name in POOLS}
        for v in self.list_all():
            counts[v["pool"]] += 1
        return sorted(POOLS, key=lambda name: -counts[name])

    def backend_read_pools(self) -> list[Any]:
        ranks = {name: f"pool-{i}" for i, name in enumerate(self._ranked())}
        return [dataclasses.replace(f, pool_name=ranks[f.pool_name])
                for f in super().backend_read_pools()]

    def backend_create_volume(self, name: str, size_gb: int, *, pool_name: str,
                              thin: bool) -> None:
        real = self._ranked()[int(pool_name.rsplit("-", 1)[1])]
        super().backend_create_volume(name, size_gb, pool_name=real, thin=thin)


def _shared(cls: type, **options: Any) -> Callable[[Path], dict[str, Any]]:
    def harness(tmp_path: Path) -> dict[str, Any]:
        config = load_backend_config(
            extra_opts=SharedPoolDriver.OPTIONS, overrides={
                "shared_array_dir": str(tmp_path / "array"),
                "lock_path": str(tmp_path / "locks"), "max_over_subscription_ratio": "2.0",
                **options})
        return {"factory": lambda: cls(config)}
    return harness


# ------------------------------------------------------------------ across processes

class PerProcessLockSparseDriver(SparseFileDriver):
    """Each process locks its own directory: threads are serialised, processes are not."""

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        configuration = dataclasses.replace(configuration, lock_path=os.path.join(
            configuration.lock_path, f"pid-{os.getpid()}"))
        super().__init__(configuration, **kwargs)

    def backend_read_pools(self) -> list[Any]:
        facts = super().backend_read_pools()
        if multiprocessing.parent_process() is not None:
            time.sleep(0.3)  # a slow array in the racing children makes the race certain
        return facts


# ------------------------------------------------------------------ hooks

def _through_the_driver(driver: Any, name: str, size_gb: int, pool_name: str) -> None:
    driver.create_volume(name, size_gb, pool_name=pool_name)


def _without_pool(driver: Any, name: str, size_gb: int) -> None:
    """create_out_of_band as written before the hook took the pool."""
    driver.volumes[name] = size_gb


#: the admission checks need the cap's full room; these bugs overstate it
_OVER_ADMITS = frozenset({"admission.create-over-cap", "admission.extend-over-cap",
                          "admission.snapshot-over-cap", "admission.copy-over-cap",
                          "admission.fill-to-cap", "admission.parallel-threads"})


def _sparse(driver: str) -> Callable[[Path], dict[str, Any]]:
    return lambda tmp_path: {"spec": DriverSpec(config_files=(sparse_config(
        tmp_path, f"tests.compliance.broken:{driver}"),))}


def _f(*ids: str) -> frozenset[str]:
    return frozenset(ids)


BROKEN: tuple[Broken, ...] = (
    # --- hooks
    Broken("gives no break_listing or slow_backend hook", _f("hooks.required"),
           _memory(SnapMemoryDriver, dataclasses.replace(
               SNAP_MEMORY_HOOKS, break_listing=None, slow_backend=None))),
    Broken("an out-of-band hook that creates through the driver", _f("hooks.independent"),
           _memory(SnapMemoryDriver, dataclasses.replace(
               SNAP_MEMORY_HOOKS, create_out_of_band=_through_the_driver))),
    # the checks that need it skip, as without it, instead of raising TypeError
    Broken("a create_out_of_band hook without the pool argument", _f("hooks.required"),
           _memory(SnapMemoryDriver, dataclasses.replace(
               SNAP_MEMORY_HOOKS, create_out_of_band=_without_pool))),
    Broken("a backend_calls hook reading a counter nothing moves", _f("hooks.calls-counted"),
           _memory(SnapMemoryDriver, dataclasses.replace(
               SNAP_MEMORY_HOOKS, backend_calls=lambda driver: 0))),
    # --- report rules (report written by hand)
    Broken("forgets location_info", _f("stats.required-fields"),
           _report_only(lambda p: p.pop("location_info"))),
    Broken("reports 3 decimals", _f("stats.gib-2-decimals"),
           _report_only(lambda p: p.update(free_capacity_gb=10.125))),
    Broken("reports 'infinite'", _f("stats.no-infinite-unknown"),
           _report_only(lambda p: p.update(total_capacity_gb="infinite"))),
    Broken("reports allocated_capacity_gb", _f("stats.no-allocated-capacity"),
           _report_only(lambda p: p.update(allocated_capacity_gb=12.0))),
    Broken("rounds free up", _f("stats.free-le-total"), _report_only(rounds_free_up)),
    Broken("provisioned = used - snapshots, gone negative", _f("stats.non-negative"),
           _report_only(lambda p: p.update(provisioned_capacity_gb=-2.0))),
    Broken("reports a ratio of 0.8", _f("stats.ratio-ge-1"),
           _report_only(lambda p: p.update(max_over_subscription_ratio=0.8))),
    Broken("reports 150 % reserved", _f("stats.reserved-range"),
           _report_only(lambda p: p.update(reserved_percentage=150))),
    Broken("omits provisioned_capacity_gb", _f("stats.provisioned-present"),
           _report_only(lambda p: p.pop("provisioned_capacity_gb"))),
    Broken("declares neither thin nor thick", _f("stats.provisioning-support-declared"),
           _report_only(lambda p: p.update(thin_provisioning_support=False,
                                           thick_provisioning_support=False))),
    Broken("computes factors before applying reserved", _f("stats.capacity-factors-consistent"),
           _report_only(lambda p: p.update(reserved_percentage=10), keep_factors=True)),
    Broken("unrounded free once data is written", _f("stats.gib-2-decimals"),
           _hand_written(_unrounded_free, used_bytes=GiB // 3)),
    Broken("free = total - provisioned, negative once over-subscribed",
           _f("stats.non-negative", "truth.free"),
           _hand_written(_free_total_minus_provisioned)),
    Broken("'auto' reported as 20", _f("truth.ratio"),
           _hand_written(_auto_as_20, max_over_subscription_ratio="auto")),
    Broken("backend I/O on every refresh=False", _f("stats.refresh-cached"),
           _memory(AlwaysRefreshes)),
    # --- the backend's truth
    Broken("capacity in decimal GB taken for GiB", _f("truth.total", "truth.free") | _OVER_ADMITS,
           _memory(DecimalGigabytes)),
    Broken("total = physical x ratio", _f("truth.total") | _OVER_ADMITS,
           _memory(TotalTimesRatio)),
    Broken("reserved subtracted twice", _f("truth.total", "truth.free"),
           _memory(ReservedTwice, reserved_percentage=10)),
    Broken("total without the metadata area", _f("truth.total"),
           _memory(_used(TotalMinusMetadata, 10))),
    Broken("free in whole GiB", _f("truth.free"), _memory(_used(FreeInWholeGiB, 10.5))),
    Broken("the 4th and later snapshots of a volume counted", _f("truth.provisioned"),
           _memory(FourthSnapshotCounted)),
    Broken("snapshots counted in total_volumes", _f("truth.total-volumes"),
           _memory(SnapshotsAsVolumes)),
    Broken("thick volumes missing from provisioned",
           _f("truth.provisioned", "provisioned.create-delete", "provisioned.counts-out-of-band",
              "ops.extend-readback", "ops.copy-readback", "admission.fill-to-cap"),
           _shared(ThickNotProvisioned)),
    Broken("a listing read to its first page of 50 only",
           _f("truth.provisioned", "truth.total-volumes", "admission.fill-to-cap"),
           _shared(FirstPageOnly)),
    Broken("two pools over one disk group, each over-subscribing it",
           _f("truth.provisioned", "truth.total-volumes-group", "provisioned.create-delete",
              "provisioned.counts-out-of-band", "ops.extend-readback", "ops.copy-readback",
              "ops.unaligned-size", "admission.fill-to-cap"),
           _shared(EachPoolItsOwn)),
    # once the report's pool names are not the backend's, nothing can be read back
    Broken("pool names shifting between refreshes", _f("truth.pools"), _shared(NamesByRank),
           errors=_f("hooks.independent", "provisioned.create-delete",
                     "provisioned.excludes-snapshots", "provisioned.counts-out-of-band",
                     "admission.create-over-cap", "admission.extend-over-cap",
                     "admission.snapshot-over-cap", "admission.copy-over-cap",
                     "admission.parallel-threads", "ops.create-readback",
                     "ops.extend-readback", "ops.copy-readback", "ops.extend-smaller",
                     "ops.delete-snapshot", "ops.snapshot-existing", "ops.unaligned-size",
                     "resources.no-fd-leak", "resources.no-child-leak",
                     "admission.parallel-processes", "data.used-capacity",
                     "data.snapshot-copy", "failclosed.failed-write")),
    # --- provisioned accounting
    Broken("keeps deleted volumes counted", _f("provisioned.create-delete", "truth.provisioned"),
           _memory(KeepsDeletedCounted)),
    Broken("reports no snapshot capacity while snapshots exist",
           _f("truth.snapshot-capacity"), _memory(SnapshotCapacityZero)),
    Broken("counts snapshots in provisioned",
           _f("provisioned.excludes-snapshots", "truth.provisioned"), _memory(CountsSnapshots)),
    Broken("ignores out-of-band volumes",
           _f("provisioned.counts-out-of-band", "truth.provisioned", "ops.unaligned-size",
              "admission.fill-to-cap"),
           _memory(CountsOnlyItsOwn)),
    Broken("misses a volume resized out of band",
           _f("provisioned.counts-out-of-band", "truth.provisioned", "admission.fill-to-cap"),
           _memory(SizesFromItsLedger)),
    Broken("counts other applications' objects as volumes", _f("provisioned.ignores-strays"),
           _memory(CountsStrays)),
    # --- admission
    Broken("refuses with BackendError", _f("admission.create-over-cap"),
           _memory(RefusesWithWrongError)),
    Broken("extends without admission", _f("admission.extend-over-cap"),
           _memory(ExtendSkipsAdmission)),
    Broken("snapshots without admission", _f("admission.snapshot-over-cap"),
           _memory(SnapshotSkipsAdmission)),
    # ... and of a missing source
    Broken("clones and volumes from snapshots without admission",
           _f("admission.copy-over-cap", "ops.missing-volume"),
           _memory(CopySkipsAdmission)),
    # ... also while the backend cannot be read
    Broken("small creates bypassing admission",
           _f("admission.fill-to-cap", "failclosed.unreadable", "failclosed.failed-listing"),
           _memory(SmallCreatesSkipAdmission)),
    # on 'bulk' the array refuses what admission let through: no volume past the cap
    Broken("admission against the wrong pool",
           _f("admission.create-over-cap", "admission.extend-over-cap",
              "admission.snapshot-over-cap", "admission.copy-over-cap"),
           _shared(AdmitsAsThinTwin)),
    Broken("races under parallel creates", _f("admission.parallel-threads"),
           _memory(RacyCreate)),
    Broken("a lock directory per process", _f("admission.parallel-processes"),
           lambda tmp_path: {"spec": DriverSpec(config_files=(sparse_config(
               tmp_path, "tests.compliance.broken:PerProcessLockSparseDriver"),))}),
    # --- operations
    # ... and admitted as thin from then on
    Broken("thick requests created thin",
           # (a snapshot is admitted with no type, thin on a pool offering thin: no
           # snapshot-over-cap to fail)
           _f("ops.create-readback", "ops.extend-readback", "ops.copy-readback",
              "admission.extend-over-cap", "admission.copy-over-cap"),
           _shared(ThickCreatedThin)),
    Broken("an extend that grows by the new size",
           _f("ops.extend-readback", "ops.unaligned-size"),
           _memory(ExtendsBy)),
    Broken("clones and volumes from snapshots keep their source's size",
           _f("ops.copy-readback"), _memory(CopyKeepsSourceSize)),
    Broken("returns the existing volume", _f("ops.create-existing"), _memory(IdempotentCreate)),
    Broken("raises VolumeNotFound on delete", _f("ops.delete-missing"),
           _memory(DeleteMissingRaises)),
    Broken("shrinks on extend", _f("ops.extend-smaller"), _memory(ShrinksOnExtend)),
    Broken("a missing volume looked up as KeyError", _f("ops.missing-volume"),
           _memory(FindRaisesKeyError)),
    Broken("a snapshot under a taken name replaces it", _f("ops.snapshot-existing"),
           _memory(SnapshotNameReplaced)),
    Broken("raises SnapshotNotFound on delete_snapshot", _f("ops.delete-missing-snapshot"),
           _memory(DeleteMissingSnapshotRaises)),
    Broken("delete_snapshot deletes a volume of that name", _f("ops.delete-snapshot"),
           _memory(DeletesAnyName)),
    Broken("sizes in fractional GiB", _f("ops.unaligned-size"), _sparse("SizeInFractionalGiB")),
    Broken("a device path for a missing volume", _f("ops.device-path"),
           _sparse("PathOfMissingVolume")),
    # --- data written into volumes
    Broken("used capacity in whole MiB", _f("data.used-capacity"), _memory(UsedInWholeMiB)),
    Broken("a snapshot sharing its origin's blocks without copy-on-write",
           _f("data.snapshot-copy"), _memory(SnapshotSharesData)),
    Broken("a failed create leaves its half-made volume", _f("failclosed.failed-write"),
           _memory(LeavesFailedCreate)),
    # --- resources
    Broken("leaks a file per backend read", _f("resources.no-fd-leak"),
           _memory(LeaksFileDescriptors)),
    Broken("leaks a child process per create", _f("resources.no-child-leak"),
           _memory(LeaksChildProcesses)),
    # --- fail-closed
    Broken("serves stale facts when the array is unreachable", _f("failclosed.unreadable"),
           _memory(ServesStaleFacts)),
    Broken("a failed listing taken for no volumes", _f("failclosed.failed-listing"),
           _memory(ListingErrorMeansEmpty)),
    Broken("a listing timeout read at set-up, a timed-out listing taken for no volumes",
           _f("failclosed.slow-backend"), _memory(ListingTimeoutFromSetup)),
    Broken("a slow backend reported up with 'unknown'", _f("failclosed.slow-backend"),
           lambda tmp_path: {"factory": lambda: SlowReportedUnknown(
               memory_factory(tmp_path)()), "hooks": HAND_WRITTEN_OPERATIONS_HOOKS}),
)


#: shared so that tests reach them by name
__all__ += ["AlwaysRefreshes", "DeleteMissingRaises", "PathOfMissingVolume",
            "PerProcessLockSparseDriver", "RacyCreate", "SharedPoolDriver",
            "SizeInFractionalGiB"]
