"""A thin pool's usage read straight from device-mapper, without starting a process.

Two ``DM_TABLE_STATUS`` ioctls on ``/dev/mapper/control`` (the status line, then
the table for the data block size) give what ``lvs`` shows as the pool's
data% and metadata%, computed here the way lvm2 computes and prints them, so a
refresh can take the pool's usage without an LVM command.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import struct
from dataclasses import dataclass
from typing import Final

from lvm_driver.run.names import validate_lv_name, validate_vg_name

#: the device-mapper control node every dm ioctl goes through
CONTROL_PATH = "/dev/mapper/control"

# linux/dm-ioctl.h (interface version 4): struct dm_ioctl is
#   u32 version[3], data_size, data_start, target_count; s32 open_count;
#   u32 flags, event_nr, padding; u64 dev; char name[128], uuid[129], data[7]
_DM_IOCTL: Final = struct.Struct("=3IIIIiIIIQ128s129s7s")
#   struct dm_target_spec: u64 sector_start, length; s32 status; u32 next;
#   char target_type[16], then the NUL-terminated status/table string
_DM_TARGET_SPEC: Final = struct.Struct("=QQiI16s")
_DM_VERSION: Final = (4, 0, 0)  # the kernel accepts any 4.x minor >= what we ask
_DM_NAME_LEN: Final = 128
_DM_STATUS_TABLE_FLAG: Final = 1 << 4
_DM_ACTIVE_PRESENT_FLAG: Final = 1 << 5
_DM_BUFFER_FULL_FLAG: Final = 1 << 8
_DM_NOFLUSH_FLAG: Final = 1 << 11  # as lvs asks: no metadata commit for a status
_DM_TABLE_STATUS_CMD: Final = 12
#: _IOWR(0xfd, DM_TABLE_STATUS_CMD, struct dm_ioctl)
DM_TABLE_STATUS: Final = (3 << 30) | (_DM_IOCTL.size << 16) | (0xFD << 8) | _DM_TABLE_STATUS_CMD
_FIRST_BUFFER_BYTES: Final = 16 * 1024
_MAX_BUFFER_BYTES: Final = 16 * 1024 * 1024
_SECTOR_BYTES: Final = 512

# lvm2's fixed-point percent (libdm dm_percent_t): 1% is 1,000,000
_PERCENT_1: Final = 1_000_000
_PERCENT_100: Final = 100 * _PERCENT_1

MODES: Final = ("rw", "ro", "out_of_data_space", "Fail")


class DeviceMapperError(OSError):
    """A device-mapper query failed, or answered with something that is not a thin pool."""


@dataclass(frozen=True, slots=True)
class ThinPoolStatus:
    """One dm-thin-pool status: block counters, the data block size, mode and flags.

    ``mode`` is "Fail" when the kernel reports the pool failed (or cannot read
    its counters); the block counts are then 0 and both percentages NaN, as
    ``lvs`` prints nothing for them.
    """

    transaction_id: int
    used_metadata_blocks: int
    total_metadata_blocks: int
    used_data_blocks: int
    total_data_blocks: int
    data_block_bytes: int
    mode: str
    needs_check: bool

    @property
    def data_percent(self) -> float:
        """The pool's data% exactly as ``lvs -o data_percent`` prints it (NaN when failed)."""
        if self.mode == "Fail":
            return math.nan
        return lvs_percent(self.used_data_blocks, self.total_data_blocks)

    @property
    def metadata_percent(self) -> float:
        """The pool's metadata% exactly as ``lvs`` prints it (NaN when failed)."""
        if self.mode == "Fail":
            return math.nan
        return lvs_percent(self.used_metadata_blocks, self.total_metadata_blocks)


# ---------------------------------------------------------------------------
# lvm2's percent arithmetic (libdm: dm_make_percent, dm_percent_to_round_float,
# and the report's "%.2f"), single-precision steps included, so the figure is
# the one lvs prints, to the last digit.

def _f32(value: float) -> float:
    """``value`` rounded to an IEEE single, as a C ``float`` holds it."""
    return struct.unpack("=f", struct.pack("=f", value))[0]


def _make_percent(numerator: int, denominator: int) -> int:
    """lvm2's fixed-point percent: never 0 or 100% unless exactly so."""
    if not denominator or numerator == denominator:
        return _PERCENT_100
    if not numerator:
        return 0
    percent = int(_PERCENT_100 * (float(numerator) / float(denominator)))
    if percent == _PERCENT_100:
        return _PERCENT_100 - 1
    if percent == 0:
        return 1
    return percent


def _round_float(percent: int) -> float:
    """The single-precision percent lvs formats, nudged off 0 and 100 at 2 digits."""
    step = _f32(0.01)
    bound = _f32(_PERCENT_1 * step)
    as_float = _f32(percent)
    if 0 < percent and as_float < bound:
        return step
    upper = _f32(_PERCENT_100 - bound)
    if percent < _PERCENT_100 and as_float > upper:
        return _f32(upper / _PERCENT_1)
    return _f32(as_float / _PERCENT_1)


def lvs_percent(used: int, total: int) -> float:
    """``used``/``total`` as lvs prints a pool's data% or metadata% (2 decimals)."""
    return float(f"{_round_float(_make_percent(used, total)):.2f}")


# ---------------------------------------------------------------------------
# names and the status line

def dm_name(vg_name: str, lv_name: str, layer: str = "") -> str:
    """LVM's device-mapper name: '-' doubled in each part, parts joined by '-'."""
    parts = [vg_name.replace("-", "--"), lv_name.replace("-", "--")]
    if layer:
        parts.append(layer)
    return "-".join(parts)


def parse_thin_pool_status(params: str, *, data_block_bytes: int) -> ThinPoolStatus:
    """The dm-thin-pool status line (kernel thin-provisioning.rst) as a ThinPoolStatus."""
    words = params.split()
    if not words:
        raise DeviceMapperError(errno.EPROTO, "empty thin-pool status line")
    if words[0] in ("Fail", "Error"):  # LVM treats both as a failed pool
        return ThinPoolStatus(0, 0, 0, 0, 0, data_block_bytes, "Fail", False)
    try:
        transaction_id = int(words[0])
        used_meta, total_meta = (int(n) for n in words[1].split("/"))
        used_data, total_data = (int(n) for n in words[2].split("/"))
    except (IndexError, ValueError):
        raise DeviceMapperError(
            errno.EPROTO, f"unexpected thin-pool status line {params!r}") from None
    flags = words[3:]
    if "out_of_data_space" in flags:
        mode = "out_of_data_space"
    elif "ro" in flags:
        mode = "ro"
    else:
        mode = "rw"
    return ThinPoolStatus(transaction_id, used_meta, total_meta, used_data, total_data,
                          data_block_bytes, mode, "needs_check" in flags)


def _data_block_bytes(table: str) -> int:
    """The data block size from a thin-pool table: <meta dev> <data dev> <sectors> ..."""
    words = table.split()
    try:
        sectors = int(words[2])
    except (IndexError, ValueError):
        raise DeviceMapperError(
            errno.EPROTO, f"unexpected thin-pool table line {table!r}") from None
    return sectors * _SECTOR_BYTES


# ---------------------------------------------------------------------------
# the ioctl

def _table_status(fd: int, name: str, flags: int) -> list[tuple[str, str]] | None:
    """(target type, status or table string) of each target of device ``name``.

    None when no such device exists or it has no active table.
    """
    encoded = name.encode()
    size = _FIRST_BUFFER_BYTES
    while True:
        buf = bytearray(size)
        _DM_IOCTL.pack_into(buf, 0, *_DM_VERSION, size, _DM_IOCTL.size, 0, 0, flags, 0, 0, 0,
                            encoded, b"", b"")
        try:
            fcntl.ioctl(fd, DM_TABLE_STATUS, buf, True)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no device of that name
                return None
            raise DeviceMapperError(
                exc.errno, f"DM_TABLE_STATUS of {name}: {os.strerror(exc.errno or 0)}") from None
        fields = _DM_IOCTL.unpack_from(buf, 0)
        data_start, target_count, out_flags = fields[4], fields[5], fields[7]
        if out_flags & _DM_BUFFER_FULL_FLAG:
            if size >= _MAX_BUFFER_BYTES:
                raise DeviceMapperError(
                    errno.ENOBUFS, f"DM_TABLE_STATUS of {name}: answer over {size} bytes")
            size *= 4
            continue
        if not out_flags & _DM_ACTIVE_PRESENT_FLAG:
            return None
        return _targets(bytes(buf), data_start, target_count, name)


def _targets(buf: bytes, data_start: int, count: int, name: str) -> list[tuple[str, str]]:
    """The dm_target_spec records (and their strings) of a DM_TABLE_STATUS answer."""
    targets = []
    offset = 0
    for _ in range(count):
        start = data_start + offset
        if start + _DM_TARGET_SPEC.size > len(buf):
            raise DeviceMapperError(errno.EPROTO, f"DM_TABLE_STATUS of {name}: truncated answer")
        _, _, _, next_offset, kind = _DM_TARGET_SPEC.unpack_from(buf, start)
        text_start = start + _DM_TARGET_SPEC.size
        text_end = buf.find(b"\0", text_start)
        if text_end < 0:
            raise DeviceMapperError(errno.EPROTO, f"DM_TABLE_STATUS of {name}: unterminated string")
        targets.append((kind.split(b"\0", 1)[0].decode(), buf[text_start:text_end].decode()))
        offset = next_offset
    return targets


def _single_thin_pool(targets: list[tuple[str, str]], name: str) -> str:
    if len(targets) != 1 or targets[0][0] != "thin-pool":
        kinds = ",".join(kind for kind, _ in targets) or "no target"
        raise DeviceMapperError(
            errno.EINVAL, f"device-mapper device {name} is {kinds}, not one thin-pool target")
    return targets[0][1]


def thin_pool_status(vg_name: str, pool_name: str) -> ThinPoolStatus | None:
    """The pool's dm-thin-pool status, no process: DM_TABLE_STATUS (and DM_TABLE_STATUS with
    the table flag for the block size) ioctls on /dev/mapper/control; None when the pool has
    no active device (inactive); DeviceMapperError otherwise."""
    validate_vg_name(vg_name)
    validate_lv_name(pool_name)
    layered, plain = dm_name(vg_name, pool_name, "tpool"), dm_name(vg_name, pool_name)
    if len(layered.encode()) >= _DM_NAME_LEN:
        raise DeviceMapperError(errno.ENAMETOOLONG,
                                f"device-mapper name {layered!r} is over {_DM_NAME_LEN - 1} bytes")
    try:
        fd = os.open(CONTROL_PATH, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        raise DeviceMapperError(exc.errno, f"cannot open {CONTROL_PATH}: {exc.strerror}") from None
    try:
        name = layered
        targets = _table_status(fd, name, _DM_NOFLUSH_FLAG)
        if targets is None:
            name = plain
            targets = _table_status(fd, name, _DM_NOFLUSH_FLAG)
            if targets is None:
                return None
        status_line = _single_thin_pool(targets, name)
        table = _table_status(fd, name, _DM_STATUS_TABLE_FLAG)
        if table is None:  # removed between the two ioctls
            return None
        block_bytes = _data_block_bytes(_single_thin_pool(table, name))
    finally:
        os.close(fd)
    return parse_thin_pool_status(status_line, data_block_bytes=block_bytes)
