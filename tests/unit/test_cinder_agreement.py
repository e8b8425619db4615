"""The kit gives exactly real Cinder's answers (tests/unit/data/cinder_cases.json).

The data file is written by tests/cinder_reference/generate_cases.py running
Cinder itself; floats are compared with ``==``, not approximately.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from driver_kit.capacity import (
    _factors,
    _resolve_ratio,
    calculate_capacity_factors,
    calculate_max_over_subscription_ratio,
    calculate_virtual_free_capacity,
)
from driver_kit.exceptions import InvalidInput, InvalidSize, InvalidStats
from driver_kit.scheduler import backend_passes, weigh

DATA = json.loads((Path(__file__).parent / "data" / "cinder_cases.json").read_text())
CINDER_ERRORS = {"ZeroDivisionError": ZeroDivisionError, "ValueError": ValueError,
                 "TypeError": TypeError}


def cases(section: str) -> list[Any]:
    return [pytest.param(case, id=f"{section}-{i}") for i, case in enumerate(DATA[section])]


def test_data_comes_from_cinder() -> None:
    header = DATA["header"]
    assert header["cinder_version"] and "generate_cases.py" in header["command"]
    assert sum(header["counts"].values()) >= 500


# --------------------------------------------------------------------------
# capacity math: the public validated functions and the unvalidated cores

@pytest.mark.parametrize("case", cases("capacity_factors"))
def test_capacity_factors(case: dict[str, Any]) -> None:
    assert _factors(*case["input"]) == case["output"]
    assert calculate_capacity_factors(*case["input"]) == case["output"]


@pytest.mark.parametrize("case", cases("virtual_free"))
def test_virtual_free_capacity(case: dict[str, Any]) -> None:
    assert _factors(*case["input"])["virtual_free_capacity"] == case["output"]
    assert calculate_virtual_free_capacity(*case["input"]) == case["output"]


def _is_capacity(value: Any) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value >= 0)


def _is_ratio(value: Any, *, allow_auto: bool = True) -> bool:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return allow_auto
    if isinstance(value, bool):
        return False
    try:
        return float(value) >= 1.0
    except (TypeError, ValueError):
        return False


def _public_ratio_accepts(capability: dict[str, Any], global_ratio: Any) -> bool:
    """Whether the validated calculate_max_over_subscription_ratio takes these inputs."""
    capacities = ("total_capacity_gb", "free_capacity_gb", "provisioned_capacity_gb",
                  "allocated_capacity_gb")
    if not all(_is_capacity(capability[k]) for k in capacities if k in capability):
        return False
    ratio = capability.get("max_over_subscription_ratio")
    return (_is_ratio(global_ratio)
            and capability.get("free_capacity_gb", 0) <= capability.get("total_capacity_gb", 0)
            and (ratio is None or _is_ratio(ratio))
            and isinstance(capability.get("thin_provisioning_support", False), bool))


def _auto_spelled_lowercase(capability: dict[str, Any], global_ratio: Any,
                            ) -> tuple[dict[str, Any], Any]:
    """The inputs with any 'Auto'/'AUTO' spelled the one way Cinder understands."""
    def fix(value: Any) -> Any:
        return "auto" if isinstance(value, str) and value.strip().lower() == "auto" else value
    fixed = dict(capability)
    if "max_over_subscription_ratio" in fixed:
        fixed["max_over_subscription_ratio"] = fix(fixed["max_over_subscription_ratio"])
    return fixed, fix(global_ratio)


@pytest.mark.parametrize("case", cases("max_over_subscription_ratio"))
def test_max_over_subscription_ratio(case: dict[str, Any]) -> None:
    capability, global_ratio = case["input"]["capability"], case["input"]["global"]
    if "raises" in case:
        with pytest.raises(CINDER_ERRORS[case["raises"]]):
            _resolve_ratio(capability, global_ratio)
        spelled = _auto_spelled_lowercase(capability, global_ratio)
        if spelled != (capability, global_ratio):
            # the kit reads 'Auto' as 'auto' where Cinder's float() chokes on it
            assert calculate_max_over_subscription_ratio(capability, global_ratio) \
                == _resolve_ratio(*spelled)
        else:
            with pytest.raises(InvalidInput):
                calculate_max_over_subscription_ratio(capability, global_ratio)
        return
    assert _resolve_ratio(capability, global_ratio) == case["output"]
    if _public_ratio_accepts(capability, global_ratio):
        assert calculate_max_over_subscription_ratio(capability, global_ratio) \
            == case["output"]
    else:
        with pytest.raises(InvalidInput):
            calculate_max_over_subscription_ratio(capability, global_ratio)


def test_ratio_cases_cover_both_validated_and_refused_inputs() -> None:
    verdicts = {_public_ratio_accepts(c["input"]["capability"], c["input"]["global"])
                for c in DATA["max_over_subscription_ratio"] if "raises" not in c}
    assert verdicts == {True, False}


# --------------------------------------------------------------------------
# the scheduler view

def _kit_refuses_request(request: dict[str, Any]) -> bool:
    """Requests Cinder's filter evaluates anyway but the kit refuses."""
    size, new_size = request["size"], request.get("new_size")
    return (size < 0 or size != int(size)
            or (new_size is not None and new_size < size))


@pytest.mark.parametrize("case", cases("backend_passes"))
def test_backend_passes(case: dict[str, Any]) -> None:
    given = case["input"]
    call = lambda: backend_passes(  # noqa: E731
        given["pool"], given["request"],
        global_max_over_subscription_ratio=given["global_max_over_subscription_ratio"])
    if _kit_refuses_request(given["request"]):
        with pytest.raises(InvalidSize):
            call()
    elif "raises" in case:
        with pytest.raises(InvalidStats, match="Cinder's"):
            call()
    else:
        assert call() is case["output"]


@pytest.mark.parametrize("case", cases("weigh"))
def test_weigh(case: dict[str, Any]) -> None:
    given = case["input"]
    call = lambda: weigh(  # noqa: E731
        given["pools"], given["request"], given["multiplier"],
        global_max_over_subscription_ratio=given["global_max_over_subscription_ratio"])
    if "raises" in case:
        with pytest.raises(InvalidInput, match="Cinder's"):
            call()
    else:
        assert [[name, weight] for name, weight in call()] == case["output"]
