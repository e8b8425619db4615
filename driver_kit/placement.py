"""Each pool of a stats report as a Placement resource provider with a DISK_GB inventory.

OpenStack Placement admits an allocation of ``request`` units when
``usage + request <= (total - reserved) * allocation_ratio`` and
``min_unit <= request <= max_unit`` with ``request % step_size == 0``. The
inventory below is chosen so that, for the same pool, Placement's answer is
the kit's admission decision (``driver_kit.capacity.admit``):

* ``total``: the pool's total in whole GiB (Placement counts integers; the
  reported total is floored, so a fractional GiB is never offered);
* ``reserved``: the reserved GiB exactly as Cinder and the kit compute it
  (``capacity.reserved_gb``: ``floor(float(total_capacity_gb) *
  (float(reserved_percentage) / 100))`` in floating point, so 100 GiB at 29%
  reserves 28, not 29);
* ``allocation_ratio``: the pool's max over-subscription ratio ('auto'
  already resolved) when it is thin, 1.0 when it is thick only;
* ``usage``: the provisioned GiB (rounded up), counted from the backend;
* ``min_unit`` 1 and ``step_size`` 1: volumes are whole GiB, as in Cinder;
* ``max_unit``: the largest volume the kit admits now, which carries the checks
  Placement's formula cannot express (free space for thick pools and for the
  ``cinder`` over-provisioning calculation).

When nothing fits, ``reserved`` equals ``total`` (Placement's way to offer
nothing while keeping the inventory, as Nova does for unavailable nodes); a
pool that is down, or smaller than 1 GiB, has no inventory at all.
Placement allocates by whole units, so for a pool whose total is not whole GiB
its cap is up to one GiB per ratio unit below the kit's: never above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Mapping

from driver_kit.capacity import reserved_gb
from driver_kit.exceptions import InvalidStats

__all__ = ["RESOURCE_CLASS", "Inventory", "pool_inventory", "resource_providers"]

RESOURCE_CLASS: Final = "DISK_GB"


@dataclass(frozen=True, slots=True, kw_only=True)
class Inventory:
    """One DISK_GB inventory record, with Placement's fields (GiB, ratio a float)."""

    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float

    @property
    def capacity(self) -> float:
        """Placement's capacity: ``(total - reserved) * allocation_ratio`` GiB."""
        return (self.total - self.reserved) * self.allocation_ratio

    def fits(self, usage: int, request: int) -> bool:
        """Whether Placement would allocate ``request`` GiB on top of ``usage`` GiB."""
        return (self.min_unit <= request <= self.max_unit
                and request % self.step_size == 0
                and usage + request <= self.capacity)

    def as_dict(self) -> dict[str, Any]:
        """The body of one resource class in ``PUT /resource_providers/{uuid}/inventories``."""
        return {"total": self.total, "reserved": self.reserved, "min_unit": self.min_unit,
                "max_unit": self.max_unit, "step_size": self.step_size,
                "allocation_ratio": self.allocation_ratio}


def _number(pool: Mapping[str, Any], key: str) -> float:
    value = pool.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise InvalidStats(f"pool {pool.get('pool_name')!r}: {key} must be a number, "
                           f"got {value!r}")
    return float(value)


def pool_inventory(pool: Mapping[str, Any]) -> Inventory | None:
    """The DISK_GB inventory of one pool of a kit stats report (None: offers nothing)."""
    if pool.get("backend_state", "up") != "up":
        return None
    total_gb = _number(pool, "total_capacity_gb")
    total = math.floor(total_gb)
    if total < 1:
        return None
    reserved = reserved_gb(total_gb, _number(pool, "reserved_percentage"))
    thin = bool(pool.get("thin_provisioning_support"))
    ratio = _number(pool, "max_over_subscription_ratio") if thin else 1.0
    largest = int(_number(pool, "max_volume_size_gb"))
    if largest < 1:  # nothing fits: reserve everything, keep max_unit >= min_unit
        reserved, largest = total, 1
    return Inventory(total=total, reserved=min(reserved, total), min_unit=1,
                     max_unit=largest, step_size=1, allocation_ratio=ratio)


def resource_providers(stats: Mapping[str, Any]) -> dict[str, Any]:
    """Every pool of ``stats`` as a resource provider: inventories and usages.

    Each entry has the provider's ``name`` (``<volume_backend_name>#<pool_name>``,
    as Cinder names pools), ``inventories`` in the shape of Placement's
    ``PUT .../inventories`` body and ``usages`` in the shape of its
    ``GET .../usages`` answer; a down pool has neither and says why.
    """
    if not isinstance(stats, Mapping) or not isinstance(stats.get("pools"), list):
        raise InvalidStats("stats must be a driver_kit report with a list of pools")
    backend = stats.get("volume_backend_name")
    providers = []
    for pool in stats["pools"]:
        entry: dict[str, Any] = {"name": f"{backend}#{pool['pool_name']}",
                                 "inventories": {}, "usages": {}}
        inventory = pool_inventory(pool)
        if inventory is not None:
            entry["inventories"][RESOURCE_CLASS] = inventory.as_dict()
            entry["usages"][RESOURCE_CLASS] = math.ceil(
                _number(pool, "provisioned_capacity_gb"))
        if pool.get("backend_state", "up") != "up":
            entry["backend_state"] = pool.get("backend_state")
            entry["down_reason"] = pool.get("down_reason")
        providers.append(entry)
    return {"resource_providers": providers}
