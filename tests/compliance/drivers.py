"""Drivers for the harness's own tests: compliant ones, and a broken driver per check
(more where a check fails in more than one way: MORE_BREAKS).

Each broken driver breaks exactly one rule, the way real drivers do. Report
rules cannot be broken through ``VolumeDriver.get_volume_stats()`` (the kit makes
reports compliant by construction), so those drivers are plain objects building
their own report, as a driver written without the kit would.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import multiprocessing
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from contrib.sparse_file_driver import COMPLIANCE_HOOKS as SPARSE_HOOKS
from contrib.sparse_file_driver import SparseFileDriver
from driver_kit import (AlreadyExists, BackendError, CapacityExceeded, GiB, InvalidSize, MiB,
                        SnapshotNotFound, VolumeInfo, VolumeNotFound, admit,
                        load_backend_config)
from driver_kit.compliance import ComplianceHooks, DriverSpec
from lvm_driver.driver import COMPLIANCE_HOOKS as LVM_HOOKS  # shipped by the driver
from tests.unit.memdriver import MemoryDriver

#: file objects and child processes the leaking drivers "forgot"; the tests close them
LEAKED_FILES: list[Any] = []
LEAKED_CHILDREN: list[subprocess.Popen] = []
#: set to let the hanging driver go
RELEASE = threading.Event()


class SnapMemoryDriver(MemoryDriver):
    """The unit tests' memory driver plus snapshots (reported apart, as the spec says)."""

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        self.snapshots: dict[str, int] = {}

    def backend_read_pools(self) -> list[Any]:
        return [dataclasses.replace(f, snapshot_bytes=sum(self.snapshots.values()) * GiB)
                for f in super().backend_read_pools()]

    def backend_create_snapshot(self, name: str, volume: VolumeInfo) -> None:
        if name in self.snapshots or name in self.volumes:
            raise AlreadyExists(name)
        self.snapshots[name] = volume.size_gb

    def backend_delete_snapshot(self, name: str) -> None:
        if self.snapshots.pop(name, None) is None:
            raise SnapshotNotFound(name)

    def backend_find_snapshot(self, name: str) -> VolumeInfo | None:
        if name not in self.snapshots:
            return None
        return VolumeInfo(name=name, size_gb=self.snapshots[name], pool_name="mem", thin=True)


MEMORY_HOOKS = ComplianceHooks(
    create_out_of_band=lambda driver, name, size_gb: driver.volumes.__setitem__(name, size_gb),
    break_backend=lambda driver: setattr(driver, "broken", True),
    repair_backend=lambda driver: setattr(driver, "broken", False))


def memory_factory(tmp_path: Path, cls: type = SnapMemoryDriver) -> Callable[[], Any]:
    """Fresh drivers on a 100 GiB pool with ratio 2.0 (a 200 GiB cap)."""
    config = load_backend_config(overrides={"lock_path": str(tmp_path / "locks"),
                                            "max_over_subscription_ratio": "2.0"})
    return lambda: cls(config)


def sparse_config(tmp_path: Path, driver: str = "contrib.sparse_file_driver:SparseFileDriver",
                  ) -> str:
    """A cinder.conf-style file for a sparse pool under ``tmp_path``."""
    path = tmp_path / "sparse.conf"
    path.write_text(f"[DEFAULT]\nenabled_backends = sparse\n\n[sparse]\n"
                    f"volume_driver = {driver}\nsparse_pool_dir = {tmp_path / 'pool'}\n"
                    f"lock_path = {tmp_path / 'locks'}\nmax_over_subscription_ratio = 2.0\n")
    return str(path)


# ------------------------------------------------------------------ report rules

def _compliant_report() -> dict[str, Any]:
    config = load_backend_config(overrides={"max_over_subscription_ratio": "2.0"})
    return copy.deepcopy(MemoryDriver(config).get_volume_stats(refresh=True))


class HandWrittenReport:
    """Not a driver_kit driver: builds its report by hand (and caches it properly)."""

    def __init__(self, mutate: Callable[[dict[str, Any]], None], *,
                 keep_factors: bool = False) -> None:
        self._mutate, self._keep_factors = mutate, keep_factors
        self._cache: dict[str, Any] | None = None

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        if self._cache is None or refresh:
            report = _compliant_report()
            if not self._keep_factors:
                del report["pools"][0]["capacity_factors"]
            self._mutate(report["pools"][0])
            self._cache = report
        return self._cache


class HandWrittenArray(HandWrittenReport):
    """Not a driver_kit driver either: reports the volumes on its array by hand and
    caches the report, with no ``backend_read_pools`` for the harness to count."""

    def __init__(self) -> None:
        self.array: dict[str, int] = {}
        super().__init__(self._count)

    def _count(self, pool: dict[str, Any]) -> None:
        pool.update(provisioned_capacity_gb=float(sum(self.array.values())),
                    total_volumes=len(self.array))


HAND_WRITTEN_HOOKS = ComplianceHooks(
    create_out_of_band=lambda driver, name, size_gb: driver.array.__setitem__(name, size_gb),
    delete_out_of_band=lambda driver, name: driver.array.pop(name))


class HandWrittenOperations:
    """Not a driver_kit driver: the operations of ``inner`` behind a report written by
    hand that leaves out ``omit`` from each pool. Without capacity_factors and
    max_volume_size_gb (seldom reported by drivers not built on the kit) the harness
    works out the room of a pool from the pool's own numbers."""

    def __init__(self, inner: Any,
                 omit: tuple[str, ...] = ("capacity_factors", "max_volume_size_gb")) -> None:
        self.inner, self._omit = inner, omit

    def do_setup(self) -> None:
        self.inner.do_setup()

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        report = copy.deepcopy(self.inner.get_volume_stats(refresh=refresh))
        for pool in report["pools"]:
            for key in self._omit:
                pool.pop(key, None)
        return report

    def create_volume(self, name: str, size_gb: int, **kwargs: Any) -> VolumeInfo:
        return self.inner.create_volume(name, size_gb, **kwargs)

    def delete_volume(self, name: str) -> None:
        self.inner.delete_volume(name)

    def extend_volume(self, name: str, new_size_gb: int) -> VolumeInfo:
        return self.inner.extend_volume(name, new_size_gb)

    def create_snapshot(self, name: str, volume_name: str) -> VolumeInfo:
        return self.inner.create_snapshot(name, volume_name)

    def delete_snapshot(self, name: str) -> None:
        self.inner.delete_snapshot(name)


#: MEMORY_HOOKS, applied to the memory driver inside a HandWrittenOperations
HAND_WRITTEN_OPERATIONS_HOOKS = ComplianceHooks(
    create_out_of_band=lambda driver, name, size_gb: MEMORY_HOOKS.create_out_of_band(
        driver.inner, name, size_gb),
    break_backend=lambda driver: MEMORY_HOOKS.break_backend(driver.inner),
    repair_backend=lambda driver: MEMORY_HOOKS.repair_backend(driver.inner))


def _rounds_free_up(pool: dict[str, Any]) -> None:
    total_bytes = free_bytes = 10 * GiB + 5 * MiB  # an empty pool of 10.005 GiB
    pool["total_capacity_gb"] = math.floor(total_bytes / GiB * 100) / 100  # 10.0
    pool["free_capacity_gb"] = math.ceil(free_bytes / GiB * 100) / 100    # 10.01: wrong way


REPORT_BREAKS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "stats.required-fields": ("forgets location_info",
                              lambda p: p.pop("location_info")),
    "stats.gib-2-decimals": ("reports 3 decimals", lambda p: p.update(free_capacity_gb=10.125)),
    "stats.no-infinite-unknown": ("reports 'infinite'",
                                  lambda p: p.update(total_capacity_gb="infinite")),
    "stats.no-allocated-capacity": ("reports allocated_capacity_gb",
                                    lambda p: p.update(allocated_capacity_gb=12.0)),
    "stats.free-le-total": ("rounds free up", _rounds_free_up),
    "stats.non-negative": ("provisioned = used - snapshots, gone negative",
                           lambda p: p.update(provisioned_capacity_gb=-2.0)),
    "stats.ratio-ge-1": ("reports a ratio of 0.8",
                         lambda p: p.update(max_over_subscription_ratio=0.8)),
    "stats.reserved-range": ("reports 150 % reserved",
                             lambda p: p.update(reserved_percentage=150)),
    "stats.provisioned-present": ("omits provisioned_capacity_gb",
                                  lambda p: p.pop("provisioned_capacity_gb")),
    "stats.provisioning-support-declared": (
        "declares neither thin nor thick",
        lambda p: p.update(thin_provisioning_support=False, thick_provisioning_support=False)),
}


# ------------------------------------------------------------------ behaviour rules

class AlwaysRefreshes(SnapMemoryDriver):
    """Reads the backend on every call, refresh or not."""

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        return super().get_volume_stats(refresh=True)


class StampsCachedReports(SnapMemoryDriver):
    """Serves refresh=False from the cache, but stamps the copy it hands out with the
    time of the call: not the report of the last refresh."""

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        report = super().get_volume_stats(refresh=refresh)
        return report if refresh else {**report, "served_at": time.time()}


class HandWrittenArrayRereads(HandWrittenArray):
    """Reads its array on every call, refresh or not (and has no backend_read_pools)."""

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        return super().get_volume_stats(refresh=True)


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


class LogsEachBuild(SparseFileDriver):
    """The sparse driver, noting the process of each instance built in ``builds.log``
    next to its pool directory."""

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        log = Path(configuration.get("sparse_pool_dir")).parent / "builds.log"
        with open(log, "a", encoding="ascii") as builds:
            builds.write(f"{os.getpid()}\n")


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
        LEAKED_FILES.append(open(os.devnull, "rb"))
        return super().backend_read_pools()


class LeaksChildProcesses(SnapMemoryDriver):
    """Starts a helper process on every create and never waits for it."""

    def backend_create_volume(self, name: str, size_gb: int, **kwargs: Any) -> None:
        super().backend_create_volume(name, size_gb, **kwargs)
        LEAKED_CHILDREN.append(subprocess.Popen(["sleep", "30"]))


class ServesStaleFacts(SnapMemoryDriver):
    """Hides a backend outage behind the last good read."""

    _last: list[Any] | None = None

    def backend_read_pools(self) -> list[Any]:
        try:
            self._last = super().backend_read_pools()
        except OSError:
            if self._last is None:
                raise
        return self._last


class RaisesOnCreate(SnapMemoryDriver):
    """Every create fails with an unexpected error."""

    def create_volume(self, name: str, size_gb: int, **kwargs: Any) -> VolumeInfo:
        raise RuntimeError("array exploded")


class HangsOnStats(SnapMemoryDriver):
    """Every stats refresh hangs until RELEASE is set (then fails); counts the calls."""

    stats_calls = 0

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        self.stats_calls += 1
        RELEASE.wait(30)
        raise RuntimeError("released after the harness gave up")


class HangsOnExtend(SparseFileDriver):
    """Extends hang until RELEASE is set (then fail, so abandoned checks stop)."""

    def extend_volume(self, name: str, new_size_gb: int) -> VolumeInfo:
        RELEASE.wait(30)
        raise RuntimeError("released after the harness gave up")


# ------------------------------------------------------------------ one per check

def broken_harness(check_id: str, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """(what the driver does wrong, run_checks() arguments) for the driver breaking
    ``check_id``."""
    if check_id in REPORT_BREAKS:
        what, mutate = REPORT_BREAKS[check_id]
        return what, {"factory": lambda: HandWrittenReport(mutate)}
    if check_id == "stats.capacity-factors-consistent":
        return "computes factors before applying reserved", {"factory": lambda: HandWrittenReport(
            lambda p: p.update(reserved_percentage=10), keep_factors=True)}
    if check_id == "admission.parallel-processes":
        return "a lock directory per process", {
            "spec": DriverSpec(config_files=(sparse_config(
                tmp_path, "tests.compliance.drivers:PerProcessLockSparseDriver"),)),
            "hooks": SPARSE_HOOKS}
    cls, what = {
        "stats.refresh-cached": (AlwaysRefreshes, "reads the backend on refresh=False"),
        "provisioned.create-delete": (KeepsDeletedCounted, "keeps deleted volumes counted"),
        "provisioned.excludes-snapshots": (CountsSnapshots, "counts snapshots in provisioned"),
        "provisioned.counts-out-of-band": (CountsOnlyItsOwn, "ignores out-of-band volumes"),
        "admission.create-over-cap": (RefusesWithWrongError, "refuses with BackendError"),
        "admission.extend-over-cap": (ExtendSkipsAdmission, "skips enforcement on extend"),
        "admission.parallel-threads": (RacyCreate, "races under parallel creates"),
        "ops.create-existing": (IdempotentCreate, "returns the existing volume"),
        "ops.delete-missing": (DeleteMissingRaises, "raises VolumeNotFound on delete"),
        "ops.extend-smaller": (ShrinksOnExtend, "shrinks on extend"),
        "resources.no-fd-leak": (LeaksFileDescriptors, "leaks a file per backend read"),
        "resources.no-child-leak": (LeaksChildProcesses, "leaks a child process per create"),
        "stats.fail-closed": (ServesStaleFacts, "serves stale facts when the array is down"),
    }[check_id]
    return what, {"factory": memory_factory(tmp_path, cls), "hooks": MEMORY_HOOKS}



#: checks that reach a failure in more than one way: (check id, what the driver does
#: wrong, what the failure says, run_checks() arguments for tmp_path) per other way
MORE_BREAKS: tuple[tuple[str, str, str, Callable[[Path], dict[str, Any]]], ...] = (
    ("stats.refresh-cached", "stamps the cached report it serves",
     "differs from the last refresh",
     lambda tmp_path: {"factory": memory_factory(tmp_path, StampsCachedReports),
                       "hooks": MEMORY_HOOKS}),
    ("stats.refresh-cached", "no backend_read_pools; rereads its array on refresh=False",
     "saw a change made on the backend",
     lambda tmp_path: {"factory": HandWrittenArrayRereads, "hooks": HAND_WRITTEN_HOOKS}),
)
