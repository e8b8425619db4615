"""The kit gives exactly real Cinder's answers (tests/unit/data/cinder_cases.json).

The data file is written by tests/cinder_reference/generate_cases.py running
Cinder itself; floats are compared with ``==``, not approximately.
"""

from __future__ import annotations

import json
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
                 "TypeError": TypeError, "AttributeError": AttributeError}


def cases(section: str) -> list[Any]:
    return [pytest.param(case, id=f"{section}-{i}") for i, case in enumerate(DATA[section])]


def test_data_comes_from_cinder() -> None:
    header = DATA["header"]
    assert header["cinder_version"] and "generate_cases.py" in header["command"]
    assert header["counts"] == {section: len(DATA[section]) for section in header["counts"]}
    assert sum(header["counts"].values()) >= 500


# --------------------------------------------------------------------------
# capacity math: the functions carrying Cinder's names answer as Cinder does,
# for every input Cinder takes; where Cinder's arithmetic fails, InvalidInput


def _same_as_cinder(case: dict[str, Any], core: Any, public: Any) -> None:
    if "raises" in case:
        with pytest.raises(CINDER_ERRORS[case["raises"]]):
            core()
        with pytest.raises(InvalidInput, match="Cinder's scheduler fails"):
            public()
    else:
        assert core() == case["output"]
        assert public() == case["output"]


@pytest.mark.parametrize("case", cases("capacity_factors"))
def test_capacity_factors(case: dict[str, Any]) -> None:
    _same_as_cinder(case, lambda: _factors(*case["input"]),
                    lambda: calculate_capacity_factors(*case["input"]))


@pytest.mark.parametrize("case", cases("virtual_free"))
def test_virtual_free_capacity(case: dict[str, Any]) -> None:
    _same_as_cinder(case, lambda: _factors(*case["input"])["virtual_free_capacity"],
                    lambda: calculate_virtual_free_capacity(*case["input"]))


@pytest.mark.parametrize("case", cases("max_over_subscription_ratio"))
def test_max_over_subscription_ratio(case: dict[str, Any]) -> None:
    capability, global_ratio = case["input"]["capability"], case["input"]["global"]
    _same_as_cinder(case, lambda: _resolve_ratio(capability, global_ratio),
                    lambda: calculate_max_over_subscription_ratio(capability, global_ratio))


def _inputs(section: str) -> list[Any]:
    return [case["input"] for case in DATA[section] if "raises" not in case]


def test_cases_include_what_cinder_takes_and_a_report_never_says() -> None:
    """Strings, 'infinite'/'unknown', a ratio of 0 or below 1, reserved outside 0..100."""
    factors = _inputs("capacity_factors")
    assert any(isinstance(args[0], str) for args in factors)
    assert any(0 < args[4] < 1 for args in factors if not isinstance(args[4], str))
    assert any(args[4] == 0 for args in factors)
    assert any(not 0 <= float(args[5]) <= 100 for args in factors)
    assert any(args[0] < 0 or args[2] < 0 for args in factors if not isinstance(args[0], str))
    ratios = _inputs("max_over_subscription_ratio")
    capabilities = [given["capability"] for given in ratios]
    assert any(c.get("max_over_subscription_ratio") == 0 for c in capabilities)
    assert any(given["global"] == "0.5" for given in ratios)
    assert any(c.get("total_capacity_gb") == "infinite" for c in capabilities)
    assert any(c.get("free_capacity_gb") == "unknown" for c in capabilities)
    assert any(c.get("max_over_subscription_ratio") == "2.0" for c in capabilities)


def test_a_ratio_of_0_falls_back_to_the_global_ratio() -> None:
    pool = {"thin_provisioning_support": True, "total_capacity_gb": 100,
            "free_capacity_gb": 50, "provisioned_capacity_gb": 10,
            "max_over_subscription_ratio": 0}
    assert calculate_max_over_subscription_ratio(pool, "0.5") == 0.5
    assert calculate_max_over_subscription_ratio(pool, "auto") == 1 + 10 / 51
    assert calculate_max_over_subscription_ratio(
        dict(pool, total_capacity_gb="unknown"), "0.5") == 1.0


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
