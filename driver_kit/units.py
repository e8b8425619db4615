"""Units: integer bytes inside, GiB with 2 decimals at the edge.

Rounding is conservative so that a consumer never sees more room than there
is: total and free round down, provisioned (and anything used) rounds up.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Final

__all__ = ["GiB", "MiB", "bytes_to_gb_down", "bytes_to_gb_up", "gb_to_bytes",
           "round_down_2", "round_up_2"]

MiB: Final = 1024 ** 2
GiB: Final = 1024 ** 3
_CENT: Final = Decimal("0.01")


def _check_bytes(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a byte count must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"a byte count cannot be negative, got {value}")
    return value


def bytes_to_gb_down(value: int) -> float:
    """Bytes to GiB with 2 decimals, rounded down (for total and free)."""
    exact = Decimal(_check_bytes(value)) / Decimal(GiB)
    return float(exact.quantize(_CENT, rounding=ROUND_FLOOR))


def bytes_to_gb_up(value: int) -> float:
    """Bytes to GiB with 2 decimals, rounded up (for provisioned and used)."""
    exact = Decimal(_check_bytes(value)) / Decimal(GiB)
    return float(exact.quantize(_CENT, rounding=ROUND_CEILING))


def _check_float(value: float) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    # repr() gives the shortest decimal that round-trips, so 0.29 stays 0.29.
    return Decimal(repr(float(value)))


def round_down_2(value: float) -> float:
    """A GiB figure rounded down to 2 decimals."""
    return float(_check_float(value).quantize(_CENT, rounding=ROUND_FLOOR))


def round_up_2(value: float) -> float:
    """A GiB figure rounded up to 2 decimals."""
    return float(_check_float(value).quantize(_CENT, rounding=ROUND_CEILING))


def gb_to_bytes(size_gb: int) -> int:
    """Whole GiB to bytes; sizes of volumes are whole GiB as in Cinder."""
    if isinstance(size_gb, bool) or not isinstance(size_gb, int):
        raise TypeError(f"a size in GiB must be an int, got {size_gb!r}")
    return size_gb * GiB
