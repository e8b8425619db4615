"""Two pools over one disk group: a template for an array whose pools share capacity.

The array (``DiskGroupArray``, a toy kept in a JSON file so that every process
using the directory sees the same array) has one disk group of
``shared_capacity_gb`` and gives volumes whole allocation units of
``shared_allocation_unit_mb`` (with ``shared_round_sizes`` it also lists each
volume at that allocated size, as arrays with coarse extents do). It has two
pools over the disk group: ``fast`` (thin and thick) and ``bulk`` (thick only);
a backend serves those named in ``shared_pools`` (by default both). Its API lists
volumes 50 to a page; data written into a thin volume takes space as it is
written (4 KiB blocks), a thick volume's is taken when it is made.

Honest accounting, the Queens spec's "storage array's pool" being the disk group:

* each served pool reports the disk group's capacity as total and its free space as
  free;
* each pool's provisioned capacity is every volume of the disk group, on either
  pool, made by the driver or not, at its allocated size (whole units), snapshots
  apart; ``total_volumes`` counts the same volumes;
* admission counts requests in whole units (``allocation_unit_bytes``) and claims
  in flight on either pool against the one disk group (``capacity_group``), so the
  two pools never over-subscribe the same capacity twice;
* every page of the listing is read, and a listing that fails is an error (the
  pools are reported down), never "no volumes".

Configure ``volume_driver = contrib.shared_pool_driver:SharedPoolDriver`` and
``shared_array_dir``; ``COMPLIANCE_HOOKS`` at the end certify it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from typing import Any, Iterator

from oslo_config import cfg

from driver_kit import (AlreadyExists, BackendError, BackendUnavailable, ConfigError, GiB, MiB,
                        PoolFacts, SnapshotNotFound, VolumeDriver, VolumeInfo, VolumeNotFound)
from driver_kit.compliance import BackendTruth, ComplianceHooks, PoolTruth, VolumeTruth

__all__ = ["COMPLIANCE_HOOKS", "DiskGroupArray", "SharedPoolDriver"]

#: pool name -> (thin, thick)
POOLS = {"fast": (True, True), "bulk": (False, True)}
DISK_GROUP = "dg1"
PAGE_SIZE = 50
#: data written into a volume takes the disk group's space in blocks of this size
BLOCK_BYTES = 4096


class DiskGroupArray:
    """A toy array with one disk group, its state in ``<directory>/array.json``.

    Volumes are records ``{name, pool, size_bytes, thin, snapshot_of, written}``; a
    thick volume takes its allocated size from the disk group at once, a thin one and a
    snapshot (of either) the blocks written into them (``written``: merged
    ``[start, end)`` extents; the data is kept in ``data/<name>``). Objects that are not
    volumes (``others``) take their size. Each call is one request (``calls`` counts
    them); ``faults`` in the state make requests slow, the listing fail or the next
    write fail, as an array in trouble would.
    """

    def __init__(self, directory: str, *, capacity_bytes: int, unit_bytes: int,
                 round_sizes: bool = False) -> None:
        self.directory, self.capacity_bytes, self.unit_bytes = \
            directory, capacity_bytes, unit_bytes
        self.round_sizes = round_sizes
        self.calls = 0

    @property
    def state_file(self) -> str:
        return os.path.join(self.directory, "array.json")

    def allocated(self, size_bytes: int) -> int:
        return -(-size_bytes // self.unit_bytes) * self.unit_bytes

    @contextlib.contextmanager
    def _state(self, *, write: bool = False, request: bool = True) -> Iterator[dict[str, Any]]:
        """The state under the array's lock; a ``request`` is counted and slowed by the
        ``delay_s`` fault."""
        try:
            if request:
                self.calls += 1
                time.sleep(self.load()["faults"].get("delay_s", 0))
            with open(os.path.join(self.directory, "array.lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
                state = self.load()
                yield state
                if write:
                    with open(self.state_file + ".new", "w", encoding="utf-8") as out:
                        json.dump(state, out)
                    os.replace(self.state_file + ".new", self.state_file)
        except OSError as exc:
            raise BackendUnavailable(f"array at {self.directory} unreachable: {exc}") from exc

    def load(self) -> dict[str, Any]:
        """The whole state, straight from the file (no request counted)."""
        try:
            with open(self.state_file, encoding="utf-8") as state:
                return json.load(state)
        except FileNotFoundError:
            if not os.path.isdir(self.directory):
                raise
            return {"volumes": {}, "faults": {}}

    def used_bytes(self, state: dict[str, Any]) -> int:
        volumes = state["volumes"].values()
        thick = sum(self.allocated(v["size_bytes"]) for v in volumes
                    if not v["thin"] and v["snapshot_of"] is None)
        written = sum(end - start for v in volumes if v["thin"] or v["snapshot_of"]
                      for start, end in v.get("written", ()))
        return thick + written + sum(state.get("others", {}).values())

    def _size(self, size_bytes: int) -> int:
        return self.allocated(size_bytes) if self.round_sizes else size_bytes

    def _data(self, name: str) -> str:
        return os.path.join(self.directory, "data", name)

    @staticmethod
    def _failing(state: dict[str, Any]) -> bool:
        """Whether this write is the one the ``fail_write`` fault fails (once)."""
        return bool(state["faults"].pop("fail_write", False))

    # ------------------------------------------------------------ the API
    def capacity(self) -> tuple[int, int]:
        """(capacity, used) of the disk group, bytes."""
        with self._state() as state:
            return self.capacity_bytes, self.used_bytes(state)

    def list_volumes(self, page: int) -> list[dict[str, Any]]:
        """Page ``page`` (from 0) of every volume and snapshot, ``PAGE_SIZE`` a page."""
        with self._state() as state:
            if state["faults"].get("listing"):
                raise BackendError("volume listing failed: internal error")
            records = sorted(state["volumes"].values(), key=lambda v: v["name"])
            return records[page * PAGE_SIZE:(page + 1) * PAGE_SIZE]

    def get(self, name: str) -> dict[str, Any] | None:
        with self._state() as state:
            return state["volumes"].get(name)

    def create(self, name: str, *, pool: str, size_bytes: int, thin: bool,
               snapshot_of: str | None = None) -> None:
        """A volume, or a snapshot of ``snapshot_of`` holding its data as it is now."""
        with self._state(write=True) as state:
            if name in state["volumes"]:
                raise AlreadyExists(f"{name!r} already exists on the array")
            if not thin and snapshot_of is None and self.allocated(size_bytes) > \
                    self.capacity_bytes - self.used_bytes(state):
                raise BackendError(f"disk group {DISK_GROUP} is full")
            failed = self._failing(state)
            if not failed:
                origin = state["volumes"].get(snapshot_of or "", {})
                state["volumes"][name] = {
                    "name": name, "pool": pool, "size_bytes": self._size(size_bytes),
                    "thin": thin, "snapshot_of": snapshot_of,
                    "written": [list(e) for e in origin.get("written", ())]}
                for start, end in origin.get("written", ()):  # holes stay holes
                    self._put(name, start, self._get(snapshot_of, start, end - start))
        if failed:
            raise BackendError(f"creating {name!r} failed: internal error")

    def resize(self, name: str, size_bytes: int) -> None:
        with self._state(write=True) as state:
            volume = state["volumes"].get(name)
            if volume is None:
                raise VolumeNotFound(f"no volume {name!r}")
            grown = self.allocated(size_bytes) - self.allocated(volume["size_bytes"])
            if not volume["thin"] and grown > self.capacity_bytes - self.used_bytes(state):
                raise BackendError(f"disk group {DISK_GROUP} is full")
            failed = self._failing(state)
            if not failed:
                volume["size_bytes"] = self._size(size_bytes)
        if failed:
            raise BackendError(f"resizing {name!r} failed: internal error")

    def delete(self, name: str) -> None:
        with self._state(write=True) as state:
            if state["volumes"].pop(name, None) is None:
                raise VolumeNotFound(f"no volume {name!r}")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._data(name))

    def write(self, name: str, offset_bytes: int, data: bytes) -> None:
        """Write ``data`` into volume ``name`` (a host using the volume)."""
        with self._state(write=True) as state:
            volume = state["volumes"].get(name)
            if volume is None or offset_bytes + len(data) > volume["size_bytes"]:
                raise VolumeNotFound(f"no volume {name!r} holding that range")
            self._put(name, offset_bytes, data)
            start = offset_bytes // BLOCK_BYTES * BLOCK_BYTES
            end = -(-(offset_bytes + len(data)) // BLOCK_BYTES) * BLOCK_BYTES
            volume["written"] = _merged(volume.get("written", []) + [[start, end]])

    def read(self, name: str, offset_bytes: int, length: int) -> bytes:
        """``length`` bytes of volume or snapshot ``name`` (holes read as zeros)."""
        with self._state() as state:
            if name not in state["volumes"]:
                raise VolumeNotFound(f"no volume {name!r}")
            return self._get(name, offset_bytes, length)

    def _put(self, name: str, offset_bytes: int, data: bytes) -> None:
        os.makedirs(os.path.dirname(self._data(name)), exist_ok=True)
        fd = os.open(self._data(name), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, data, offset_bytes)
        finally:
            os.close(fd)

    def _get(self, name: str, offset_bytes: int, length: int) -> bytes:
        try:
            fd = os.open(self._data(name), os.O_RDONLY)
        except FileNotFoundError:
            return bytes(length)
        try:
            found = os.pread(fd, length, offset_bytes)
        finally:
            os.close(fd)
        return found + bytes(length - len(found))

    def put_other(self, name: str, size_bytes: int) -> None:
        """Something that takes space but is not a volume (another application's)."""
        with self._state(write=True) as state:
            state.setdefault("others", {})[name] = size_bytes

    def remove_other(self, name: str) -> None:
        with self._state(write=True) as state:
            state.setdefault("others", {}).pop(name, None)

    def serial(self) -> str:
        """The array's serial number, made once when first asked (as a WWN is burnt in)."""
        serial = self.load().get("serial")
        if serial is None:
            with self._state(write=True, request=False) as state:
                serial = state.setdefault("serial", uuid.uuid4().hex)
        return serial

    def set_faults(self, **faults: Any) -> None:
        """The array's own fault injection (service mode); no argument clears it."""
        with self._state(write=True, request=False) as state:
            state["faults"] = faults


def _merged(extents: list[list[int]]) -> list[list[int]]:
    """``[start, end)`` extents sorted, overlapping and touching ones joined."""
    out: list[list[int]] = []
    for start, end in sorted(extents):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


class SharedPoolDriver(VolumeDriver):
    """Pools ``fast`` (thin and thick) and ``bulk`` (thick) over one disk group."""

    VENDOR_NAME = "driver_kit contrib"
    STORAGE_PROTOCOL = "iSCSI"
    SUPPORTS_ACTIVE_ACTIVE = True  # every host sees the one array
    OPTIONS = (cfg.StrOpt("shared_array_dir", help="Directory holding the array's state."),
               cfg.IntOpt("shared_capacity_gb", default=100, min=1, max=8 * 1024 ** 3,
                          help="Size of the array's one disk group (GiB)."),
               cfg.IntOpt("shared_allocation_unit_mb", default=768, min=1, max=1024 ** 2,
                          help="The array gives volumes whole units of this size (MiB)."),
               cfg.BoolOpt("shared_round_sizes", default=False,
                           help="The array lists each volume at its allocated size."),
               cfg.ListOpt("shared_pools", default=list(POOLS),
                           help="The array's pools this backend serves."))

    def __init__(self, configuration: Any = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        conf = self.configuration
        directory = conf.get("shared_array_dir")
        if not directory:
            raise ConfigError(f"[{conf.backend}] shared_array_dir is required")
        self.array = DiskGroupArray(
            directory, capacity_bytes=conf.get("shared_capacity_gb", 100) * GiB,
            unit_bytes=conf.get("shared_allocation_unit_mb", 768) * MiB,
            round_sizes=bool(conf.get("shared_round_sizes", False)))
        self.pools = {name: POOLS[name] for name in POOLS
                      if name in (conf.get("shared_pools") or POOLS)}
        unknown = set(conf.get("shared_pools") or ()) - set(POOLS)
        if unknown or not self.pools:
            raise ConfigError(f"[{conf.backend}] shared_pools must name pools of the array "
                              f"({', '.join(POOLS)}), got {conf.get('shared_pools')!r}")
        self._serial: str | None = None

    def do_setup(self) -> None:
        os.makedirs(self.array.directory, exist_ok=True)

    def allocation_unit_bytes(self, pool_name: str) -> int:
        return self.array.unit_bytes

    def capacity_group(self, pool_name: str) -> str:
        return DISK_GROUP

    def capacity_group_identity(self, pool: PoolFacts) -> str:
        # the array's own serial: hosts that name its section differently share it
        if self._serial is None:
            self._serial = self.array.serial()
        return f"SharedPoolDriver:{self._serial}:{DISK_GROUP}"

    # ------------------------------------------------------------------ facts
    def list_all(self) -> list[dict[str, Any]]:
        """Every volume and snapshot, page after page until a short page."""
        records, page = [], 0
        while True:
            batch = self.array.list_volumes(page)
            records += batch
            if len(batch) < PAGE_SIZE:
                return records
            page += 1

    def backend_read_pools(self) -> list[PoolFacts]:
        capacity, used = self.array.capacity()
        records = self.list_all()
        volumes = [v for v in records if v["snapshot_of"] is None]
        provisioned = sum(self.array.allocated(v["size_bytes"]) for v in volumes)
        return [PoolFacts(
            pool_name=name, total_bytes=capacity, free_bytes=capacity - used,
            provisioned_bytes=provisioned, used_bytes=used, total_volumes=len(volumes),
            snapshot_bytes=sum(v["size_bytes"] for v in records
                               if v["snapshot_of"] is not None and v["pool"] == name),
            thin_provisioning_support=thin, thick_provisioning_support=thick,
            location_info=f"SharedPoolDriver:{DISK_GROUP}:{name}")
            for name, (thin, thick) in self.pools.items()]

    def _find(self, name: str, snapshot: bool) -> VolumeInfo | None:
        record = self.array.get(name)
        if record is None or (record["snapshot_of"] is not None) != snapshot:
            return None
        return VolumeInfo(name=name, size_gb=-(-record["size_bytes"] // GiB),
                          pool_name=record["pool"], thin=record["thin"])

    def backend_find_volume(self, name: str) -> VolumeInfo | None:
        return self._find(name, snapshot=False)

    # ------------------------------------------------------------ operations
    def backend_create_volume(self, name: str, size_gb: int, *, pool_name: str,
                              thin: bool) -> None:
        self.array.create(name, pool=pool_name, size_bytes=size_gb * GiB, thin=thin)

    def backend_delete_volume(self, name: str) -> None:
        if self.backend_find_volume(name) is None:
            raise VolumeNotFound(f"no volume {name!r}")
        self.array.delete(name)

    def backend_extend_volume(self, name: str, new_size_gb: int) -> None:
        self.array.resize(name, new_size_gb * GiB)

    def backend_create_snapshot(self, name: str, volume: VolumeInfo) -> None:
        # a snapshot keeps its origin's type (a copy of it is thick like the origin)
        # but takes no space until written
        self.array.create(name, pool=volume.pool_name, size_bytes=volume.size_gb * GiB,
                          thin=volume.thin, snapshot_of=volume.name)

    def backend_find_snapshot(self, name: str) -> VolumeInfo | None:
        return self._find(name, snapshot=True)

    def backend_delete_snapshot(self, name: str) -> None:
        if self.backend_find_snapshot(name) is None:
            raise SnapshotNotFound(f"no snapshot {name!r}")
        self.array.delete(name)

    def backend_clone_volume(self, name: str, source: VolumeInfo, size_gb: int) -> None:
        self.array.create(name, pool=source.pool_name, size_bytes=size_gb * GiB,
                          thin=source.thin)

    def backend_create_volume_from_snapshot(self, name: str, snapshot: VolumeInfo,
                                            size_gb: int) -> None:
        self.backend_clone_volume(name, snapshot, size_gb)


# Hooks for driver_kit.compliance: the array's state read straight from its file, volumes
# made, resized and removed by another client of the array, and the array's own faults.
def _read_truth(driver: SharedPoolDriver) -> BackendTruth:
    array = driver.array
    state = array.load()
    used = array.used_bytes(state)
    return BackendTruth(
        pools=tuple(PoolTruth(pool_name=name, capacity_bytes=array.capacity_bytes,
                              used_bytes=used, capacity_group=DISK_GROUP,
                              allocation_unit_bytes=array.unit_bytes,
                              served=name in driver.pools) for name in POOLS),
        volumes=tuple(VolumeTruth(name=v["name"], pool_name=v["pool"],
                                  size_bytes=v["size_bytes"], thin=v["thin"],
                                  snapshot_of=v["snapshot_of"])
                      for v in state["volumes"].values()))


def _out_of_band(driver: SharedPoolDriver, name: str, size_gb: int, pool_name: str) -> None:
    driver.array.create(name, pool=pool_name, size_bytes=size_gb * GiB,
                        thin=POOLS[pool_name][0])


def _unplug(driver: SharedPoolDriver) -> None:
    os.rename(driver.array.directory, driver.array.directory + ".unplugged")


def _repair(driver: SharedPoolDriver) -> None:
    if os.path.isdir(driver.array.directory + ".unplugged"):
        os.rename(driver.array.directory + ".unplugged", driver.array.directory)
    driver.array.set_faults()


COMPLIANCE_HOOKS = ComplianceHooks(
    read_truth=_read_truth, create_out_of_band=_out_of_band,
    resize_out_of_band=lambda driver, name, size_gb: driver.array.resize(
        name, round(size_gb * GiB)),
    delete_out_of_band=lambda driver, name: driver.array.delete(name),
    break_backend=_unplug,
    break_listing=lambda driver: driver.array.set_faults(listing=True),
    slow_backend=lambda driver, delay_s: driver.array.set_faults(delay_s=delay_s),
    repair_backend=_repair, backend_calls=lambda driver: driver.array.calls,
    write_data=lambda driver, name, offset_bytes, data: driver.array.write(
        name, offset_bytes, data),
    read_data=lambda driver, name, offset_bytes, length: driver.array.read(
        name, offset_bytes, length),
    fail_next_write=lambda driver: driver.array.set_faults(fail_write=True),
    create_stray=lambda driver, name, pool_name: driver.array.put_other(name, GiB),
    delete_stray=lambda driver, name: driver.array.remove_other(name))
