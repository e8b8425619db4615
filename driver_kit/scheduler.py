"""What a Cinder-style scheduler does with a backend's stats.

The capacity filter, the capacity weigher and the get-pools view, answering
exactly as Cinder's scheduler does (tests/unit/data/cinder_cases.json holds
real Cinder's answers). Pools are taken as Cinder receives them from *any*
driver, compliant or not: ratios as strings or 'auto', 'infinite'/'unknown'
capacities, missing keys (they take Cinder's host-manager defaults) and
``allocated_capacity_gb`` standing in for a missing ``provisioned_capacity_gb``.

Where Cinder itself would fail on an input (an arithmetic error deep in its
scheduler), these functions raise ``InvalidInput`` (``InvalidStats`` for a
pool, ``InvalidSize`` for a request) with a message saying why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final

from driver_kit.capacity import _factors, _resolve_ratio, cinder_arithmetic
from driver_kit.exceptions import InvalidInput, InvalidSize, InvalidStats

__all__ = ["backend_passes", "get_pools", "weigh"]

DEFAULT_GLOBAL_RATIO: Final = "20.0"
_INFINITE_UNKNOWN: Final = ("infinite", "unknown")
# Cinder's name for the single pool of a driver that reports no pools.
_LEGACY_POOL_NAME: Final = "_pool0"
# Cinder's CapacityWeigher: how far above the best finite weight an
# 'infinite'/'unknown' pool is put when the smallest weight is favoured.
_OFFSET_MIN: Final = 10000
_OFFSET_MULT: Final = 100
# The syntax Cinder's max_over_subscription_ratio option accepts.
_GLOBAL_RATIO_SYNTAX: Final = re.compile(r"auto|\d*\.\d+|\d+")
_BACKEND_KEYS: Final = ("volume_backend_name", "vendor_name", "driver_version")


@dataclass(frozen=True, slots=True)
class _PoolState:
    """The figures Cinder's host manager keeps for one pool (its PoolState)."""

    name: str
    total: Any
    free: Any
    provisioned: Any
    reserved_percentage: Any
    thin_support: Any
    thick_support: Any
    ratio: float


def _cinder_fails_on(pool_name: str, what: str) -> AbstractContextManager[None]:
    """Turn the arithmetic error Cinder would hit on a bad report into InvalidStats."""
    return cinder_arithmetic(f"pool {pool_name!r}: {what}", InvalidStats)


def _check_global_ratio(value: Any) -> Any:
    """Accept what Cinder's max_over_subscription_ratio option accepts."""
    if isinstance(value, bool):
        pass
    elif isinstance(value, (int, float)):
        if math.isfinite(value) and value >= 0:
            return value
    elif isinstance(value, str) and _GLOBAL_RATIO_SYNTAX.fullmatch(value):
        return value
    raise InvalidInput("global_max_over_subscription_ratio must be 'auto' or a "
                       f"non-negative number, as Cinder's option, got {value!r}")


def _pool_state(pool: Any, global_ratio: Any, *, name: str | None = None) -> _PoolState:
    """Read one pool report the way Cinder's host manager does, with its defaults."""
    if not isinstance(pool, Mapping):
        raise InvalidStats(f"a pool must be a dict of stats, got {type(pool).__name__}")
    if name is None:
        if "pool_name" not in pool:
            raise InvalidStats(f"a pool must have a pool_name, got keys {sorted(pool)}")
        name = pool["pool_name"]
        if not isinstance(name, str) or not name:
            raise InvalidStats(f"pool_name must be a non-empty string, got {name!r}")
    allocated = pool.get("allocated_capacity_gb", 0)
    with _cinder_fails_on(name, "max over-subscription ratio ('auto') calculation"):
        ratio = _resolve_ratio(dict(pool), global_ratio)
    return _PoolState(
        name=name,
        total=pool.get("total_capacity_gb", 0),
        free=pool.get("free_capacity_gb", 0),
        provisioned=pool.get("provisioned_capacity_gb", allocated),
        reserved_percentage=pool.get("reserved_percentage", 0),
        thin_support=pool.get("thin_provisioning_support", False),
        thick_support=pool.get("thick_provisioning_support", False),
        ratio=ratio)


def _check_size(name: str, value: Any) -> int:
    """A request size as an int: Cinder sizes are whole, non-negative GiB."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value != int(value):
        raise InvalidSize(f"request {name} must be a whole number of GiB, got {value!r}")
    if value < 0:
        raise InvalidSize(f"request {name} cannot be negative, got {value!r}")
    return int(value)


def _read_request(request: Any) -> tuple[int, bool]:
    """The size a request needs (new_size - size for an extend) and whether it is thin."""
    if not isinstance(request, Mapping):
        raise InvalidInput(f"a request must be a dict, got {type(request).__name__}")
    if "size" not in request:
        raise InvalidSize("a request must give its size (the current size for an extend)")
    size = _check_size("size", request["size"])
    new_size = request.get("new_size")
    if new_size is not None:
        new_size = _check_size("new_size", new_size)
        if new_size < size:
            raise InvalidSize(f"an extend cannot shrink a volume: new_size {new_size} "
                              f"< size {size}")
    extra_specs = request.get("extra_specs") or {}
    if not isinstance(extra_specs, Mapping):
        raise InvalidInput(f"extra_specs must be a dict, got {type(extra_specs).__name__}")
    # As in Cinder, a falsy new_size means a create, and only an explicit
    # 'thick' turns the over-subscription ratio off.
    requested = new_size - size if new_size else size
    return requested, extra_specs.get("provisioning:type") != "thick"


def _state_factors(state: _PoolState, ratio: Any, thin: bool) -> dict[str, Any]:
    """Cinder's capacity factors of one pool, or InvalidStats where Cinder would fail."""
    with _cinder_fails_on(state.name, "capacity factors calculation"):
        return _factors(state.total, state.free, state.provisioned, state.thin_support,
                        ratio, state.reserved_percentage, thin)


def backend_passes(pool: dict[str, Any], request: dict[str, Any], *,
                   global_max_over_subscription_ratio: Any = DEFAULT_GLOBAL_RATIO) -> bool:
    """Whether Cinder's CapacityFilter lets ``request`` land on ``pool``.

    ``request`` is ``{"size", "new_size", "extra_specs"}``; for an extend,
    ``size`` is the current size and the filter asks for ``new_size - size``.
    """
    global_ratio = _check_global_ratio(global_max_over_subscription_ratio)
    state = _pool_state(pool, global_ratio)
    requested, thin = _read_request(request)

    if requested == 0:  # a manage request takes no new space
        return True
    if state.free is None:  # Cinder fails safe on broken stats collection
        return False
    if state.free in _INFINITE_UNKNOWN:
        return True
    with _cinder_fails_on(state.name, "capacity filter"):
        reserved = float(state.reserved_percentage) / 100
        if state.total in _INFINITE_UNKNOWN:
            # the reserved amount of an unknown total cannot be computed
            return reserved == 0
        if float(state.total) <= 0:
            return False

    factors = _state_factors(state, state.ratio if state.thin_support else 1, thin)
    virtual_free = factors["virtual_free_capacity"]
    if thin and state.thin_support:
        if not state.ratio >= 1:
            return False
        # Cinder compares against total_available_capacity, which already
        # includes the ratio, and then against the ratio once more.
        with _cinder_fails_on(state.name, "capacity filter"):
            provisioned_ratio = ((state.provisioned + requested)
                                 / factors["total_available_capacity"])
        if provisioned_ratio > state.ratio:
            return False
    return virtual_free >= requested


def _raw_weight(state: _PoolState, thin: bool, multiplier: float) -> float:
    """CapacityWeigher's weight of one pool before normalisation."""
    if state.free in _INFINITE_UNKNOWN or state.total in _INFINITE_UNKNOWN:
        # the lowest weight, whichever way the multiplier points
        return -1 if multiplier > 0 else math.inf
    return _state_factors(state, state.ratio, thin)["virtual_free_capacity"]


def weigh(pools: list[dict[str, Any]], request: dict[str, Any], multiplier: float = 1.0, *,
          global_max_over_subscription_ratio: Any = DEFAULT_GLOBAL_RATIO,
          ) -> list[tuple[str, float]]:
    """Rank every pool as Cinder's CapacityWeigher does: ``(pool_name, weight)``, best first.

    Weights are normalised to 0..1 over the pools given and scaled by
    ``multiplier`` (Cinder's ``capacity_weight_multiplier``; negative stacks).
    """
    if not isinstance(pools, Sequence) or isinstance(pools, (str, bytes)):
        raise InvalidInput(f"pools must be a list of pool dicts, got {type(pools).__name__}")
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) \
            or not math.isfinite(multiplier):
        raise InvalidInput(f"multiplier must be a finite number, got {multiplier!r}")
    multiplier = float(multiplier)
    global_ratio = _check_global_ratio(global_max_over_subscription_ratio)
    _, thin = _read_request(request)
    states = [_pool_state(pool, global_ratio) for pool in pools]
    if not states:
        return []

    raw = [_raw_weight(state, thin, multiplier) for state in states]
    minval = maxval = raw[0]
    for weight in raw:
        if weight < minval:
            minval = weight
        elif weight > maxval:
            maxval = weight
    if math.isinf(maxval):
        finite = [w for w in raw if not math.isinf(w)]
        if not finite:
            raise InvalidInput(
                "Cinder's CapacityWeigher fails (ValueError) when every pool reports "
                "'infinite' or 'unknown' capacity and the multiplier is <= 0")
        maxval = max(finite)
        offset = (maxval - minval) * _OFFSET_MULT
        maxval += _OFFSET_MIN if offset == 0.0 else offset
        raw = [maxval if math.isinf(w) else w for w in raw]

    low, high = float(minval), float(maxval)
    if low == high:
        normalised: list[float] = [0] * len(raw)
    else:
        normalised = [(w - low) / (high - low) for w in raw]
    weighed = [(state.name, 0.0 + multiplier * w) for state, w in zip(states, normalised)]
    return sorted(weighed, key=lambda item: item[1], reverse=True)


def _capabilities(pool: Mapping[str, Any], stats: Mapping[str, Any]) -> dict[str, Any]:
    """A pool's capabilities with the backend-level facts Cinder copies into them."""
    capabilities = dict(pool)
    capabilities.pop("pools", None)
    for key in _BACKEND_KEYS:
        if not capabilities.get(key):
            capabilities[key] = stats.get(key)
    capabilities["storage_protocol"] = (capabilities.get("storage_protocol")
                                        or stats.get("storage_protocol"))
    for key in ("filter_function", "goodness_function"):
        if key not in capabilities and key in stats:
            capabilities[key] = stats[key]
    return capabilities


def _pool_capacity_factors(state: _PoolState) -> list[dict[str, Any]]:
    """One factors dict per provisioning type the pool supports, thick first."""
    if any(value is None or value in _INFINITE_UNKNOWN for value in (state.total, state.free)):
        return []
    kinds = [thin for thin, supported in ((False, state.thick_support),
                                          (True, state.thin_support)) if supported]
    # A pool claiming neither is scheduled as thick by Cinder's filter.
    return [_state_factors(state, state.ratio, thin) for thin in kinds or [False]]


def get_pools(stats: dict[str, Any], *,
              global_max_over_subscription_ratio: Any = DEFAULT_GLOBAL_RATIO,
              ) -> list[dict[str, Any]]:
    """The get-pools view of a backend's stats, with seed-002 capacity factors per pool.

    Names are ``<volume_backend_name>#<pool_name>`` (just the pool name when
    the backend has no name); a report without ``pools`` is one pool, as in Cinder.
    """
    if not isinstance(stats, Mapping):
        raise InvalidStats(f"backend stats must be a dict, got {type(stats).__name__}")
    global_ratio = _check_global_ratio(global_max_over_subscription_ratio)
    backend = stats.get("volume_backend_name")
    pools = stats.get("pools")
    if pools is None:
        states = [(stats, _pool_state(stats, global_ratio,
                                      name=backend or _LEGACY_POOL_NAME))]
    elif isinstance(pools, list):
        states = [(pool, _pool_state(pool, global_ratio)) for pool in pools]
    else:
        raise InvalidStats(f"'pools' must be a list of pool dicts, got {type(pools).__name__}")
    return [{"name": f"{backend}#{state.name}" if backend else state.name,
             "capabilities": _capabilities(pool, stats),
             "capacity_factors": _pool_capacity_factors(state)}
            for pool, state in states]
