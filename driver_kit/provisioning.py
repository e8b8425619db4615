"""What a request's volume type asks for (``provisioning:type``) and what it gets on a pool.

One rule for the admission guard: no type is thin where the pool can be (Queens spec).
Cinder's CapacityFilter reads ``provisioning:type`` for its arithmetic, but no filter
matches it against a pool's capabilities (docs/cinder-deployment.md).
"""

from __future__ import annotations

from typing import Any, Mapping

from driver_kit.exceptions import InvalidInput
from driver_kit.stats import PoolFacts

__all__ = ["provisioning_type", "provisioned_thin"]


def provisioning_type(extra_specs: Mapping[str, Any] | None) -> str | None:
    """The ``provisioning:type`` a volume type asks for: 'thin', 'thick' or None."""
    if extra_specs is None:
        return None
    if not isinstance(extra_specs, Mapping):
        raise InvalidInput(f"extra_specs must be a mapping, got {extra_specs!r}")
    wanted = extra_specs.get("provisioning:type")
    if wanted is None:
        return None
    if wanted not in ("thin", "thick"):
        raise InvalidInput(f"provisioning:type must be 'thin' or 'thick', got {wanted!r}")
    return wanted


def provisioned_thin(pool: PoolFacts, wanted: str | None) -> bool:
    """Whether a volume asked for as ``wanted`` ('thin', 'thick', None) is thin on ``pool``.

    No type: thin where the pool can (Queens spec). Thin on a thick-only pool is
    made thick, as Cinder's LVM driver does on a thick VG: Cinder's CapacityFilter
    passed it with the thick arithmetic, and a full allocation is more than was
    asked, never less. Thick on a thin-only pool is refused: thin would be less (the
    guard first sends such a request to the backend's thick pool, if it has one).
    """
    if wanted in (None, "thin") and pool.thin_provisioning_support:
        return True
    if pool.thick_provisioning_support:
        return False
    raise InvalidInput(f"pool {pool.pool_name} does not support "
                       f"{wanted or 'thin or thick'} provisioning")
