"""What a report must say, worked out from the backend's truth and the driver's settings.

The spec's rules applied to the truth hook's bytes, with the kit's own capacity
math (``driver_kit.capacity``, Cinder-exact): total and free round down,
provisioned up, to 2 decimals; the ratio is the configured one or, for
``auto``, Cinder's formula over those figures; admission is ``capacity.admit``
over them, so the cap is recomputed for every decision.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from driver_kit import capacity, units
from driver_kit.capacity import AdmissionDecision
from driver_kit.compliance.hooks import BackendTruth, PoolTruth

__all__ = ["Expected", "Settings", "admission", "advanced", "expected_pool", "room_gb",
           "settings_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The capacity settings a driver runs with (None: not known; the report's is used)."""

    ratio: float | str | None
    reserved_percentage: int | None
    calculation: str = "cinder"


def settings_of(drv: Any) -> Settings:
    """The settings of a driver built on the kit (its ``configuration``), else unknown."""
    conf = getattr(drv, "configuration", None)
    ratio = getattr(conf, "max_over_subscription_ratio", None)
    reserved = getattr(conf, "reserved_percentage", None)
    calculation = getattr(conf, "over_provisioning_calculation", None)
    return Settings(ratio=ratio, reserved_percentage=reserved,
                    calculation=calculation if calculation in capacity.CALCULATIONS
                    else "cinder")


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """One pool's figures as its report must give them (GiB, conservatively rounded)."""

    pool: PoolTruth
    total_gb: float
    free_gb: float
    provisioned_gb: float
    #: the volumes of the pool's capacity group (the pool's own when it shares nothing)
    total_volumes: int
    #: the volumes of the pool itself
    own_volumes: int
    #: the snapshots of the pool, their virtual sizes rounded up
    snapshot_gb: float
    #: for a thin pool; None when the configured ratio is not known
    ratio: float | None
    reserved_percentage: int | None


def _ratio(setting: float | str | None, total: float, free: float,
           provisioned: float) -> float | None:
    if setting is None:
        return None
    ratio = capacity.calculate_max_over_subscription_ratio(
        {"thin_provisioning_support": True, "total_capacity_gb": total,
         "free_capacity_gb": min(free, total), "provisioned_capacity_gb": provisioned},
        setting)
    return max(1.0, units.round_down_2(ratio))


def expected_pool(truth: BackendTruth, pool_name: str, settings: Settings, *,
                  thin: bool) -> Expected | None:
    """What the report of ``pool_name`` must say (None: the backend has no such pool).

    ``thin`` says whether the report declares thin provisioning (the ratio is
    1.0 otherwise).
    """
    pool = truth.pool(pool_name)
    if pool is None:
        return None
    total = units.bytes_to_gb_down(pool.capacity_bytes)
    free = units.bytes_to_gb_down(pool.available_bytes)
    provisioned = units.bytes_to_gb_up(truth.provisioned_bytes(pool_name))
    return Expected(pool=pool, total_gb=total, free_gb=free, provisioned_gb=provisioned,
                    total_volumes=len(truth.group_volumes(pool_name)),
                    own_volumes=len(truth.pool_volumes(pool_name)),
                    snapshot_gb=units.bytes_to_gb_up(truth.snapshot_bytes(pool_name)),
                    ratio=_ratio(settings.ratio, total, free, provisioned) if thin else 1.0,
                    reserved_percentage=settings.reserved_percentage)


def _inputs(expected: Expected, report_pool: Mapping[str, Any], thin: bool,
            settings: Settings) -> dict[str, Any]:
    """``admit``'s arguments; the ratio and reserved the report gives when the settings
    are not known (``LookupError`` when neither says)."""
    ratio = expected.ratio if expected.ratio is not None \
        else report_pool.get("max_over_subscription_ratio")
    reserved = expected.reserved_percentage if expected.reserved_percentage is not None \
        else report_pool.get("reserved_percentage")
    if ratio is None or reserved is None:
        what = "max_over_subscription_ratio" if ratio is None else "reserved_percentage"
        raise LookupError(f"neither the driver's configuration nor the report of pool "
                          f"{expected.pool.pool_name!r} gives its {what}")
    return {"total_capacity": expected.total_gb,
            "free_capacity": min(expected.free_gb, expected.total_gb),
            "provisioned_capacity": expected.provisioned_gb,
            "max_over_subscription_ratio": ratio if thin else 1.0,
            "reserved_percentage": reserved, "thin": thin,
            "calculation": settings.calculation}


def admission(expected: Expected, report_pool: Mapping[str, Any], *, size_bytes: int,
              thin: bool, settings: Settings, from_bytes: int = 0) -> AdmissionDecision:
    """The decision admission must take on growing a volume from ``from_bytes`` (0: a new
    one) to ``size_bytes``, both allocated in the pool's units, with the cap worked out
    from the truth as it is now."""
    pool = expected.pool
    requested = (pool.allocated_bytes(size_bytes) - pool.allocated_bytes(from_bytes)) \
        / units.GiB
    return capacity.admit(requested=requested, pool_name=pool.pool_name,
                          **_inputs(expected, report_pool, thin, settings))


def room_gb(expected: Expected, report_pool: Mapping[str, Any], *, thin: bool,
            settings: Settings) -> int:
    """The largest whole-GiB request admission must accept now (before allocation units)."""
    room = capacity.max_admissible(**_inputs(expected, report_pool, thin, settings))
    while room > 0 and not admission(expected, report_pool, size_bytes=room * units.GiB,
                                     thin=thin, settings=settings).admitted:
        room -= 1  # a unit rounds the request up past the room
    return room


def advanced(expected: Expected, settings: Settings, *, size_bytes: int,
             thin: bool) -> Expected:
    """The figures after one more volume of ``size_bytes`` was admitted: provisioned up
    by its allocated size, free down by it for a thick volume, 'auto' recomputed."""
    added = expected.pool.allocated_bytes(size_bytes) / units.GiB
    provisioned = units.round_up_2(expected.provisioned_gb + added)
    free = expected.free_gb if thin else max(0.0, units.round_down_2(expected.free_gb - added))
    ratio = expected.ratio
    if thin and isinstance(settings.ratio, str):
        ratio = _ratio(settings.ratio, expected.total_gb, free, provisioned)
    return replace(expected, provisioned_gb=provisioned, free_gb=free, ratio=ratio,
                   total_volumes=expected.total_volumes + 1,
                   own_volumes=expected.own_volumes + 1)
