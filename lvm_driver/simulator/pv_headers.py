"""Real LVM2 label and metadata-area headers in the files that stand for simulated PVs.

Each metadata commit of a VG (its seqno changed, once the state is saved)
rewrites, in place, the label (sector 1) and the metadata-area header (at
4 KiB) of each of its PVs that is a regular file, as LVM writes them, and the
VG's metadata text (``metadata_text``) into the area's circular buffer where
``raw_locn[0]`` points, wrapping past the area's end as LVM does: so the
driver's ``lvm_driver.read.mda`` and ``vg_metadata`` read the simulator's PVs exactly
as they read a disk, and see every simulated commit in ``raw_locn[0]``. A text
too big for its area is not written (its checksum is, so a reader finds a
mismatch, a doubt). PVs that are not
files (``/dev/sim/...`` pseudo devices) get no header: the driver's
fingerprint of them is a doubt, and every report a full one.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, Final

from lvm_driver.read.mda import (INITIAL_CRC, LABEL_ID, LABEL_SCAN_SECTORS, LABEL_TYPE,
                                 MDA_HEADER_SIZE, MDA_MAGIC, MDA_VERSION, SECTOR, HeaderError,
                                 calc_crc, parse_label)
from lvm_driver.simulator.metadata_text import label_uuid, metadata_text
from lvm_driver.simulator.sizes import PV_METADATA_BYTES

__all__ = ["MDA_OFFSET", "vg_seqnos", "write_changed_headers", "label_sector", "mda_header",
           "text_offset", "holds_pv_label"]

#: where the metadata area starts (as pvcreate puts it) and how big it is
MDA_OFFSET: Final = 4096
_MDA_SIZE: Final = PV_METADATA_BYTES - MDA_OFFSET
_LABEL_SECTOR: Final = 1


def vg_seqnos(state: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """Each VG's (uuid, seqno): what a commit changes."""
    return {name: (vg.get("uuid", ""), vg.get("seqno", 0))
            for name, vg in state.get("vgs", {}).items()}


def label_sector(pv_uuid: str, device_size: int) -> bytes:
    """The 512-byte label sector of a PV with one data area and one metadata area."""
    body = bytearray(SECTOR)
    uuid = label_uuid(pv_uuid).encode("ascii")
    struct.pack_into("<32sQ", body, 32, uuid, device_size)
    struct.pack_into("<QQQQQQQQ", body, 72, PV_METADATA_BYTES, 0, 0, 0,
                     MDA_OFFSET, _MDA_SIZE, 0, 0)
    struct.pack_into("<8sQII8s", body, 0, LABEL_ID, _LABEL_SECTOR, 0, 32, LABEL_TYPE)
    struct.pack_into("<I", body, 16, calc_crc(INITIAL_CRC, bytes(body[20:])))
    return bytes(body)


def holds_pv_label(path: str) -> bool:
    """Whether the regular file ``path`` holds a valid LVM2 label (a PV's, kept even when
    the state that listed it is lost)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(LABEL_SCAN_SECTORS * SECTOR)
    except (FileNotFoundError, IsADirectoryError):
        return False
    try:
        parse_label(head)
    except HeaderError:
        return False
    return True


def text_offset(vg: dict[str, Any]) -> int:
    """Where in the area commit ``vg['seqno']``'s text starts (moving with every commit)."""
    slots = (_MDA_SIZE - MDA_HEADER_SIZE) // SECTOR
    return MDA_HEADER_SIZE + (vg["seqno"] % slots) * SECTOR


def mda_header(vg: dict[str, Any], text: bytes | None = None) -> bytes:
    """The metadata-area header after commit ``vg['seqno']``: raw_locn[0] points at the
    VG's metadata text (default: its whole record), so its checksum changes with every
    change of the VG, as LVM's does; the same text gives the same header."""
    if text is None:
        text = (f'{vg["name"]} {{\nid = "{vg.get("uuid", "")}"\nseqno = {vg["seqno"]}\n}}\n'
                f'{json.dumps(vg, sort_keys=True)}\n').encode()
    offset = text_offset(vg)
    block = bytearray(MDA_HEADER_SIZE)
    struct.pack_into("<I16sIQQQQII", block, 0, 0, MDA_MAGIC, MDA_VERSION, MDA_OFFSET,
                     _MDA_SIZE, offset, len(text), calc_crc(INITIAL_CRC, text), 0)
    struct.pack_into("<I", block, 0, calc_crc(INITIAL_CRC, bytes(block[4:])))
    return bytes(block)


def write_changed_headers(state: dict[str, Any], before: dict[str, tuple[str, int]]) -> None:
    """Rewrite the headers of each PV file of each VG committed since ``before``."""
    for name, mark in vg_seqnos(state).items():
        if before.get(name) == mark:
            continue
        vg = state["vgs"][name]
        files = [path for path in vg.get("pvs", [])
                 if path in state["pvs"] and os.path.isfile(path)]
        if not files:
            continue
        text = metadata_text(vg, state["pvs"]).encode() + b"\0"
        for path in files:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                _write_text(fd, text_offset(vg), text)
                os.pwrite(fd, label_sector(state["pvs"][path].get("uuid", ""),
                                           state["pvs"][path]["size"]),
                          _LABEL_SECTOR * SECTOR)
                os.pwrite(fd, mda_header(vg, text), MDA_OFFSET)
            finally:
                os.close(fd)


def _write_text(fd: int, offset: int, text: bytes) -> None:
    """``text`` into the circular buffer at ``offset`` of the area, wrapping to just
    after its header; not at all when bigger than the buffer."""
    if len(text) > _MDA_SIZE - MDA_HEADER_SIZE:
        return
    first = text[:_MDA_SIZE - offset]
    os.pwrite(fd, first, MDA_OFFSET + offset)
    if len(first) < len(text):
        os.pwrite(fd, text[len(first):], MDA_OFFSET + MDA_HEADER_SIZE)
