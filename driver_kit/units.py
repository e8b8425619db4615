"""Units: integer bytes inside, GiB with 2 decimals at the edge.

Rounding is conservative so that a consumer never sees more room than there
is: total and free round down, provisioned (and anything used) rounds up.
Volume sizes given to the kit are whole GiB, read by one parser,
``parse_size_gb``, for the Python API and the command line alike.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from typing import Any, Final

from driver_kit.exceptions import InvalidSize

__all__ = ["GiB", "MiB", "MAX_CAPACITY_BYTES", "MAX_VOLUME_BYTES", "MAX_VOLUME_GB",
           "bytes_to_gb_down",
           "bytes_to_gb_up", "gb_to_bytes", "human_gb", "parse_size_gb", "round_down_2",
           "round_up_2"]

MiB: Final = 1024 ** 2
GiB: Final = 1024 ** 3
#: The largest volume LVM makes on a 64-bit host, 8 EiB: the largest block device
#: Linux addresses (a signed 64-bit byte offset), libblockdev's BD_LVM_MAX_LV_SIZE.
#: LVM itself refuses any size argument of 16 EiB or more ("Size is too big").
MAX_VOLUME_BYTES: Final = 8 * 1024 ** 6
MAX_VOLUME_GB: Final = MAX_VOLUME_BYTES // GiB
#: The largest capacity figure the kit reports, 2^76 bytes (64 ZiB): its GiB with 2
#: decimals still fits a float's 53 bits (2^46 GiB is 7.0e15 hundredths, 2^53 is 9.0e15),
#: so rounding stays conservative. No pool is that large: a larger figure is a misread.
MAX_CAPACITY_BYTES: Final = 2 ** 76
_CENT: Final = Decimal("0.01")


def _check_bytes(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a byte count must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"a byte count cannot be negative, got {value}")
    if value > MAX_CAPACITY_BYTES:
        shown = value if value.bit_length() <= 200 else f"{value.bit_length()} bits"
        raise ValueError(f"a byte count of {shown} is more than 2^76 bytes (64 ZiB): "
                         f"no pool is that large")
    return value


def bytes_to_gb_down(value: int) -> float:
    """Bytes to GiB with 2 decimals, rounded down (for total and free)."""
    return _check_bytes(value) * 100 // GiB / 100


def bytes_to_gb_up(value: int) -> float:
    """Bytes to GiB with 2 decimals, rounded up (for provisioned and used)."""
    return -(-_check_bytes(value) * 100 // GiB) / 100


def _check_float(value: float) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    # repr() gives the shortest decimal that round-trips, so 0.29 stays 0.29.
    return Decimal(repr(float(value)))


#: enough digits for any finite float to 2 decimals (the default 28 are not)
_WIDE = Context(prec=400)


def round_down_2(value: float) -> float:
    """A GiB figure rounded down to 2 decimals."""
    return float(_check_float(value).quantize(_CENT, rounding=ROUND_FLOOR, context=_WIDE))


def round_up_2(value: float) -> float:
    """A GiB figure rounded up to 2 decimals."""
    return float(_check_float(value).quantize(_CENT, rounding=ROUND_CEILING, context=_WIDE))


def human_gb(value: float) -> str:
    """A GiB figure for a message: digits grouped, at most 2 decimals, with TiB, PiB or
    EiB beside it when that large (``8,589,934,592 GiB (8 EiB)``), never ``8.6e+09``."""
    text = f"{value:,.2f}".rstrip("0").rstrip(".") + " GiB"
    for unit, scale in (("EiB", 1024 ** 3), ("PiB", 1024 ** 2), ("TiB", 1024)):
        if abs(value) >= scale:
            return f"{text} ({value / scale:,.2f}".rstrip("0").rstrip(".") + f" {unit})"
    return text


def gb_to_bytes(size_gb: int) -> int:
    """Whole GiB to bytes; sizes of volumes are whole GiB as in Cinder."""
    if isinstance(size_gb, bool) or not isinstance(size_gb, int):
        raise TypeError(f"a size in GiB must be an int, got {size_gb!r}")
    return size_gb * GiB


def _shown(value: Any) -> str:
    """``value`` for a one-line message: short, even for a number of 10**400."""
    if isinstance(value, int) and abs(value).bit_length() > 100:
        return f"a {'negative ' if value < 0 else ''}number of {abs(value).bit_length()} bits"
    text = " ".join(repr(value).split())
    return text if len(text) <= 40 else f"{text[:37]}..."


def parse_size_gb(value: Any, what: str = "size", *, from_text: bool = False) -> int:
    """A volume size: a whole number of GiB from 1 to ``MAX_VOLUME_GB``, as in Cinder.

    The Python API passes an int (or a float without fraction; ``bool`` is
    refused). The command line passes its text (``from_text``), which must be
    ASCII digits only: no sign, space, underscore, exponent, base prefix or
    other script's digits, all of which ``int()`` would accept. Every refusal
    raises ``InvalidSize`` with a one-line message.
    """
    if from_text and isinstance(value, str):
        if not (value.isascii() and value.isdigit()):
            raise InvalidSize(f"{what} must be a whole number of GiB written with the "
                              f"digits 0-9 only, got {_shown(value)}")
        digits = value.lstrip("0") or "0"
        if len(digits) > len(str(MAX_VOLUME_GB)):  # never int() a 10,000-digit text
            raise _too_large(what, f"a number of {len(digits)} digits")
        value = int(digits)
    elif isinstance(value, float) and value.is_integer():  # NaN and infinities are not
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSize(f"{what} must be a whole number of GiB, got {_shown(value)}")
    if value <= 0:
        raise InvalidSize(f"{what} must be at least 1 GiB, got {_shown(value)}")
    if value > MAX_VOLUME_GB:
        raise _too_large(what, _shown(value))
    return value


def _too_large(what: str, shown: str) -> InvalidSize:
    return InvalidSize(f"{what} must be at most {MAX_VOLUME_GB} GiB (8 EiB, the largest "
                       f"volume LVM can make), got {shown}")
