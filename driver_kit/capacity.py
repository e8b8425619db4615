"""Capacity math: pure functions that agree with the Cinder scheduler.

The three ``calculate_*`` functions carry Cinder's names, take Cinder's
arguments in Cinder's order and answer exactly what Cinder 29's scheduler
utilities answer, for every input Cinder takes: strings such as ``'2.0'``,
``'infinite'``/``'unknown'`` capacities, a ratio of 0 falling back to the
global one, a ratio below 1. They judge nothing; where Cinder's own
arithmetic fails (a ``TypeError``, ``ZeroDivisionError`` ...), they raise
``InvalidInput`` saying so. Strictness lives in ``driver_kit.stats.validate_stats``
(what a report may say) and in ``admit`` (what a driver lets in).

``admit`` is the kit's own admission decision (docs/operators.md, Capacity rules). Its
default, ``standard``, is the test Cinder's CapacityFilter applies, so a driver
never refuses what the scheduler sent it; ``cinder`` adds the stricter checks
of the provisioning specs. It compares exact decimals, so a decision never
depends on float error beyond the 2-decimal rounding Cinder itself applies.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final, Literal

from driver_kit.exceptions import InvalidInput, InvalidSize
from driver_kit.units import human_gb

__all__ = [
    "AUTO", "INITIAL_AUTO_RATIO", "CALCULATIONS", "CINDER_CALCULATION_FILTER_FUNCTION",
    "DEFAULT_CALCULATION", "AdmissionCheck",
    "AdmissionDecision", "admit", "max_admissible", "calculate_capacity_factors",
    "calculate_max_over_subscription_ratio", "calculate_virtual_free_capacity",
    "reserved_gb", "validate_ratio", "validate_reserved_percentage",
]

AUTO: Final = "auto"
INITIAL_AUTO_RATIO: Final = 20.0
#: 'standard' is what Cinder's CapacityFilter checks; 'cinder' adds the specs' stricter checks.
CALCULATIONS: Final = ("standard", "cinder")
DEFAULT_CALCULATION: Final = "standard"
#: A ``filter_function`` for Cinder's DriverFilter that makes the scheduler check
#: what the 'cinder' calculation adds, size <= (free - reserved) * ratio, on pools
#: that offer one provisioning type (a thick pool reports ratio 1.0). It leaves the
#: reserved amount unfloored, so it is never looser than the driver.
CINDER_CALCULATION_FILTER_FUNCTION: Final = (
    "volume.size <= (capabilities.free_capacity_gb - capabilities.total_capacity_gb"
    " * capabilities.reserved_percentage / 100) * capabilities.max_over_subscription_ratio")
_INFINITE_UNKNOWN: Final = ("infinite", "unknown")
# What Cinder's capacity arithmetic raises on inputs it cannot compute with.
_CINDER_ARITHMETIC_ERRORS: Final = (TypeError, ValueError, ZeroDivisionError, OverflowError,
                                    AttributeError)


# --------------------------------------------------------------------------
# validation used by admit() and the configuration

def _check_capacity(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{name} must be a number of GiB, got {value!r}")
    if math.isnan(value) or math.isinf(value):
        raise InvalidInput(f"{name} must be finite, got {value!r}")
    if value < 0:
        raise InvalidInput(f"{name} cannot be negative, got {value!r}")
    return value


def validate_ratio(value: Any, *, allow_auto: bool = False) -> float | str:
    """Return a max over-subscription ratio as a float >= 1.0 (or 'auto').

    Strings such as '2.0' are accepted, as Cinder's config does; a ratio below
    1.0 is refused (Cinder silently accepts it; the spec says >= 1.0).
    """
    if allow_auto and isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, bool):
        raise InvalidInput(f"max_over_subscription_ratio must be a number, got {value!r}")
    try:
        ratio = float(value)
    except (TypeError, ValueError):
        hint = " or 'auto'" if allow_auto else ""
        raise InvalidInput(
            f"max_over_subscription_ratio must be a number >= 1.0{hint}, got {value!r}"
        ) from None
    if math.isnan(ratio) or math.isinf(ratio) or ratio < 1.0:
        raise InvalidInput(
            f"max_over_subscription_ratio must be a finite number >= 1.0, got {value!r}")
    return ratio


def validate_reserved_percentage(value: Any) -> int | float:
    """Return a reserved percentage in 0..100, refusing anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"reserved_percentage must be a number 0..100, got {value!r}")
    if math.isnan(value) or not 0 <= value <= 100:
        raise InvalidInput(f"reserved_percentage must be within 0..100, got {value!r}")
    return value


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be True or False, got {value!r}")
    return value


@contextmanager
def cinder_arithmetic(what: str, error: type[InvalidInput] = InvalidInput) -> Iterator[None]:
    """Turn the arithmetic error Cinder itself would hit on these inputs into ``error``.

    The message names the computation and Cinder's exception, in one line.
    """
    try:
        yield
    except _CINDER_ARITHMETIC_ERRORS as exc:
        raise error(f"{what}: Cinder's scheduler fails on these inputs too "
                    f"({type(exc).__name__}: {exc})") from exc


# --------------------------------------------------------------------------
# Cinder-exact cores (no validation: the scheduler feeds them anything)

def reserved_gb(total_capacity: Any, reserved_percentage: Any) -> int:
    """The reserved GiB of a pool, floored in floating point exactly as Cinder does.

    ``floor(float(total) * (float(pct) / 100))``: 100 GiB at 29% reserves 28
    GiB, not the 29 exact arithmetic gives (``100.0 * 0.29`` is 28.999999999999996).
    Every reserved amount in the kit (capacity factors, admission, Placement)
    is this one expression; it does not validate its inputs.
    """
    return math.floor(float(total_capacity) * (float(reserved_percentage) / 100))


def _factors(total_capacity: Any, free_capacity: Any, provisioned_capacity: Any,
             thin_provisioning_support: Any, max_over_subscription_ratio: Any,
             reserved_percentage: Any, thin: Any) -> dict[str, Any]:
    """Capacity factors exactly as Cinder's scheduler computes them."""
    total = float(total_capacity)
    reserved_capacity = reserved_gb(total, reserved_percentage)
    total_reserved_available = total - reserved_capacity

    if thin and thin_provisioning_support:
        provisioned_type = "thin"
        total_available = total_reserved_available * max_over_subscription_ratio
        calculated_free = total_available - provisioned_capacity
        virtual_free = calculated_free
    else:
        provisioned_type = "thick"
        total_available = total_reserved_available
        calculated_free = total_available - provisioned_capacity
        # Thick volumes take real space: never more than the backend has free.
        virtual_free = free_capacity if free_capacity < calculated_free else calculated_free

    if total_available:
        provisioned_ratio = provisioned_capacity / total_available
        free_percent = virtual_free / total_available * 100
    else:
        provisioned_ratio = 0
        free_percent = 0

    return {
        "total_capacity": total,
        "free_capacity": free_capacity,
        "reserved_capacity": reserved_capacity,
        "total_reserved_available_capacity": round(total_reserved_available, 2),
        "max_over_subscription_ratio":
            max_over_subscription_ratio if provisioned_type == "thin" else None,
        "total_available_capacity": round(total_available, 2),
        "provisioned_capacity": provisioned_capacity,
        "calculated_free_capacity": round(calculated_free, 2),
        "virtual_free_capacity": round(virtual_free, 2),
        "free_percent": round(free_percent, 2),
        "provisioned_ratio": round(provisioned_ratio, 2),
        "provisioned_type": provisioned_type,
    }


def _resolve_ratio(capability: dict[str, Any], global_ratio: Any) -> float:
    """The ratio Cinder's host manager derives from a pool report."""
    allocated = capability.get("allocated_capacity_gb", 0)
    provisioned = capability.get("provisioned_capacity_gb", allocated)
    total = capability.get("total_capacity_gb", 0)
    free = capability.get("free_capacity_gb", 0)

    # Without thin support, or with unusable capacities, the filter never
    # looks at the ratio, so Cinder answers 1.0.
    if not capability.get("thin_provisioning_support", False):
        return 1.0
    if total in _INFINITE_UNKNOWN or free in _INFINITE_UNKNOWN:
        return 1.0

    ratio = capability.get("max_over_subscription_ratio") or global_ratio
    if ratio == AUTO:
        if provisioned != 0:
            return 1 + float(provisioned) / (total - free + 1)
        return INITIAL_AUTO_RATIO
    return float(ratio)


# --------------------------------------------------------------------------
# public, Cinder's names and Cinder's answers

def calculate_capacity_factors(total_capacity: float, free_capacity: float,
                               provisioned_capacity: float,
                               thin_provisioning_support: bool,
                               max_over_subscription_ratio: float,
                               reserved_percentage: int,
                               thin: bool) -> dict[str, Any]:
    """The seed-002 capacity factors of one pool for one provisioning type (GiB).

    Exactly Cinder's ``calculate_capacity_factors``: ``thin`` asks for the thin
    view and takes effect only when the pool supports thin provisioning.
    """
    with cinder_arithmetic("calculate_capacity_factors"):
        return _factors(total_capacity, free_capacity, provisioned_capacity,
                        thin_provisioning_support, max_over_subscription_ratio,
                        reserved_percentage, thin)


def calculate_virtual_free_capacity(total_capacity: float, free_capacity: float,
                                    provisioned_capacity: float,
                                    thin_provisioning_support: bool,
                                    max_over_subscription_ratio: float,
                                    reserved_percentage: int,
                                    thin: bool) -> float:
    """The capacity (GiB) left for new volumes, as Cinder's filter and weigher see it."""
    with cinder_arithmetic("calculate_virtual_free_capacity"):
        return _factors(total_capacity, free_capacity, provisioned_capacity,
                        thin_provisioning_support, max_over_subscription_ratio,
                        reserved_percentage, thin)["virtual_free_capacity"]


def calculate_max_over_subscription_ratio(
        capability: dict[str, Any],
        global_max_over_subscription_ratio: float | str) -> float:
    """The effective ratio of a pool report, exactly as Cinder's host manager derives it.

    The pool's own ratio, or the global one when the pool's is missing or 0;
    'auto' is ``1 + provisioned / (total - free + 1)``, or 20.0 while nothing
    is provisioned; a pool without thin support, or with an 'infinite' or
    'unknown' capacity, gets 1.0 (Cinder's filter never reads it then).
    """
    with cinder_arithmetic("calculate_max_over_subscription_ratio"):
        return _resolve_ratio(capability, global_max_over_subscription_ratio)


# --------------------------------------------------------------------------
# admission

@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionCheck:
    """One inequality of an admission decision: ``needed <= allowed`` (GiB)."""

    name: str
    formula: str
    needed_gb: float
    allowed_gb: float
    passed: bool

    @property
    def shortfall_gb(self) -> float:
        """How far ``needed`` exceeds ``allowed`` (0 when the check passes)."""
        return max(0.0, round(self.needed_gb - self.allowed_gb, 6))


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionDecision:
    """Whether a create or extend fits a pool, with every figure that decided it."""

    admitted: bool
    pool_name: str
    provisioning_type: Literal["thin", "thick"]
    calculation: str
    requested_gb: float
    total_capacity_gb: float
    free_capacity_gb: float
    provisioned_capacity_gb: float
    in_flight_gb: float
    reserved_percentage: float
    reserved_capacity_gb: float
    max_over_subscription_ratio: float
    checks: tuple[AdmissionCheck, ...] = field(default_factory=tuple)

    @property
    def failed_checks(self) -> tuple[AdmissionCheck, ...]:
        return tuple(c for c in self.checks if not c.passed)

    def as_dict(self) -> dict[str, Any]:
        """The breakdown as plain data (for JSON output and notifications)."""
        return {
            "admitted": self.admitted, "pool_name": self.pool_name,
            "provisioning_type": self.provisioning_type,
            "calculation": self.calculation, "requested_gb": self.requested_gb,
            "total_capacity_gb": self.total_capacity_gb,
            "free_capacity_gb": self.free_capacity_gb,
            "provisioned_capacity_gb": self.provisioned_capacity_gb,
            "in_flight_gb": self.in_flight_gb,
            "reserved_percentage": self.reserved_percentage,
            "reserved_capacity_gb": self.reserved_capacity_gb,
            "max_over_subscription_ratio": self.max_over_subscription_ratio,
            "checks": [{"name": c.name, "formula": c.formula, "needed_gb": c.needed_gb,
                        "allowed_gb": c.allowed_gb, "passed": c.passed,
                        "shortfall_gb": c.shortfall_gb} for c in self.checks],
        }

    def explain(self) -> str:
        """A few lines an operator can read to see why."""
        verdict = "admitted" if self.admitted else "refused"
        gb = human_gb
        lines = [
            f"{self.provisioning_type} request of {gb(self.requested_gb)} on pool "
            f"{self.pool_name or '?'} {verdict} ({self.calculation} calculation): "
            f"total {gb(self.total_capacity_gb)}, free {gb(self.free_capacity_gb)}, "
            f"provisioned {gb(self.provisioned_capacity_gb)}, in flight "
            f"{gb(self.in_flight_gb)}, reserved {self.reserved_percentage:g}% = "
            f"{gb(self.reserved_capacity_gb)}, max over-subscription ratio "
            f"{self.max_over_subscription_ratio:g}"]
        for check in self.checks:
            state = "ok" if check.passed else f"FAILED by {gb(check.shortfall_gb)}"
            lines.append(f"  {check.name}: {check.formula}: {gb(check.needed_gb)} <= "
                         f"{gb(check.allowed_gb)} {state}")
        return "\n".join(lines)


def _exact(value: float) -> Fraction:
    return Fraction(repr(float(value)))


def _to_float(value: Fraction) -> float:
    return float(round(value, 9))


@dataclass(frozen=True, slots=True)
class _Limit:
    """One admission check before the request is added: base + requested <= allowed."""

    name: str
    formula: str
    base: Fraction
    allowed: Fraction


@dataclass(frozen=True, slots=True)
class _PoolInputs:
    """admit()'s validated inputs, with the reserved amount floored as Cinder does."""

    total: float
    free: float
    provisioned: float
    pending: float
    ratio: float
    reserved_pct: int | float
    reserved: int
    thin: bool
    calculation: str


def _validated(total_capacity: Any, free_capacity: Any, provisioned_capacity: Any,
               in_flight: Any, max_over_subscription_ratio: Any, reserved_percentage: Any,
               thin: Any, calculation: Any) -> _PoolInputs:
    total = _check_capacity("total_capacity", total_capacity)
    free = _check_capacity("free_capacity", free_capacity)
    provisioned = _check_capacity("provisioned_capacity", provisioned_capacity)
    pending = _check_capacity("in_flight", in_flight)
    ratio = validate_ratio(max_over_subscription_ratio)
    reserved_pct = validate_reserved_percentage(reserved_percentage)
    _check_bool("thin", thin)
    if calculation not in CALCULATIONS:
        raise InvalidInput(f"calculation must be one of {', '.join(CALCULATIONS)}, "
                           f"got {calculation!r}")
    return _PoolInputs(total, free, provisioned, pending, float(ratio) if thin else 1.0,
                       reserved_pct, reserved_gb(total, reserved_pct), thin, calculation)


def _limits(pool: _PoolInputs) -> list[_Limit]:
    """The checks a request must pass (see ``admit``), each ``base + requested <= allowed``."""
    reserved = pool.reserved
    strict = pool.calculation == "cinder"
    if pool.thin:
        # Cinder's filter passes a thin request when its virtual free capacity,
        # ((total - reserved) * ratio - provisioned) rounded to 2 decimals, covers it:
        # that very float is the room, so the driver takes all the scheduler sends.
        virtual_free = _factors(pool.total, pool.free, pool.provisioned, True, pool.ratio,
                                pool.reserved_pct, True)["virtual_free_capacity"]
        limits = [_Limit("provisioned_cap",
                         "provisioned + in_flight + requested <= (total - reserved) * ratio, "
                         "to 2 decimals as Cinder rounds it",
                         _exact(pool.provisioned) + _exact(pool.pending),
                         _exact(pool.provisioned) + _exact(virtual_free))]
        if strict:
            limits.append(_Limit("free_cap", "requested <= (free - reserved) * ratio",
                                 Fraction(0), (_exact(pool.free) - reserved) * _exact(pool.ratio)))
        return limits
    # Cinder's filter bounds a thick request by free space, the specs by free - reserved.
    free_room = _exact(pool.free) - (reserved if strict else 0) - _exact(pool.pending)
    return [_Limit("free_space",
                   "requested <= free - reserved - in_flight" if strict
                   else "requested <= free - in_flight",
                   Fraction(0), free_room),
            _Limit("provisioned_cap", "requested <= total - reserved - provisioned - in_flight",
                   Fraction(0),
                   _exact(pool.total) - reserved - _exact(pool.provisioned)
                   - _exact(pool.pending))]


def admit(*, total_capacity: float, free_capacity: float, provisioned_capacity: float,
          requested: float, max_over_subscription_ratio: float,
          reserved_percentage: int | float, thin: bool, in_flight: float = 0.0,
          calculation: str = DEFAULT_CALCULATION, pool_name: str = "") -> AdmissionDecision:
    """Decide whether ``requested`` GiB more fit a pool (docs/operators.md, Capacity rules).

    reserved = reserved_gb(total, reserved%) (Cinder's float floor);
    thin, standard: provisioned + in_flight + requested <= (total - reserved) * ratio,
    the cap taken to 2 decimals exactly as Cinder's CapacityFilter rounds it;
    thin, cinder: that and requested <= (free - reserved) * ratio;
    thick, standard: requested <= min(free, total - reserved - provisioned) - in_flight
    (Cinder's filter); thick, cinder: free - reserved in place of free (the specs).
    In-flight claims will take space too, so they count on every side. With
    ``in_flight`` 0, ``standard`` admits everything Cinder's filter passes.
    """
    pool = _validated(total_capacity, free_capacity, provisioned_capacity, in_flight,
                      max_over_subscription_ratio, reserved_percentage, thin, calculation)
    if isinstance(requested, bool) or not isinstance(requested, (int, float)) \
            or math.isnan(requested) or math.isinf(requested) or requested <= 0:
        raise InvalidSize(f"requested size must be a positive number of GiB, got {requested!r}")
    size = _exact(requested)
    checks = tuple(AdmissionCheck(name=limit.name, formula=limit.formula,
                                  needed_gb=_to_float(limit.base + size),
                                  allowed_gb=_to_float(limit.allowed),
                                  passed=limit.base + size <= limit.allowed)
                   for limit in _limits(pool))
    return AdmissionDecision(
        admitted=all(c.passed for c in checks), pool_name=pool_name,
        provisioning_type="thin" if thin else "thick", calculation=calculation,
        requested_gb=float(requested), total_capacity_gb=float(pool.total),
        free_capacity_gb=float(pool.free), provisioned_capacity_gb=float(pool.provisioned),
        in_flight_gb=float(pool.pending), reserved_percentage=float(pool.reserved_pct),
        reserved_capacity_gb=float(pool.reserved), max_over_subscription_ratio=pool.ratio,
        checks=checks)


def max_admissible(*, total_capacity: float, free_capacity: float,
                   provisioned_capacity: float, max_over_subscription_ratio: float,
                   reserved_percentage: int | float, thin: bool, in_flight: float = 0.0,
                   calculation: str = DEFAULT_CALCULATION) -> int:
    """The largest whole-GiB request ``admit`` accepts with these inputs (0 if none).

    Closed form over the same exact limits ``admit`` checks, so the two always
    agree: every check is ``base + requested <= allowed``.
    """
    pool = _validated(total_capacity, free_capacity, provisioned_capacity, in_flight,
                      max_over_subscription_ratio, reserved_percentage, thin, calculation)
    room = min(limit.allowed - limit.base for limit in _limits(pool))
    return max(0, math.floor(room))
