"""Compliant drivers for the harness's own tests, and the objects the broken drivers
(``tests/compliance/broken.py``) derive from.

``SnapMemoryDriver`` is the unit tests' memory driver with snapshots, clones and
data written by others; ``HandWrittenReport`` and ``HandWrittenOperations`` are not
built on the kit (they write their reports by hand), so that report rules can be
broken the way drivers written without the kit break them.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

from contrib.sparse_file_driver import COMPLIANCE_HOOKS as SPARSE_HOOKS
from contrib.sparse_file_driver import SparseFileDriver
from driver_kit import (AlreadyExists, BackendError, GiB, MiB, SnapshotNotFound, VolumeInfo,
                        load_backend_config)
from driver_kit.compliance import BackendTruth, ComplianceHooks, PoolTruth, VolumeTruth
from lvm_driver.driver import COMPLIANCE_HOOKS as LVM_HOOKS  # shipped by the driver
from tests.unit import memdriver
from tests.unit.memdriver import MemoryDriver

__all__ = ["LVM_HOOKS", "MEMORY_HOOKS", "SNAP_MEMORY_HOOKS", "SPARSE_HOOKS",
           "HandWrittenOperations", "HandWrittenReport", "SnapMemoryDriver", "memory_factory",
           "shared_config", "sparse_config"]

#: file objects and child processes the leaking drivers "forgot"; the tests close them
LEAKED_FILES: list[Any] = []
LEAKED_CHILDREN: list[subprocess.Popen] = []
#: set to let the hanging drivers go
RELEASE = threading.Event()

MEMORY_HOOKS = memdriver.COMPLIANCE_HOOKS


class SnapMemoryDriver(MemoryDriver):
    """The memory driver plus snapshots (reported apart, as the spec says), clones,
    volumes from snapshots, ``used_bytes`` of data written on the array by others, the
    data written into its volumes (``data``; a snapshot copies its origin's), objects
    that are not volumes (``strays``) and a command that fails half-way (``fail_next``)."""

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        self.snapshots: dict[str, tuple[str, int]] = {}  # name -> (origin, size GiB)
        self.used_bytes = 0
        self.data: dict[str, dict[int, bytes]] = {}  # volume or snapshot -> offset -> bytes
        self.strays: dict[str, int] = {}  # name -> GiB
        self.fail_next = False

    def written_bytes(self) -> int:
        return sum(len(chunk) for chunks in self.data.values() for chunk in chunks.values())

    def backend_read_pools(self) -> list[Any]:
        used = self.used_bytes + self.written_bytes()
        return [dataclasses.replace(
            f, free_bytes=f.total_bytes - used, used_bytes=used,
            snapshot_bytes=sum(size for _, size in self.snapshots.values()) * GiB)
            for f in super().backend_read_pools()]

    def command(self) -> None:
        """The array runs a write command, which fails once after ``fail_next``."""
        if self.fail_next:
            self.fail_next = False
            raise BackendError("the array failed the command half-way")

    def backend_create_volume(self, name: str, size_gb: int, **kwargs: Any) -> None:
        super().backend_create_volume(name, size_gb, **kwargs)
        try:
            self.command()
        except BackendError:
            del self.volumes[name]  # a failed create leaves nothing behind
            raise

    def backend_delete_volume(self, name: str) -> None:
        super().backend_delete_volume(name)
        self.data.pop(name, None)

    def backend_extend_volume(self, name: str, new_size_gb: int) -> None:
        self.command()
        super().backend_extend_volume(name, new_size_gb)

    def backend_create_snapshot(self, name: str, volume: VolumeInfo) -> None:
        if name in self.snapshots or name in self.volumes:
            raise AlreadyExists(name)
        self.command()
        self.snapshots[name] = (volume.name, volume.size_gb)
        self.data[name] = dict(self.data.get(volume.name, {}))

    def backend_delete_snapshot(self, name: str) -> None:
        if self.snapshots.pop(name, None) is None:
            raise SnapshotNotFound(name)
        self.data.pop(name, None)

    def backend_find_snapshot(self, name: str) -> VolumeInfo | None:
        if name not in self.snapshots:
            return None
        return VolumeInfo(name=name, size_gb=self.snapshots[name][1], pool_name="mem",
                          thin=True)

    def backend_clone_volume(self, name: str, source: VolumeInfo, size_gb: int) -> None:
        self.backend_create_volume(name, size_gb, pool_name="mem", thin=True)

    def backend_create_volume_from_snapshot(self, name: str, snapshot: VolumeInfo,
                                            size_gb: int) -> None:
        self.backend_create_volume(name, size_gb, pool_name="mem", thin=True)


def snap_memory_truth(driver: SnapMemoryDriver) -> BackendTruth:
    """The memory array with its snapshots and the data written on it."""
    truth = memdriver.read_truth(driver)
    used = driver.used_bytes + driver.written_bytes()
    return BackendTruth(
        pools=tuple(dataclasses.replace(p, used_bytes=used) for p in truth.pools),
        volumes=truth.volumes + tuple(
            VolumeTruth(name=name, pool_name="mem", size_bytes=size * GiB, thin=True,
                        snapshot_of=origin)
            for name, (origin, size) in driver.snapshots.items()))


def _write_data(driver: SnapMemoryDriver, name: str, offset_bytes: int, data: bytes) -> None:
    if name not in driver.volumes:
        raise KeyError(f"the array has no volume {name!r}")
    driver.data.setdefault(name, {})[offset_bytes] = bytes(data)


def _read_data(driver: SnapMemoryDriver, name: str, offset_bytes: int, length: int) -> bytes:
    out = bytearray(length)
    for start, chunk in driver.data.get(name, {}).items():
        low, high = max(start, offset_bytes), min(start + len(chunk), offset_bytes + length)
        if low < high:
            out[low - offset_bytes:high - offset_bytes] = chunk[low - start:high - start]
    return bytes(out)


def _repair_snap_memory(driver: SnapMemoryDriver) -> None:
    MEMORY_HOOKS.repair_backend(driver)
    driver.fail_next = False


SnapMemoryDriver.COMPLIANCE_HOOKS = ComplianceHooks(
    read_truth=snap_memory_truth, write_data=_write_data, read_data=_read_data,
    fail_next_write=lambda driver: setattr(driver, "fail_next", True),
    repair_backend=_repair_snap_memory,
    create_stray=lambda driver, name, pool_name: driver.strays.__setitem__(name, 1),
    delete_stray=lambda driver, name: driver.strays.pop(name))
#: every hook of SnapMemoryDriver, as found on its class and its base's module
SNAP_MEMORY_HOOKS = SnapMemoryDriver.COMPLIANCE_HOOKS.merged(MEMORY_HOOKS)


def memory_factory(tmp_path: Path, cls: type = SnapMemoryDriver, **overrides: Any,
                   ) -> Callable[[], Any]:
    """Fresh drivers on a 100 GiB pool with ratio 2.0 (a 200 GiB cap) unless overridden."""
    config = load_backend_config(overrides={"lock_path": str(tmp_path / "locks"),
                                            "max_over_subscription_ratio": "2.0",
                                            **overrides})
    return lambda: cls(config)


def sparse_config(tmp_path: Path, driver: str = "contrib.sparse_file_driver:SparseFileDriver",
                  ) -> str:
    """A cinder.conf-style file for a sparse pool under ``tmp_path``."""
    path = tmp_path / "sparse.conf"
    path.write_text(f"[DEFAULT]\nenabled_backends = sparse\n\n[sparse]\n"
                    f"volume_driver = {driver}\nsparse_pool_dir = {tmp_path / 'pool'}\n"
                    f"lock_path = {tmp_path / 'locks'}\nmax_over_subscription_ratio = 2.0\n")
    return str(path)


def shared_config(tmp_path: Path, driver: str = "contrib.shared_pool_driver:SharedPoolDriver",
                  **options: Any) -> str:
    """A cinder.conf-style file for the two-pool shared-capacity array under ``tmp_path``."""
    path = tmp_path / "shared.conf"
    values = {"volume_driver": driver, "shared_array_dir": tmp_path / "array",
              "lock_path": tmp_path / "locks", "max_over_subscription_ratio": "2.0",
              **options}
    path.write_text("[DEFAULT]\nenabled_backends = shared\n\n[shared]\n"
                    + "".join(f"{key} = {value}\n" for key, value in values.items()))
    return str(path)


# ------------------------------------------------------------------ not built on the kit

def _compliant_report() -> dict[str, Any]:
    config = load_backend_config(overrides={"max_over_subscription_ratio": "2.0"})
    return copy.deepcopy(MemoryDriver(config).get_volume_stats(refresh=True))


class HandWrittenReport:
    """Not a driver_kit driver: builds its report by hand (and caches it properly);
    ``truth`` is what its array says (100 GiB, empty, unless a test changes it)."""

    def __init__(self, mutate: Callable[[dict[str, Any]], None], *,
                 keep_factors: bool = False) -> None:
        self._mutate, self._keep_factors = mutate, keep_factors
        self._cache: dict[str, Any] | None = None
        self.array: dict[str, int] = {}
        self.truth = PoolTruth(pool_name="mem", capacity_bytes=100 * GiB, used_bytes=0)

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        if self._cache is None or refresh:
            report = _compliant_report()
            if not self._keep_factors:
                del report["pools"][0]["capacity_factors"]
            self._mutate(report["pools"][0])
            self._cache = report
        return self._cache


def _hand_written_truth(driver: Any) -> BackendTruth:
    return BackendTruth(pools=(driver.truth,), volumes=tuple(
        VolumeTruth(name=name, pool_name="mem", size_bytes=size * GiB, thin=True)
        for name, size in driver.array.items()))


def _not_reachable(*args: Any) -> None:
    raise AssertionError("a check without the operations API used a fault hook")


#: its array is a dict; it has no operations, so the fault hooks are never used
HAND_WRITTEN_HOOKS = ComplianceHooks(
    read_truth=_hand_written_truth,
    create_out_of_band=lambda driver, name, size_gb, pool: driver.array.__setitem__(
        name, size_gb),
    resize_out_of_band=lambda driver, name, size_gb: driver.array.__setitem__(name, size_gb),
    delete_out_of_band=lambda driver, name: driver.array.pop(name),
    break_backend=_not_reachable, break_listing=_not_reachable, slow_backend=_not_reachable,
    repair_backend=_not_reachable)


class HandWrittenArray(HandWrittenReport):
    """Reports the volumes on its array by hand and caches the report, with no
    ``backend_read_pools`` for the harness to count."""

    def __init__(self) -> None:
        super().__init__(self._count)

    def _count(self, pool: dict[str, Any]) -> None:
        pool.update(provisioned_capacity_gb=float(sum(self.array.values())),
                    total_volumes=len(self.array))


class HandWrittenOperations:
    """Not a driver_kit driver: the operations of ``inner`` behind a report written by
    hand that leaves out ``omit`` from each pool (capacity_factors and
    max_volume_size_gb are seldom reported by drivers not built on the kit). With
    ``settings`` it shows its configuration, else the harness takes the ratio and
    reserved percentage from the report."""

    def __init__(self, inner: Any,
                 omit: tuple[str, ...] = ("capacity_factors", "max_volume_size_gb"), *,
                 settings: bool = True) -> None:
        self.inner, self._omit, self._settings = inner, omit, settings

    @property
    def configuration(self) -> Any:
        if not self._settings:
            raise AttributeError("configuration")
        return self.inner.configuration

    @configuration.setter
    def configuration(self, value: Any) -> None:
        self.inner.configuration = value

    def do_setup(self) -> None:
        self.inner.do_setup()

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        report = copy.deepcopy(self.inner.get_volume_stats(refresh=refresh))
        for pool in report["pools"]:
            for key in self._omit:
                pool.pop(key, None)
        return report

    def __getattr__(self, name: str) -> Any:
        if name in ("create_volume", "delete_volume", "extend_volume", "create_snapshot",
                    "delete_snapshot", "create_cloned_volume", "create_volume_from_snapshot"):
            return getattr(self.inner, name)
        raise AttributeError(name)


def _on_inner(hook: Callable[..., Any]) -> Callable[..., Any]:
    return lambda driver, *args: hook(driver.inner, *args)


#: the memory driver's hooks, applied to the one inside a HandWrittenOperations
HAND_WRITTEN_OPERATIONS_HOOKS = ComplianceHooks(**{
    name: _on_inner(getattr(SNAP_MEMORY_HOOKS, name))
    for name, present in MEMORY_HOOKS.available().items() if present})


def rounds_free_up(pool: dict[str, Any]) -> None:
    total_bytes = free_bytes = 10 * GiB + 5 * MiB  # an empty pool of 10.005 GiB
    pool["total_capacity_gb"] = math.floor(total_bytes / GiB * 100) / 100  # 10.0
    pool["free_capacity_gb"] = math.ceil(free_bytes / GiB * 100) / 100    # 10.01: wrong way


# ------------------------------------------------------------------ the harness's own troubles

class LogsEachBuild(SparseFileDriver):
    """The sparse driver, noting the process of each instance built in ``builds.log``
    next to its pool directory."""

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        log = Path(configuration.get("sparse_pool_dir")).parent / "builds.log"
        with open(log, "a", encoding="ascii") as builds:
            builds.write(f"{os.getpid()}\n")


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
