"""LVM's own limits on the values of a VG metadata text, as its reader applies them
(lib/format_text/import_vsn1.c, lib/thin/thin.c, lib/uuid/uuid.c, lvm(8)): what a
text may hold for ``vg_metadata`` to read it at face value, and the exception for
anything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from lvm_driver.run.names import NAME_MAX_LENGTH

__all__ = ["MetadataUnsupported", "MAX_UINT32", "MAX_UINT64", "MAX_EXTENT_SECTORS", "ID",
           "NAME", "TAG", "is_count", "SEGMENT_CHECKS", "tags_of", "check_text_start",
           "check_extents", "check_unique_ids"]


class MetadataUnsupported(ValueError):
    """The metadata text holds something the reader does not fully understand, or that
    LVM itself would refuse or read otherwise than at face value."""


#: LVM reads these settings as 32-bit counts, silently keeping the low 32 bits of more
MAX_UINT32: Final = 2 ** 32 - 1
#: ... and these as 64-bit ones (a size in bytes past it wraps in LVM's report)
MAX_UINT64: Final = 2 ** 64 - 1
#: an id as LVM writes it: 32 of its id characters, grouped 6-4-4-4-4-4-6 (LVM also
#: reads other dashes, which it never writes)
ID: Final = re.compile(r"[0-9A-Za-z!#]{6}(?:-[0-9A-Za-z!#]{4}){5}-[0-9A-Za-z!#]{6}")
NAME: Final = re.compile(r"[A-Za-z0-9+_.-]{1,%d}" % NAME_MAX_LENGTH)
#: a tag as LVM allows it (lvm(8)): a tag with a comma would read as two in ``lv_tags``
TAG: Final = re.compile(r"[A-Za-z0-9_+.\-/=!:&#]{1,1024}")
_DISCARDS: Final = frozenset({"passdown", "nopassdown", "ignore"})
#: a thin pool's chunk in sectors (DM_THIN_MIN/MAX_DATA_BLOCK_SIZE): 64 KiB to 1 GiB, in
#: whole 64 KiB
_THIN_CHUNK: Final = (128, 2 * 1024 ** 2)
#: the largest extent (sectors) whose 2^32 - 1 make at most 2^64 - 1 bytes
MAX_EXTENT_SECTORS: Final = 2 ** 23
#: a thin device id is 24 bits (DM_THIN_MAX_DEVICE_ID)
_MAX_DEVICE_ID: Final = 2 ** 24 - 1
#: what ends the name a text read from a device begins with (C's isspace, or "{")
_NAME_ENDS: Final = frozenset({b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"{"})


def is_count(value: object, limit: int = MAX_UINT32) -> bool:
    """Whether ``value`` is a count LVM reads as it is (0 to ``limit``)."""
    return type(value) is int and 0 <= value <= limit


# the segment checks run for each of 10,000 LVs: messages are formatted only on failure
def _check_striped(segment: dict[str, Any], name: str) -> None:
    count, stripes = segment.get("stripe_count"), segment.get("stripes", ())
    if not (is_count(count) and count >= 1 and type(stripes) is tuple  # type: ignore[operator]
            and len(stripes) == 2 * count and segment["extent_count"] % count == 0
            and all(type(stripes[i]) is str and is_count(stripes[i + 1])
                    for i in range(0, len(stripes), 2))
            and ("stripe_size" in segment) == (count > 1)  # type: ignore[operator]
            and (count == 1 or is_count(segment["stripe_size"]) and segment["stripe_size"])):
        raise MetadataUnsupported(f"LV {name}: stripes {stripes!r} are not (PV, 32-bit "
                                  f"extent) pairs, or its stripe count or size")


def _check_thin_pool(segment: dict[str, Any], name: str) -> None:
    chunk, discards = segment.get("chunk_size"), segment.get("discards", "ignore")
    if not (is_count(segment.get("transaction_id"), MAX_UINT64) and is_count(chunk)
            and _THIN_CHUNK[0] <= chunk <= _THIN_CHUNK[1]  # type: ignore[operator]
            and chunk % _THIN_CHUNK[0] == 0  # type: ignore[operator]
            and type(discards) is str and discards.lower() in _DISCARDS
            and "metadata" in segment and "pool" in segment
            and is_count(segment.get("crop_metadata", 0))):
        raise MetadataUnsupported(f"LV {name}: chunk size {chunk!r}, discards {discards!r} "
                                  f"or transaction id LVM refuses, or no metadata or data "
                                  f"LV")


def _check_thin(segment: dict[str, Any], name: str) -> None:
    transaction, device = segment.get("transaction_id"), segment.get("device_id")
    if not (type(transaction) is int and 0 <= transaction <= MAX_UINT64  # type: ignore
            and type(device) is int and 0 <= device <= _MAX_DEVICE_ID  # type: ignore
            and "thin_pool" in segment):
        raise MetadataUnsupported(f"LV {name}: its transaction id, device id (24 bits) or "
                                  f"pool")


def _check_snapshot(segment: dict[str, Any], name: str) -> None:
    chunk = segment.get("chunk_size")
    # lvcreate takes a COW chunk of 4 KiB to 512 KiB, a power of two
    if not (is_count(chunk) and 8 <= chunk <= 1024  # type: ignore[operator]
            and chunk & (chunk - 1) == 0):  # type: ignore[operator]
        raise MetadataUnsupported(f"LV {name}: COW chunk size {chunk!r} sectors")


#: each segment type's own checks (its references are checked with the whole VG)
SEGMENT_CHECKS: Final = {"striped": _check_striped, "thin-pool": _check_thin_pool,
                          "thin": _check_thin, "snapshot": _check_snapshot}


def tags_of(section: dict[str, Any], where: str) -> tuple[str, ...]:
    """The section's tags, sorted as ``lvs`` prints them, each a string LVM allows."""
    tags = section.get("tags", ())
    if type(tags) is not tuple or not all(type(tag) is str and TAG.fullmatch(tag)
                                          for tag in tags):
        raise MetadataUnsupported(f"{where}: tags {tags!r} are not tags LVM allows")
    return tuple(sorted(tags))


def check_text_start(raw: bytes, vg_name: str) -> None:
    """MetadataUnsupported unless a text read from a PV (its bytes) begins with the VG's
    name and a blank or ``{``: LVM reads no text from a device that does not (a backup
    file, which LVM reads without this check, begins with a comment)."""
    name = vg_name.encode()
    if not (raw.startswith(name) and raw[len(name):len(name) + 1] in _NAME_ENDS):
        raise MetadataUnsupported(f"the text does not begin with the VG's name {vg_name!r}")


def check_extents(pe_counts: dict[str, int], lvs: Iterable[Any]) -> None:
    """Every striped LV's extents within its PV's (``pe_counts``: PV section name ->
    extents), and none taken twice (LVM refuses both); ``lvs``: checked LV sections
    (their ``name``, ``kind`` and ``segments``)."""
    taken: list[tuple[str, int, int, str]] = []
    for lv in lvs:
        if lv.kind != "striped":
            continue
        for segment in lv.segments:
            stripes = segment["stripes"]
            length = segment["extent_count"] // segment["stripe_count"]
            for index in range(0, len(stripes), 2):
                pv, first = stripes[index], stripes[index + 1]
                if first + length > pe_counts.get(pv, 0):
                    raise MetadataUnsupported(f"LV {lv.name}: extents {first}.."
                                              f"{first + length - 1} are past the end of "
                                              f"PV {pv}")
                taken.append((pv, first, first + length, lv.name))
    taken.sort()
    for (pv, _, end, name), (other_pv, first, _, other) in zip(taken, taken[1:]):
        if pv == other_pv and first < end:
            raise MetadataUnsupported(f"PV {pv}: LVs {name} and {other} share extent "
                                      f"{first}")


def check_unique_ids(ids: Iterable[str]) -> None:
    """No two LV sections with one id: LVM reads such a VG from disk but refuses to
    write it (vgcfgrestore): a VG corrupted, not one to report."""
    ids = list(ids)
    if len(set(ids)) != len(ids):
        raise MetadataUnsupported("two LVs have the same id")
