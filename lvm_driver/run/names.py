"""LVM's naming rules for VGs, LVs and tags, and exact size arguments.

Checked before any LVM process starts, so a bad name never reaches a command
line (and cannot look like an option).
"""

from __future__ import annotations

import re
from typing import Final

from driver_kit.exceptions import InvalidInput, InvalidName, InvalidSize

# ---------------------------------------------------------------------------
# Names (LVM 2.03 lib/misc/lvm-string.c and lvm(8) "VALID NAMES")

#: LVM's NAME_LEN is 128 including the terminating NUL.
NAME_MAX_LENGTH: Final = 127
_NAME_RE = re.compile(r"[A-Za-z0-9+_.-]+")
_TAG_RE = re.compile(r"[A-Za-z0-9_+.\-/=!:&#]+")
#: LVM refuses LV names that *start* with these (not only the exact words).
_RESERVED_PREFIXES: Final = ("pvmove", "snapshot")
#: LVM refuses LV names containing these anywhere (names of its internal LVs).
_RESERVED_SUBSTRINGS: Final = (
    "_cdata", "_cmeta", "_corig", "_cpool", "_cvol", "_wcorig", "_mimage",
    "_mlog", "_rimage", "_rmeta", "_tdata", "_tmeta", "_vdata", "_imeta",
    "_iorig", "_pmspare", "_vorigin",
)


def _check_common_name(name: object, kind: str) -> str:
    if not isinstance(name, str):
        raise InvalidName(f"{kind} name must be a str, got {type(name).__name__}")
    if not name:
        raise InvalidName(f"{kind} name is empty")
    if "\0" in name:
        raise InvalidName(f"{kind} name {name!r} contains a NUL character")
    if any(ch.isspace() for ch in name):
        raise InvalidName(f"{kind} name {name!r} contains whitespace")
    if name.startswith("-"):
        raise InvalidName(
            f"{kind} name {name!r} starts with '-' (LVM would read it as an option)")
    if name in (".", ".."):
        raise InvalidName(f"{kind} name {name!r} is reserved ('.' and '..' are not allowed)")
    if not _NAME_RE.fullmatch(name):
        bad = "".join(sorted({ch for ch in name if not _NAME_RE.fullmatch(ch)}))
        raise InvalidName(
            f"{kind} name {name!r} contains characters LVM does not allow ({bad!r}); "
            "allowed are A-Z a-z 0-9 + _ . -")
    if len(name) > NAME_MAX_LENGTH:
        raise InvalidName(
            f"{kind} name is {len(name)} characters long; LVM allows at most "
            f"{NAME_MAX_LENGTH}")
    return name


def validate_vg_name(name: str) -> str:
    """Return ``name`` if LVM accepts it as a VG name, else raise InvalidName.

    (LVM also refuses a new VG named like an entry of /dev; that needs I/O
    and is left to vgcreate.)
    """
    return _check_common_name(name, "volume group")


def validate_lv_name(name: str) -> str:
    """Return ``name`` if LVM accepts it as a new LV name, else raise InvalidName."""
    _check_common_name(name, "logical volume")
    for prefix in _RESERVED_PREFIXES:
        if name.startswith(prefix):
            raise InvalidName(
                f"logical volume name {name!r} starts with {prefix!r}, which LVM "
                "reserves")
    for part in _RESERVED_SUBSTRINGS:
        if part in name:
            raise InvalidName(
                f"logical volume name {name!r} contains {part!r}, which LVM "
                "reserves for its internal volumes")
    return name


def validate_tag(tag: str) -> str:
    """Return ``tag`` if LVM accepts it (A-Z a-z 0-9 _ + . - / = ! : & #)."""
    if not isinstance(tag, str):
        raise InvalidInput(f"an LVM tag must be a str, got {type(tag).__name__}")
    if not _TAG_RE.fullmatch(tag):
        raise InvalidInput(
            f"LVM tag {tag!r} is empty or contains characters LVM does not allow; "
            "allowed are A-Z a-z 0-9 _ + . - / = ! : & #")
    return tag


def size_argument(size_bytes: int) -> str:
    """An exact LVM size argument (``<n>b``) for a positive byte count.

    LVM only takes byte sizes that are whole sectors, so the count is rounded
    up to 512; LVM then rounds it up to whole extents itself.
    """
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int):
        raise InvalidSize(f"a size in bytes must be an int, got {size_bytes!r}")
    if size_bytes <= 0:
        raise InvalidSize(f"a size must be positive, got {size_bytes} bytes")
    return f"{-(-size_bytes // 512) * 512}b"


