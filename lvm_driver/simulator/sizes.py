"""Sizes as LVM reads and prints them: its units, its limits, its rounding.

``parse_size`` reads a Size[UNIT] argument as LVM does (whole sectors, MiB by
default, nothing of 16 EiB or more); ``human`` and ``format_size`` print sizes
in libdm's formats, so reports match real LVM's byte for byte.
"""

from __future__ import annotations

import math
import re
from typing import Final

from lvm_driver.simulator.errors import parse_error

KiB: Final = 1024
MiB: Final = 1024 ** 2
GiB: Final = 1024 ** 3
SECTOR: Final = 512
DEFAULT_EXTENT_SIZE: Final = 4 * MiB
#: LVM refuses a size argument of 16 EiB or more, and an LV of more extents than
#: a 32-bit count holds (lib/metadata: MAX_EXTENT_COUNT).
SIZE_ARG_LIMIT_BYTES: Final = 2 ** 64
MAX_EXTENT_COUNT: Final = 2 ** 32 - 1
#: pvcreate keeps the first MiB of a device for labels and metadata.
PV_METADATA_BYTES: Final = 1 * MiB

_UNITS = "EPTGMK"


def human(size_bytes: int) -> str:
    """LVM's default ``r`` units: 2 decimals, '<' when rounded up."""
    if size_bytes == 0:
        return "0 "
    byte = 1024 ** 6
    index = 0
    while index < 6 and size_bytes < byte:
        byte //= 1024
        index += 1
    if index == 6:
        return f"{size_bytes} B"
    hundredths = 100 * size_bytes / byte
    prefix = "<" if math.floor(hundredths) != round(hundredths) else ""
    return f"{prefix}{size_bytes / byte:.2f} {_UNITS[index]}iB"


def percent_text(used: int, total: int) -> str:
    """A percentage as LVM prints it: never 0.00 or 100.00 unless exact."""
    if total <= 0:
        return "100.00"
    percent = 100.0 * used / total
    if 0 < percent < 0.01:
        percent = 0.01
    elif 99.99 < percent < 100:
        percent = 99.99
    return f"{percent:.2f}"


def format_size(size_bytes: int, units: str, suffix: bool) -> str:
    """A size field in ``--units`` (b, s, k..e binary, K..E decimal, h/r human)."""
    if units in ("h", "H", "r", "R"):
        text = human(size_bytes).replace(" ", "")
        return text[:-2].lower() if text[-2:] == "iB" else text[:-1]
    if units in ("b", "B"):
        return f"{size_bytes}{'B' if suffix else ''}"
    if units in ("s", "S"):
        return f"{size_bytes // SECTOR}{'S' if suffix else ''}"
    power = "kmgtpe".index(units.lower()) + 1
    base = 1024 if units.islower() else 1000
    value = size_bytes / base ** power
    return f"{value:.2f}{units if suffix else ''}"


_SIZE_RE = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)([bBsSkKmMgGtTpPeE]?)")
_UNIT_FACTORS = {"b": 1, "s": SECTOR, "k": KiB, "m": MiB, "g": GiB,
                 "t": 1024 ** 4, "p": 1024 ** 5, "e": 1024 ** 6}


def parse_size(text: str, option: str) -> tuple[str, int]:
    """LVM's Size[UNIT] argument (default MiB) -> (sign, bytes in whole sectors)."""
    match = _SIZE_RE.fullmatch(text)
    if not match:
        raise parse_error(f"Invalid argument for {option}: {text}")
    sign, number, unit = match.groups()
    if sign == "-":
        raise parse_error("Size may not be negative.", f"Invalid argument for {option}: {text}")
    factor = _UNIT_FACTORS[(unit or "m").lower()]
    if float(number) * factor >= SIZE_ARG_LIMIT_BYTES:  # LVM compares as a double too
        raise parse_error("Size is too big (>=16EiB).", f"Invalid argument for {option}: {text}")
    if factor == 1:
        if "." in number:
            raise parse_error(f"Invalid argument for {option}: {text}")
        value = int(number)
        if value % SECTOR:
            low = value // SECTOR * SECTOR
            raise parse_error(
                f"Size is not a multiple of 512. Try using {low} or {low + SECTOR}.",
                f"Invalid argument for {option}: {text}")
        return sign, value
    exact = float(number) * factor
    return sign, math.ceil(exact / SECTOR) * SECTOR
