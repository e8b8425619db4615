"""The VG's metadata fingerprint, read straight from each PV's LVM2 label and
metadata-area headers: one small read per PV (O_DIRECT; one more for a metadata
area past its first 8 KiB, such as a second copy at the PV's end), no LVM process;
and the committed metadata text those headers point at (``read_metadata_text``,
for ``vg_metadata``).

LVM writes every metadata commit to a new place in each metadata area and
records it in the area's header (``raw_locn[0]``: offset, size and checksum of
the committed text, whose checksum covers the VG's sequence number). So the
tuple of (PV path, device identity, each area's ``raw_locn[0]``) changes with
every commit, by the driver or by anyone else. Anything unexpected on disk
(no label, a bad magic or checksum, a commit in progress, ignored areas, a
format other than LVM2 text) is a doubt: the fingerprint is None and the
caller reads the VG through LVM. Layout as lvm2's lib/format_text/layout.h
and lib/label/label.h.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import stat
import struct
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

__all__ = ["PVLabel", "MDAHeader", "RawLocn", "PVFingerprint", "Fingerprint",
           "HeaderError", "BlockReader", "calc_crc", "parse_label", "parse_mda_header",
           "read_block", "read_fd", "identity_of", "pv_fingerprint", "vg_fingerprint",
           "read_metadata_text", "MAX_TEXT_BYTES"]

LOG = logging.getLogger(__name__)

SECTOR: Final = 512
#: LVM looks for its label in the first four sectors (LABEL_SCAN_SECTORS)
LABEL_SCAN_SECTORS: Final = 4
LABEL_ID: Final = b"LABELONE"
LABEL_TYPE: Final = b"LVM2 001"
MDA_MAGIC: Final = b" LVM2 x[5A%r0N*>"
MDA_VERSION: Final = 1
MDA_HEADER_SIZE: Final = 512
#: lvm2's calc_crc seed (INITIAL_CRC in lib/misc/crc.h)
INITIAL_CRC: Final = 0xF597A6CF
#: raw_locn flag: this area is ignored (pvchange --metadataignore)
RAW_LOCN_IGNORED: Final = 1
#: the first read of a PV: the label sectors and, usually, the first area's header
#: (at 4 KiB), aligned for O_DIRECT
FIRST_READ_BYTES: Final = 8192
_ALIGN: Final = 4096
#: the largest metadata text read (bytes): a VG of 10,000 LVs writes about 4.4 MB and
#: LVM's default metadata area is 1 MiB; a header claiming more is a doubt, not a read
MAX_TEXT_BYTES: Final = 128 * 1024 ** 2
#: the text is read in reads of at most this many bytes (each one aligned buffer)
TEXT_CHUNK_BYTES: Final = 1024 ** 2

_LABEL_HEADER: Final = struct.Struct("<8sQII8s")   # id, sector, crc, offset, type
_DISK_LOCN: Final = struct.Struct("<QQ")            # offset, size
_MDA_HEADER: Final = struct.Struct("<I16sIQQ")      # checksum, magic, version, start, size
_RAW_LOCN: Final = struct.Struct("<QQII")           # offset, size, checksum, flags
_PV_UUID_LEN: Final = 32


class HeaderError(ValueError):
    """What is on disk is not a valid LVM2 label or metadata-area header."""


@dataclass(frozen=True, slots=True)
class PVLabel:
    """A PV's label: its UUID, size and the disk areas it lists (offset, size)."""

    sector: int
    pv_uuid: str
    device_size_bytes: int
    data_areas: tuple[tuple[int, int], ...]
    metadata_areas: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class RawLocn:
    """Where the committed metadata text is in its area, its size and checksum."""

    offset: int
    size: int
    checksum: int
    flags: int


@dataclass(frozen=True, slots=True)
class MDAHeader:
    """A metadata area's header: its place on disk and the text locations it lists."""

    start: int
    size: int
    raw_locns: tuple[RawLocn, ...]


@dataclass(frozen=True, slots=True)
class PVFingerprint:
    """One PV's part of the fingerprint: path, device identity, each area's raw_locn[0]
    (offset, size, checksum); and, to read the text they point at, the PV's UUID (as
    the label has it, no dashes) and each area's (start, size) on the device."""

    path: str
    device_id: int
    areas: tuple[tuple[int, int, int], ...]
    pv_uuid: str = ""
    mdas: tuple[tuple[int, int], ...] = ()


#: the VG's fingerprint: one entry per PV, in the order the PVs were learned
Fingerprint: TypeAlias = tuple[PVFingerprint, ...]
#: reads ``length`` bytes at ``offset`` of the device at ``path``; returns the device's
#: identity (``st_rdev`` of a block device, else ``st_dev``/``st_ino``) and the bytes
BlockReader: TypeAlias = Callable[[str, int, int], tuple[int, bytes]]


def calc_crc(initial: int, data: bytes) -> int:
    """lvm2's ``calc_crc``: the reflected CRC-32 without zlib's pre- and post-inversion."""
    return zlib.crc32(data, initial ^ 0xFFFFFFFF) ^ 0xFFFFFFFF


def parse_label(head: bytes) -> PVLabel:
    """The LVM2 label in the first four sectors of ``head``; HeaderError if none is valid."""
    for sector in range(LABEL_SCAN_SECTORS):
        block = head[sector * SECTOR:(sector + 1) * SECTOR]
        if len(block) < SECTOR or block[:8] != LABEL_ID:
            continue
        _, sector_xl, crc, offset, kind = _LABEL_HEADER.unpack_from(block)
        if sector_xl != sector:
            raise HeaderError(f"label in sector {sector} says it is in sector {sector_xl}")
        if calc_crc(INITIAL_CRC, block[20:]) != crc:
            raise HeaderError(f"label checksum mismatch in sector {sector}")
        if kind != LABEL_TYPE:
            raise HeaderError(f"label type {kind!r} is not {LABEL_TYPE!r}")
        return _pv_header(block, offset, sector)
    raise HeaderError("no LVM2 label in the first four sectors")


def _pv_header(block: bytes, offset: int, sector: int) -> PVLabel:
    if offset < _LABEL_HEADER.size or offset + _PV_UUID_LEN + 8 > SECTOR:
        raise HeaderError(f"pv_header offset {offset} out of the label sector")
    uuid = block[offset:offset + _PV_UUID_LEN]
    (device_size,) = struct.unpack_from("<Q", block, offset + _PV_UUID_LEN)
    position = offset + _PV_UUID_LEN + 8
    lists: list[tuple[tuple[int, int], ...]] = []
    for _ in range(2):  # data areas, then metadata areas, each ending with a null entry
        areas = []
        while True:
            if position + _DISK_LOCN.size > SECTOR:
                raise HeaderError("pv_header area list runs past the label sector")
            area = _DISK_LOCN.unpack_from(block, position)
            position += _DISK_LOCN.size
            if area[0] == 0:
                break
            areas.append(area)
        lists.append(tuple(areas))
    try:
        pv_uuid = uuid.decode("ascii")
    except UnicodeDecodeError:
        raise HeaderError("pv_header UUID is not ASCII") from None
    return PVLabel(sector=sector, pv_uuid=pv_uuid, device_size_bytes=device_size,
                   data_areas=lists[0], metadata_areas=lists[1])


def parse_mda_header(block: bytes) -> MDAHeader:
    """A metadata-area header (512 bytes), checked as LVM checks it; HeaderError if not."""
    if len(block) < MDA_HEADER_SIZE:
        raise HeaderError(f"metadata-area header is {len(block)} bytes, not {MDA_HEADER_SIZE}")
    block = block[:MDA_HEADER_SIZE]
    checksum, magic, version, start, size = _MDA_HEADER.unpack_from(block)
    if calc_crc(INITIAL_CRC, block[4:]) != checksum:
        raise HeaderError("metadata-area header checksum mismatch")
    if magic != MDA_MAGIC:
        raise HeaderError(f"metadata-area magic {magic!r} is not LVM2's")
    if version != MDA_VERSION:
        raise HeaderError(f"metadata-area header version {version}, not {MDA_VERSION}")
    locns = []
    position = _MDA_HEADER.size
    while position + _RAW_LOCN.size <= MDA_HEADER_SIZE:
        locn = RawLocn(*_RAW_LOCN.unpack_from(block, position))
        position += _RAW_LOCN.size
        if not (locn.offset or locn.size or locn.checksum or locn.flags):
            break
        locns.append(locn)
    return MDAHeader(start=start, size=size, raw_locns=tuple(locns))


_warned_buffered = False


def read_block(path: str, offset: int, length: int) -> tuple[int, bytes]:
    """``length`` bytes at ``offset`` of ``path`` with one O_DIRECT read into an aligned
    buffer (a plain read where a file system refuses O_DIRECT for a regular file, logged
    once; a block device that refuses it raises), and its identity from the same open."""
    global _warned_buffered
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        direct = True
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        direct = False
        if stat.S_ISBLK(os.fstat(fd).st_mode):
            # a device's page cache need not see another host's commit (a shared VG):
            # only a direct read is proof; without it, a doubt
            os.close(fd)
            raise
        if not _warned_buffered:
            _warned_buffered = True
            LOG.info("%s refuses O_DIRECT; reading LVM headers through the page cache",
                     path)
    try:
        return identity_of(os.fstat(fd)), read_fd(fd, offset, length, direct=direct)
    finally:
        os.close(fd)


def identity_of(info: os.stat_result) -> int:
    """A device's identity: ``st_rdev`` of a block device, else ``st_dev``/``st_ino``."""
    return info.st_rdev if stat.S_ISBLK(info.st_mode) else (info.st_dev << 64 | info.st_ino)


def read_fd(fd: int, offset: int, length: int, *, direct: bool) -> bytes:
    """``length`` bytes at ``offset`` of open ``fd``, read in whole aligned blocks into
    an aligned buffer (as O_DIRECT, ``direct``, wants)."""
    start = offset - offset % _ALIGN
    size = -(-(offset + length - start) // _ALIGN) * _ALIGN
    if not direct:
        return os.pread(fd, size, start)[offset - start:offset - start + length]
    buffer = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT wants
    try:
        count = os.preadv(fd, [buffer], start)
        with memoryview(buffer) as view:  # one copy of the bytes asked for, not two
            return bytes(view[offset - start:min(count, offset - start + length)])
    finally:
        buffer.close()


def pv_fingerprint(path: str, mda_count: int, *,
                   read: BlockReader = read_block) -> PVFingerprint:
    """PV ``path``'s part of the fingerprint, checked to have ``mda_count`` metadata areas;
    HeaderError or OSError on any doubt."""
    identity, head = read(path, 0, FIRST_READ_BYTES)
    label = parse_label(head)
    if len(label.metadata_areas) != mda_count:
        raise HeaderError(f"{path} lists {len(label.metadata_areas)} metadata areas, "
                          f"LVM said {mda_count}")
    areas, mdas = [], []
    for area_offset, area_size in label.metadata_areas:
        if area_offset + MDA_HEADER_SIZE <= len(head):
            block = head[area_offset:area_offset + MDA_HEADER_SIZE]
        else:
            area_identity, block = read(path, area_offset, MDA_HEADER_SIZE)
            if area_identity != identity:
                raise HeaderError(f"{path} changed device between two reads")
        header = parse_mda_header(block)
        if header.start != area_offset:
            raise HeaderError(f"{path}: metadata area at {area_offset} says it starts "
                              f"at {header.start}")
        if header.size != area_size:  # LVM writes both from one figure
            raise HeaderError(f"{path}: metadata area at {area_offset} says it is "
                              f"{header.size} bytes, the label {area_size}")
        if len(header.raw_locns) != 1:  # none: no metadata; two: a commit under way
            raise HeaderError(f"{path}: metadata area at {area_offset} lists "
                              f"{len(header.raw_locns)} text locations, not 1")
        locn = header.raw_locns[0]
        if locn.flags:
            raise HeaderError(f"{path}: metadata area at {area_offset} has flags "
                              f"{locn.flags:#x} (ignored)")
        areas.append((locn.offset, locn.size, locn.checksum))
        mdas.append((header.start, header.size))
    return PVFingerprint(path=path, device_id=identity, areas=tuple(areas),
                         pv_uuid=label.pv_uuid, mdas=tuple(mdas))


def vg_fingerprint(pvs: Sequence[tuple[str, int]], *,
                   read: BlockReader = read_block) -> Fingerprint | None:
    """The fingerprint of the VG whose PVs are ``pvs`` (path, metadata-area count), or
    None on any doubt (no PV, no metadata area at all, anything unreadable or unexpected)."""
    if not pvs:
        return None
    try:
        fingerprint = tuple(pv_fingerprint(path, count, read=read) for path, count in pvs)
    except (HeaderError, OSError) as exc:
        LOG.debug("metadata fingerprint unknown: %s", exc)
        return None
    if not any(pv.areas for pv in fingerprint):
        return None
    return fingerprint


def read_metadata_text(pv: PVFingerprint, *, read: BlockReader = read_block) -> bytes:
    """The VG metadata text that ``pv``'s first metadata area's raw_locn[0] points at,
    as LVM reads it: ``size`` bytes from ``offset`` in the area, wrapping to just after
    the area's header when they run past its end; checked against the raw_locn's
    checksum and against every other area of ``pv`` (same size and checksum: the same
    text). At most MAX_TEXT_BYTES, read into an aligned buffer kept between reads where
    ``read`` is this module's direct read (else TEXT_CHUNK_BYTES at a time through
    ``read``), so a forged header costs at most two copies of that in memory, and
    keeps none. Without its trailing NUL. HeaderError or OSError on any doubt."""
    if not pv.areas or len(pv.mdas) != len(pv.areas):
        raise HeaderError(f"{pv.path}: no metadata area to read the text from")
    offset, size, checksum = pv.areas[0]
    if any((other[1], other[2]) != (size, checksum) for other in pv.areas[1:]):
        raise HeaderError(f"{pv.path}: its metadata areas hold different texts")
    start, area_size = pv.mdas[0]
    if offset < MDA_HEADER_SIZE or offset >= area_size or not 0 < size <= (
            area_size - MDA_HEADER_SIZE):
        raise HeaderError(f"{pv.path}: text location {offset}+{size} is out of its "
                          f"metadata area of {area_size} bytes")
    if size > MAX_TEXT_BYTES:
        raise HeaderError(f"{pv.path}: a metadata text of {size} bytes is above the "
                          f"ceiling of {MAX_TEXT_BYTES} read")
    wrap = max(0, offset + size - area_size)
    parts = [(start + offset, size - wrap)]
    if wrap:
        parts.append((start + MDA_HEADER_SIZE, wrap))
    if read is read_block:
        text = _read_direct(pv, parts, checksum)
        if text is not None:
            return text
    chunks = []
    for part_offset, part_length in parts:
        for chunk_offset in range(part_offset, part_offset + part_length, TEXT_CHUNK_BYTES):
            length = min(TEXT_CHUNK_BYTES, part_offset + part_length - chunk_offset)
            identity, data = read(pv.path, chunk_offset, length)
            if identity != pv.device_id or len(data) != length:
                raise HeaderError(f"{pv.path} changed device, or ended, under the text "
                                  f"read")
            chunks.append(data)
    return _checked_text(pv.path, chunks, checksum)


class _KeptBuffer:
    """One page-aligned buffer kept between direct reads of metadata texts: mapping,
    faulting in and unmapping 36 MiB anew costs more than reading the text (about 30
    of 75 ms per refresh at 100,000 LVs). One read holds it at a time (another maps
    its own meanwhile); a read that fails lets it go, so a forged header leaves no
    large buffer behind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer: mmap.mmap | None = None

    @contextmanager
    def hold(self, size: int) -> Iterator[mmap.mmap]:
        """A buffer of at least ``size`` bytes (a multiple of the page size)."""
        if not self._lock.acquire(blocking=False):
            with mmap.mmap(-1, size) as own:
                yield own
            return
        try:
            buffer, self._buffer = self._buffer, None
            if buffer is not None and not size <= len(buffer) <= 4 * size:
                buffer.close()
                buffer = None
            if buffer is None:  # room for the text to grow by an eighth
                buffer = mmap.mmap(-1, -(-(size + size // 8) // _ALIGN) * _ALIGN)
            try:
                yield buffer
            except BaseException:
                with suppress(BufferError):  # a view still held: unmapped once collected
                    buffer.close()
                raise
            self._buffer = buffer
        finally:
            self._lock.release()


_KEPT = _KeptBuffer()


def _read_direct(pv: PVFingerprint, parts: list[tuple[int, int]], checksum: int) -> bytes | None:
    """The text's parts read with one O_DIRECT open, each part with one read into a
    kept aligned buffer, and joined with one copy (a 36 MiB text in chunks of bytes costs
    three copies, each page faulted in); None where the device refuses O_DIRECT."""
    try:
        fd = os.open(pv.path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        return None
    spans = []
    for part_offset, part_length in parts:
        first = part_offset - part_offset % _ALIGN
        spans.append((first, -(-(part_offset + part_length - first) // _ALIGN) * _ALIGN))
    views: list[memoryview] = []
    try:
        if identity_of(os.fstat(fd)) != pv.device_id:
            raise HeaderError(f"{pv.path} changed device under the text read")
        with _KEPT.hold(sum(span for _, span in spans)) as buffer:
            whole = memoryview(buffer)
            try:
                at = 0  # each part's span at a page boundary of the buffer
                for (part_offset, part_length), (first, span) in zip(parts, spans):
                    with whole[at:at + span] as target:
                        count = os.preadv(fd, [target], first)
                    if count < part_offset + part_length - first:
                        raise HeaderError(f"{pv.path} ended under the text read")
                    start = at + part_offset - first
                    views.append(whole[start:start + part_length])
                    at += span
                return _checked_text(pv.path, views, checksum)
            finally:
                for view in views:
                    view.release()
                whole.release()
    finally:
        os.close(fd)


def _checked_text(path: str, chunks: list[Any], checksum: int) -> bytes:
    """The text of ``chunks`` (bytes-like, in order), checked against LVM's checksum,
    without its trailing NULs; at most one copy of it made."""
    crc = INITIAL_CRC
    for chunk in chunks:
        crc = calc_crc(crc, chunk)
    if crc != checksum:
        raise HeaderError(f"{path}: metadata text checksum mismatch (a commit since "
                          f"its header was read?)")
    chunks = list(chunks)
    while chunks:  # the trailing NULs cut where they are, not from a copy of the text
        last = chunks[-1]
        tail = bytes(last[-_ALIGN:])
        kept = len(tail.rstrip(b"\0"))
        if kept:
            chunks[-1] = last[:len(last) - len(tail) + kept]
            break
        chunks[-1] = last[:len(last) - len(tail)]
        if not chunks[-1]:
            chunks.pop()
    return b"".join(chunks)  # the one chunk itself where it is one of bytes
