"""The privileged daemon's reads and writes besides LVM's commands.

- ``read_pv_block``: a read of a PV of the configured VG, only inside its LVM label
  sectors and metadata areas (as the daemon parses them from the label itself), at
  most ``MAX_READ_BYTES``. The PVs are learned through ``pvs``: those whose VG UUID is
  the one UUID LVM gives the configured VG's name; the path must be one LVM names
  for such a PV, and the device opened must be that PV (``st_rdev``; a file's
  ``st_dev``/``st_ino`` on the simulator).
- ``thin_pool_status``: the device-mapper status of the configured thin pool.
- ``zero``: the thick wipe. The target is resolved as an LV of the configured VG
  (a live ``lvs`` of it: thick, active, at least that size), then its device
  node's realpath must be the device-mapper device whose name
  (``/sys/dev/block/M:m/dm/name``) is that LV's; the daemon writes the zeros itself
  (O_DIRECT, then fdatasync). On the simulator it runs the builder's ``dd`` there.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Final

from driver_kit.exceptions import DriverKitError
from lvm_driver.commands import lvm_argv
from lvm_driver.privileged import PrivilegeRefused, backend, default
from lvm_driver.privileged.commands import (checked_name, checked_size, checked_timeout,
                                            execute, refusing, run, runner_for)
from lvm_driver.read import mda
from lvm_driver.read.dm_status import ThinPoolStatus, dm_name
from lvm_driver.read.dm_status import thin_pool_status as _kernel_pool_status
from lvm_driver.read.report import load_rows, lvs_from_rows

__all__ = ["read_pv_block", "read_refresh", "thin_pool_status", "zero", "MAX_READ_BYTES",
           "allowed_regions"]

#: the most one block read returns
MAX_READ_BYTES: Final = 16 << 20
#: the header zone before the first metadata area is read only when that area starts
#: this close to the start of the PV (LVM puts it at 4 KiB)
_HEADER_ZONE_MAX: Final = 1 << 20
_LABEL_BYTES: Final = mda.LABEL_SCAN_SECTORS * mda.SECTOR
_RELEARN_INTERVAL_S: Final = 1.0
_PV_FIELDS: Final = "pv_name,pv_uuid,vg_name,vg_uuid"
_WIPE_CHUNK: Final = 1 << 20
#: the most reads of one kind a refresh's batch holds (a VG of that many PVs or pools)
_MAX_BATCH: Final = 64


def allowed_regions(label: mda.PVLabel) -> list[tuple[int, int]]:
    """The (start, end) byte ranges of a PV the daemon reads: its label sectors, the
    zone up to its first metadata area when that lies below the data (LVM's own
    header zone), and each metadata area; merged."""
    regions = [(0, _LABEL_BYTES)]
    regions += [(offset, offset + size) for offset, size in label.metadata_areas if size > 0]
    if label.metadata_areas:
        first = min(offset for offset, _ in label.metadata_areas)
        data = min((offset for offset, _ in label.data_areas), default=first)
        if first <= min(_HEADER_ZONE_MAX, data):
            regions.append((0, first))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(regions):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


class _PVs:
    """The configured VG's PVs as the daemon last learned them: path -> (identity,
    PV UUID without dashes)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: dict[str, dict[str, tuple[int, str]]] = {}
        self.learned_at: dict[str, float] = {}

    def find(self, served: backend.Backend, path: str) -> tuple[int, str] | None:
        """The PV LVM named ``path`` (identity, PV UUID), learned again (at most once a
        second) when unknown or when the device there is no longer the one learned."""
        with self.lock:
            found = self.known.get(served.section, {}).get(path)
            recent = time.monotonic() - self.learned_at.get(served.section, -1e9) \
                < _RELEARN_INTERVAL_S
        if found is not None and _identity(path) == found[0]:
            return found
        if recent:
            return None
        return self.learn(served).get(path)

    def learn(self, served: backend.Backend) -> dict[str, tuple[int, str]]:
        argv = ["pvs", "--readonly", "--reportformat", "json", "-o", _PV_FIELDS]
        result = execute(served, argv, 60.0)
        pvs: dict[str, tuple[int, str]] = {}
        if result.exit_code == 0:
            try:
                rows = [row for row in load_rows(result.stdout, "pv")
                        if isinstance(row, dict) and row.get("vg_name") == served.vg]
            except DriverKitError:
                rows = []
            uuids = {row.get("vg_uuid") for row in rows}
            if len(uuids) == 1:  # two VGs of that name: serve neither
                for row in rows:
                    path = row.get("pv_name")
                    try:
                        info = os.stat(path)
                    except (OSError, TypeError, ValueError):
                        continue
                    if served.simulated or stat.S_ISBLK(info.st_mode):
                        pvs[path] = (mda.identity_of(info),
                                     str(row.get("pv_uuid", "")).replace("-", ""))
        with self.lock:
            self.known[served.section] = pvs
            self.learned_at[served.section] = time.monotonic()
        return pvs


_pvs = _PVs()


def _identity(path: str) -> int | None:
    try:
        return mda.identity_of(os.stat(os.path.realpath(path)))
    except OSError:
        return None


@default.entrypoint
def read_pv_block(section: str, path: str, offset: int, length: int) -> list[Any]:
    """``[identity as decimal text, bytes]``: ``length`` bytes at ``offset`` of PV ``path`` of the
    configured VG, inside its label sectors or a metadata area; else refused."""
    with refusing("PV read"):
        served = backend.load(section)
    return _read_pv_block(served, path, offset, length)


def _read_pv_block(served: backend.Backend, path: str, offset: int,
                   length: int) -> list[Any]:
    with refusing("PV read"):
        if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
            raise PrivilegeRefused(f"{path!r} is not a device path")
        for value in (offset, length):
            if isinstance(value, bool) or not isinstance(value, int):
                raise PrivilegeRefused(f"offset and length must be ints, got {value!r}")
        if offset < 0 or not 0 < length <= MAX_READ_BYTES:
            raise PrivilegeRefused(f"a read of {length} bytes at {offset} is out of range")
        known = _pvs.find(served, path)
        if known is None:
            raise PrivilegeRefused(f"{path!r} is not a PV of volume group {served.vg}")
    identity, pv_uuid = known
    real = os.path.realpath(path)
    if _identity(real) != identity:
        raise PrivilegeRefused(f"{path!r} is no longer the PV the daemon learned")
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NOCTTY
    try:
        fd = os.open(real, flags | os.O_DIRECT)
        direct = True
    except OSError as exc:
        if exc.errno != errno.EINVAL or not served.simulated:
            raise
        fd, direct = os.open(real, flags), False
    try:
        if mda.identity_of(os.fstat(fd)) != identity:
            raise PrivilegeRefused(f"{path!r} changed under the read")
        try:
            label = mda.parse_label(mda.read_fd(fd, 0, _LABEL_BYTES, direct=direct))
        except mda.HeaderError as exc:
            raise PrivilegeRefused(f"{path!r} has no LVM label the daemon reads: "
                                   f"{exc}") from None
        if label.pv_uuid != pv_uuid:
            raise PrivilegeRefused(f"{path!r} carries PV UUID {label.pv_uuid}, not the "
                                   f"one LVM gave")
        end = offset + length
        if not any(start <= offset and end <= stop for start, stop in allowed_regions(label)):
            raise PrivilegeRefused(f"bytes {offset}..{end} of {path!r} are outside its "
                                   f"label and metadata areas")
        # as text: a file's identity (the simulator's PVs) is wider than msgpack's ints
        return [str(identity), mda.read_fd(fd, offset, length, direct=direct)]
    finally:
        os.close(fd)


@default.entrypoint
def thin_pool_status(section: str, pool: str) -> dict[str, Any] | None:
    """The device-mapper status of the configured thin pool (None: not active)."""
    with refusing("thin pool status"):
        served = backend.load(section)
    return _thin_pool_status(served, pool)


def _thin_pool_status(served: backend.Backend, pool: str) -> dict[str, Any] | None:
    pool = served.pool(pool)
    if served.simulated:
        status = runner_for(served).thin_pool_status(served.vg, pool)
    else:
        status = _kernel_pool_status(served.vg, pool)
    return None if status is None else asdict(status)


@default.entrypoint
def read_refresh(section: str, blocks: Sequence[Sequence[Any]],
                 pools: Sequence[str]) -> dict[str, Any]:
    """A stats refresh's reads in one round trip: each ``[path, offset, length]`` of
    ``blocks`` as ``read_pv_block`` reads it and each of ``pools`` as
    ``thin_pool_status`` does, every one checked as it would be alone, and at most
    ``MAX_READ_BYTES`` in all (lists arrive as tuples through the channel); per item ``{"value": ...}``, ``{"refused": why}`` or
    ``{"errno": n, "message": text}``."""
    with refusing("refresh reads"):
        served = backend.load(section)
        if not (isinstance(blocks, (list, tuple)) and isinstance(pools, (list, tuple))
                and len(blocks) <= _MAX_BATCH and len(pools) <= _MAX_BATCH):
            raise PrivilegeRefused(f"a batch is two lists of at most {_MAX_BATCH} items")
        if not all(isinstance(block, (list, tuple)) and len(block) == 3 for block in blocks):
            raise PrivilegeRefused("each block of a batch is [path, offset, length]")
        lengths = [length for _, _, length in blocks]
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in lengths) \
                or sum(lengths) > MAX_READ_BYTES:
            raise PrivilegeRefused(f"a batch reads at most {MAX_READ_BYTES} bytes in all")
    return {"blocks": [_each(_read_pv_block, served, *block) for block in blocks],
            "pools": [_each(_thin_pool_status, served, pool) for pool in pools]}


def _each(read: Any, *args: Any) -> dict[str, Any]:
    try:
        return {"value": read(*args)}
    except PrivilegeRefused as exc:
        return {"refused": str(exc)}
    except OSError as exc:
        return {"errno": exc.errno or errno.EIO, "message": str(exc)}


def status_from_reply(reply: dict[str, Any] | None) -> ThinPoolStatus | None:
    """The client's ``ThinPoolStatus`` from ``thin_pool_status``'s reply."""
    return None if reply is None else ThinPoolStatus(**reply)


@default.entrypoint
def zero(section: str, name: str, nbytes: int, timeout_s: float) -> dict[str, Any]:
    """Zero the first ``nbytes`` of thick LV ``name`` of the configured VG (active, at
    least that size); a reply as ``commands.run`` gives."""
    started = time.monotonic()
    with refusing("wipe"):
        served = backend.load(section)
        name = checked_name(name)
        nbytes = checked_size(nbytes, "bytes to zero")
        timeout = checked_timeout(timeout_s)
        if name in served.pools:
            raise PrivilegeRefused(f"{served.vg}/{name} is the backend's thin pool")
    lv = _live_lv(served, name, timeout)
    if not (lv.is_thick and lv.is_active) or nbytes > lv.size_bytes:
        raise PrivilegeRefused(f"{served.vg}/{name} is not an active thick LV of at least "
                               f"{nbytes} bytes")
    if served.simulated:
        return run(served, lvm_argv.zero(served.vg, name, nbytes), timeout)
    fd = _open_lv(served.vg, name)
    try:
        written = _write_zeros(fd, nbytes, started + timeout)
        if written is None:
            return {"exit_code": None, "stdout": "", "stderr": "", "timed_out": True}
        os.fdatasync(fd)
    finally:
        os.close(fd)
    return {"exit_code": 0, "stdout": "", "timed_out": False,
            "stderr": f"{written} bytes zeroed on /dev/{served.vg}/{name}\n"}


def _live_lv(served: backend.Backend, name: str, timeout: float):
    result = execute(served, lvm_argv.live_report(served.vg, name), timeout)
    if result.exit_code != 0:
        raise PrivilegeRefused(f"{served.vg}/{name} is not an LV LVM knows: "
                               f"{result.stderr.strip()[:200]}")
    lvs = lvs_from_rows(load_rows(result.stdout, "lv"), served.vg)
    if [lv.name for lv in lvs] != [name]:
        raise PrivilegeRefused(f"lvs {served.vg}/{name} did not list that one LV")
    return lvs[0]


def _open_lv(vg: str, name: str) -> int:
    """The LV's device opened for direct writes, once it is proven to be that LV's
    device-mapper device."""
    node = f"/dev/{vg}/{name}"
    real = os.path.realpath(node)
    fd = os.open(real, os.O_WRONLY | os.O_DIRECT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISBLK(info.st_mode):
            raise PrivilegeRefused(f"{node} is not a block device")
        sys_name = f"/sys/dev/block/{os.major(info.st_rdev)}:{os.minor(info.st_rdev)}/dm/name"
        try:
            with open(sys_name, encoding="ascii") as file:
                found = file.read().strip()
        except OSError:
            found = None
        if found != dm_name(vg, name):
            raise PrivilegeRefused(f"{node} resolves to {real}, device-mapper name "
                                   f"{found!r}, not {dm_name(vg, name)!r}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_zeros(fd: int, nbytes: int, deadline: float) -> int | None:
    """Zeros over the first ``nbytes``; None when the deadline passed first."""
    buffer = mmap.mmap(-1, _WIPE_CHUNK)  # page-aligned and zero-filled
    try:
        done = 0
        while done < nbytes:
            if time.monotonic() > deadline:
                return None
            chunk = min(_WIPE_CHUNK, nbytes - done)
            view = memoryview(buffer)[:chunk]
            try:
                done += os.pwrite(fd, view, done)
            finally:
                view.release()
        return done
    finally:
        buffer.close()
