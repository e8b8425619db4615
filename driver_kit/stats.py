"""The stats contract: raw pool facts in, a Cinder-shaped report out.

A driver hook returns ``PoolFacts`` (integer bytes, straight from the
backend). ``build_pool_stats`` turns them into a ``PoolStats`` record (GiB,
conservatively rounded, config applied) and ``BackendStats.to_dict()`` gives
the dict Cinder's scheduler consumes unchanged. ``validate_stats`` checks any
such dict and returns every violation, each tied to its spec clause.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final, Mapping

from driver_kit import capacity, units
from driver_kit.exceptions import InvalidInput

__all__ = ["PoolFacts", "PoolStats", "BackendStats", "Violation", "build_pool_stats",
           "down_pool_stats", "is_number", "validate_stats", "REQUIRED_POOL_FIELDS",
           "REQUIRED_BACKEND_FIELDS"]

SPEC_KILO: Final = "specs/000 Kilo over-subscription"
SPEC_QUEENS: Final = "specs/001 Queens provisioning improvements"
SPEC_ZED: Final = "specs/002 Zed capacity factors"


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolFacts:
    """What a backend says about one pool, in integer bytes, before any policy.

    ``provisioned_bytes`` is the sum of the virtual sizes of every volume in the
    pool, made by this driver or not, snapshots excluded (Queens spec);
    ``snapshot_bytes`` is the snapshots' virtual sizes, reported apart.
    ``used_bytes`` is what the pool physically uses (None: total - free).
    ``unavailable_reason`` set by the driver reports the pool down for that reason.
    """

    pool_name: str
    total_bytes: int
    free_bytes: int
    provisioned_bytes: int
    thin_provisioning_support: bool
    thick_provisioning_support: bool
    total_volumes: int = 0
    snapshot_bytes: int = 0
    used_bytes: int | None = None
    driver_used_bytes: int | None = None
    data_percent: float | None = None
    metadata_percent: float | None = None
    location_info: str = ""
    multiattach: bool = False
    qos_support: bool = False
    unavailable_reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """Rule breaks that cannot be corrected safely (the pool then fails closed)."""
        found = []
        if not isinstance(self.pool_name, str) or not self.pool_name:
            found.append(f"pool_name must be a non-empty string, got {self.pool_name!r}")
        for name in ("total_bytes", "free_bytes", "provisioned_bytes", "snapshot_bytes",
                     "total_volumes", "used_bytes", "driver_used_bytes"):
            value = getattr(self, name)
            if value is None and name in ("used_bytes", "driver_used_bytes"):
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                found.append(f"{name} must be an integer, got {value!r}")
            elif value < 0:
                found.append(f"{name} cannot be negative, got {value}")
            elif value > units.MAX_CAPACITY_BYTES and name != "total_volumes":
                found.append(f"{name} is {_figure(value)} bytes, more than 2^76 "
                             f"(64 ZiB): no pool is that large (a misread figure?)")
        if not found and self.free_bytes > self.total_bytes:
            found.append(f"free ({self.free_bytes} B) exceeds total ({self.total_bytes} B)")
        if not (self.thin_provisioning_support or self.thick_provisioning_support):
            found.append("pool supports neither thin nor thick provisioning")
        for name in ("data_percent", "metadata_percent"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (int, float))
                                      or math.isnan(value) or not 0 <= value <= 100):
                found.append(f"{name} must be within 0..100, got {value!r}")
        return found


def _figure(value: int) -> str:
    """An integer for a one-line message: its digits, or its size when they are many."""
    return str(value) if value.bit_length() <= 200 else f"a number of {value.bit_length()} bits"


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolStats:
    """One pool as reported: GiB with 2 decimals, config applied, factors attached."""

    pool_name: str
    total_capacity_gb: float
    free_capacity_gb: float
    provisioned_capacity_gb: float
    reserved_percentage: int
    max_over_subscription_ratio: float
    thin_provisioning_support: bool
    thick_provisioning_support: bool
    total_volumes: int
    location_info: str
    QoS_support: bool
    multiattach: bool
    backend_state: str = "up"
    down_reason: str | None = None
    total_used_capacity_gb: float = 0.0
    cinder_used_capacity_gb: float | None = None
    snapshot_capacity_gb: float = 0.0
    max_volume_size_gb: int = 0
    data_percent: float | None = None
    metadata_percent: float | None = None
    capacity_factors: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The pool entry of a Cinder stats report."""
        out: dict[str, Any] = dict(self.extra)
        out.update({
            "pool_name": self.pool_name,
            "total_capacity_gb": self.total_capacity_gb,
            "free_capacity_gb": self.free_capacity_gb,
            "provisioned_capacity_gb": self.provisioned_capacity_gb,
            "reserved_percentage": self.reserved_percentage,
            "max_over_subscription_ratio": self.max_over_subscription_ratio,
            "thin_provisioning_support": self.thin_provisioning_support,
            "thick_provisioning_support": self.thick_provisioning_support,
            "total_volumes": self.total_volumes,
            "location_info": self.location_info,
            "QoS_support": self.QoS_support,
            "multiattach": self.multiattach,
            "backend_state": self.backend_state,
            "total_used_capacity_gb": self.total_used_capacity_gb,
            "snapshot_capacity_gb": self.snapshot_capacity_gb,
            "max_volume_size_gb": self.max_volume_size_gb,
            "capacity_factors": [dict(f) for f in self.capacity_factors],
        })
        if self.cinder_used_capacity_gb is not None:
            out["cinder_used_capacity_gb"] = self.cinder_used_capacity_gb
        if self.down_reason is not None:
            out["down_reason"] = self.down_reason
        if self.data_percent is not None:
            out["data_percent"] = self.data_percent
        if self.metadata_percent is not None:
            out["metadata_percent"] = self.metadata_percent
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendStats:
    """A backend's whole report: top-level identity plus its pools."""

    volume_backend_name: str
    vendor_name: str
    driver_version: str
    storage_protocol: str
    pools: tuple[PoolStats, ...]

    def to_dict(self) -> dict[str, Any]:
        """The Cinder-shaped dict ``get_volume_stats()`` returns."""
        return {
            "volume_backend_name": self.volume_backend_name,
            "vendor_name": self.vendor_name,
            "driver_version": self.driver_version,
            "storage_protocol": self.storage_protocol,
            "pools": [p.to_dict() for p in self.pools],
        }


def _factor_list(total: float, free: float, provisioned: float, thin: bool, thick: bool,
                 ratio: float, reserved: int) -> tuple[dict[str, Any], ...]:
    """Seed-002 factors, one entry per provisioning type the pool supports."""
    kinds = ([False] if thick else []) + ([True] if thin else [])
    return tuple(capacity.calculate_capacity_factors(total, free, provisioned, thin,
                                                     ratio if thin else 1.0, reserved, kind)
                 for kind in kinds)


def build_pool_stats(facts: PoolFacts, *, max_over_subscription_ratio: float | str,
                     reserved_percentage: int, calculation: str = "cinder") -> PoolStats:
    """Apply config to raw facts: resolve 'auto', round conservatively, add factors.

    Facts with an ``unavailable_reason`` give a down pool with that reason.
    Raises ``InvalidInput`` when the facts break a rule that cannot be
    corrected safely; the caller reports the pool down instead.
    """
    if facts.unavailable_reason is not None:
        return down_pool_stats(facts.pool_name, facts.unavailable_reason,
                               reserved_percentage=reserved_percentage,
                               thin=facts.thin_provisioning_support,
                               thick=facts.thick_provisioning_support)
    problems = facts.problems()
    if problems:
        raise InvalidInput(f"pool {facts.pool_name!r}: " + "; ".join(problems))
    capacity.validate_reserved_percentage(reserved_percentage)
    total = units.bytes_to_gb_down(facts.total_bytes)
    free = units.bytes_to_gb_down(facts.free_bytes)
    provisioned = units.bytes_to_gb_up(facts.provisioned_bytes)
    used_bytes = facts.used_bytes if facts.used_bytes is not None \
        else facts.total_bytes - facts.free_bytes
    ratio_setting = capacity.validate_ratio(max_over_subscription_ratio, allow_auto=True)
    if facts.thin_provisioning_support:
        ratio = capacity.calculate_max_over_subscription_ratio(
            {"thin_provisioning_support": True, "total_capacity_gb": total,
             "free_capacity_gb": free, "provisioned_capacity_gb": provisioned},
            ratio_setting)
        # A reported ratio keeps at most 2 decimals; rounding down never loosens the cap.
        ratio = max(1.0, units.round_down_2(ratio))
    else:
        ratio = 1.0
    thin_first = facts.thin_provisioning_support
    largest = capacity.max_admissible(
        total_capacity=total, free_capacity=free, provisioned_capacity=provisioned,
        max_over_subscription_ratio=ratio, reserved_percentage=reserved_percentage,
        thin=thin_first, calculation=calculation)
    return PoolStats(
        pool_name=facts.pool_name, total_capacity_gb=total, free_capacity_gb=free,
        provisioned_capacity_gb=provisioned, reserved_percentage=int(reserved_percentage),
        max_over_subscription_ratio=ratio,
        thin_provisioning_support=facts.thin_provisioning_support,
        thick_provisioning_support=facts.thick_provisioning_support,
        total_volumes=facts.total_volumes, location_info=facts.location_info,
        QoS_support=facts.qos_support, multiattach=facts.multiattach,
        total_used_capacity_gb=units.bytes_to_gb_up(used_bytes),
        cinder_used_capacity_gb=(None if facts.driver_used_bytes is None
                                 else units.bytes_to_gb_up(facts.driver_used_bytes)),
        snapshot_capacity_gb=units.bytes_to_gb_up(facts.snapshot_bytes),
        max_volume_size_gb=largest,
        data_percent=None if facts.data_percent is None else units.round_up_2(facts.data_percent),
        metadata_percent=(None if facts.metadata_percent is None
                          else units.round_up_2(facts.metadata_percent)),
        capacity_factors=_factor_list(total, free, provisioned,
                                      facts.thin_provisioning_support,
                                      facts.thick_provisioning_support, ratio,
                                      reserved_percentage),
        extra=dict(facts.extra))


def down_pool_stats(pool_name: str, reason: str, *, reserved_percentage: int = 0,
                    thin: bool = True, thick: bool = False) -> PoolStats:
    """A pool that cannot be read: no capacity at all, and the reason why."""
    return PoolStats(
        pool_name=pool_name, total_capacity_gb=0.0, free_capacity_gb=0.0,
        provisioned_capacity_gb=0.0, reserved_percentage=int(reserved_percentage),
        max_over_subscription_ratio=1.0, thin_provisioning_support=thin,
        thick_provisioning_support=thick, total_volumes=0, location_info="",
        QoS_support=False, multiattach=False, backend_state="down", down_reason=reason,
        capacity_factors=_factor_list(0.0, 0.0, 0.0, thin, thick, 1.0, reserved_percentage))


# --------------------------------------------------------------------------
# validation

REQUIRED_BACKEND_FIELDS: Final[Mapping[str, tuple[type, ...]]] = {
    "volume_backend_name": (str,), "vendor_name": (str,), "driver_version": (str,),
    "storage_protocol": (str,), "pools": (list,),
}
REQUIRED_POOL_FIELDS: Final[Mapping[str, tuple[type, ...]]] = {
    "pool_name": (str,), "total_capacity_gb": (int, float), "free_capacity_gb": (int, float),
    "provisioned_capacity_gb": (int, float), "reserved_percentage": (int,),
    "max_over_subscription_ratio": (int, float), "thin_provisioning_support": (bool,),
    "thick_provisioning_support": (bool,), "total_volumes": (int,),
    "location_info": (str,), "QoS_support": (bool,), "multiattach": (bool,),
}
_GB_FIELDS: Final = ("total_capacity_gb", "free_capacity_gb", "provisioned_capacity_gb",
                     "total_used_capacity_gb", "cinder_used_capacity_gb",
                     "snapshot_capacity_gb")


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One broken rule of the stats contract."""

    id: str
    field: str
    value: Any
    message: str
    clause: str

    def __str__(self) -> str:
        return f"[{self.id}] {self.field}={self.value!r}: {self.message} ({self.clause})"


def is_number(value: Any) -> bool:
    """An int or float, not a bool (which Python counts as an int)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _decimals(value: float) -> int:
    exponent = Decimal(repr(value)).normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _check_factors(where: str, pool: Mapping[str, Any], out: list[Violation]) -> None:
    factors = pool.get("capacity_factors")
    if factors is None:
        return
    clause = f"{SPEC_ZED}: one factors entry per supported provisioning type"
    expected_kinds = (["thick"] if pool.get("thick_provisioning_support") else []) + \
        (["thin"] if pool.get("thin_provisioning_support") else [])
    if not isinstance(factors, list) or [f.get("provisioned_type") if isinstance(f, dict)
                                         else None for f in factors] != expected_kinds:
        out.append(Violation(id="capacity-factors-consistent",
                             field=f"{where}.capacity_factors", value=factors,
                             message=f"expected one entry each for {expected_kinds}",
                             clause=clause))
        return
    try:
        recomputed = _factor_list(pool["total_capacity_gb"], pool["free_capacity_gb"],
                                  pool["provisioned_capacity_gb"],
                                  pool["thin_provisioning_support"],
                                  pool["thick_provisioning_support"],
                                  pool["max_over_subscription_ratio"],
                                  pool["reserved_percentage"])
    except (InvalidInput, KeyError, TypeError):
        return  # the field checks already say what is wrong
    if [dict(f) for f in recomputed] != factors:
        out.append(Violation(id="capacity-factors-consistent",
                             field=f"{where}.capacity_factors", value=factors,
                             message="factors do not match the reported capacities",
                             clause=clause))


def _check_pool(index: int, pool: Any, out: list[Violation]) -> None:
    where = f"pools[{index}]"
    if not isinstance(pool, dict):
        out.append(Violation(id="field-type", field=where, value=pool,
                             message="a pool must be a dict", clause=SPEC_QUEENS))
        return
    for key, types in REQUIRED_POOL_FIELDS.items():
        if key not in pool:
            vid = "provisioned-present" if key == "provisioned_capacity_gb" else \
                "provisioning-support-declared" if key.endswith("provisioning_support") \
                else "required-field"
            out.append(Violation(id=vid, field=f"{where}.{key}", value=None,
                                 message="required field is missing", clause=SPEC_QUEENS))
            continue
        value = pool[key]
        if value in ("infinite", "unknown"):
            out.append(Violation(id="no-infinite-unknown", field=f"{where}.{key}", value=value,
                                 message="report a number: 'infinite' and 'unknown' "
                                         "defeat capacity checks", clause=SPEC_QUEENS))
        elif not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            out.append(Violation(id="field-type", field=f"{where}.{key}", value=value,
                                 message=f"must be {' or '.join(t.__name__ for t in types)}",
                                 clause=SPEC_QUEENS))
    if "allocated_capacity_gb" in pool:
        out.append(Violation(id="no-allocated-capacity", field=f"{where}.allocated_capacity_gb",
                             value=pool["allocated_capacity_gb"],
                             message="drivers must not report allocated capacity; "
                                     "Cinder computes it", clause=SPEC_QUEENS))
    for key in _GB_FIELDS:
        value = pool.get(key)
        if not is_number(value):
            if key in pool and value is not None and key not in REQUIRED_POOL_FIELDS:
                out.append(Violation(id="field-type", field=f"{where}.{key}", value=value,
                                     message="must be a number of GiB", clause=SPEC_QUEENS))
            continue
        if math.isnan(value) or math.isinf(value):
            out.append(Violation(id="no-infinite-unknown", field=f"{where}.{key}", value=value,
                                 message="must be finite", clause=SPEC_QUEENS))
            continue
        if value < 0:
            out.append(Violation(id="non-negative", field=f"{where}.{key}", value=value,
                                 message="cannot be negative", clause=SPEC_QUEENS))
        if _decimals(float(value)) > 2:
            out.append(Violation(id="gib-2-decimals", field=f"{where}.{key}", value=value,
                                 message="GiB with at most 2 decimals", clause=SPEC_QUEENS))
    total, free = pool.get("total_capacity_gb"), pool.get("free_capacity_gb")
    if is_number(total) and is_number(free) and free > total:
        out.append(Violation(id="free-le-total", field=f"{where}.free_capacity_gb", value=free,
                             message=f"free exceeds total ({total})", clause=SPEC_QUEENS))
    ratio = pool.get("max_over_subscription_ratio")
    if is_number(ratio) and not (math.isfinite(ratio) and ratio >= 1.0):
        out.append(Violation(id="ratio-ge-1", field=f"{where}.max_over_subscription_ratio",
                             value=ratio, message="must be a finite number >= 1.0 ('auto' "
                                                  "is resolved before reporting)",
                             clause=SPEC_KILO))
    reserved = pool.get("reserved_percentage")
    if is_number(reserved) and not 0 <= reserved <= 100:
        out.append(Violation(id="reserved-range", field=f"{where}.reserved_percentage",
                             value=reserved, message="must be within 0..100",
                             clause=SPEC_QUEENS))
    if pool.get("thin_provisioning_support") is False and \
            pool.get("thick_provisioning_support") is False:
        out.append(Violation(id="provisioning-support-declared", field=where, value=None,
                             message="a pool must support thin or thick provisioning",
                             clause=SPEC_QUEENS))
    _check_factors(where, pool, out)


def validate_stats(stats: Any) -> list[Violation]:
    """Every way ``stats`` breaks the contract (an empty list when compliant)."""
    out: list[Violation] = []
    if not isinstance(stats, dict):
        return [Violation(id="field-type", field="<stats>", value=stats,
                          message="stats must be a dict", clause=SPEC_QUEENS)]
    for key, types in REQUIRED_BACKEND_FIELDS.items():
        if key not in stats:
            out.append(Violation(id="required-field", field=key, value=None,
                                 message="required field is missing", clause=SPEC_QUEENS))
        elif not isinstance(stats[key], types):
            out.append(Violation(id="field-type", field=key, value=stats[key],
                                 message=f"must be {types[0].__name__}", clause=SPEC_QUEENS))
    pools = stats.get("pools")
    if isinstance(pools, list):
        if not pools:
            out.append(Violation(id="required-field", field="pools", value=pools,
                                 message="at least one pool is required", clause=SPEC_QUEENS))
        for index, pool in enumerate(pools):
            _check_pool(index, pool, out)
    for key in ("allocated_capacity_gb",):
        if key in stats:
            out.append(Violation(id="no-allocated-capacity", field=key, value=stats[key],
                                 message="drivers must not report allocated capacity",
                                 clause=SPEC_QUEENS))
    for key in ("total_capacity_gb", "free_capacity_gb"):
        if stats.get(key) in ("infinite", "unknown"):
            out.append(Violation(id="no-infinite-unknown", field=key, value=stats[key],
                                 message="report numbers per pool", clause=SPEC_QUEENS))
    return out
