"""Real Cinder's scheduler against the driver, decision by decision (tests/ecosystem/agreement.py).

At the default calculation the driver refuses, for capacity, exactly what
Cinder's default filters refuse: nothing the scheduler passes comes back as a
refusal, on creates, extends and snapshots. The stricter ``cinder``
calculation does refuse what the scheduler passes, unless DriverFilter runs
with the kit's filter function, which covers creates and snapshots.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from driver_kit import capacity
from tests.ecosystem.agreement import STATES, sweep
from tests.ecosystem.support import CINDER_INSTALLED, IN_CI, NO_CINDER


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not CINDER_INSTALLED and not IN_CI:
        pytest.skip(NO_CINDER)
    return sweep(tmp_path_factory.mktemp("agreement"), (None, "cinder"))


def test_the_sweep_is_cinders_own_scheduler_over_many_decisions(
        figures: dict[str, Any]) -> None:
    assert {"CapacityFilter", "CapabilitiesFilter"} <= set(figures["default_filters"])
    assert figures["default_weighers"] == ["CapacityWeigher"]
    default = figures["results"][f"default ({capacity.DEFAULT_CALCULATION}) / default"]
    assert figures["states"] == len(STATES) >= 5
    assert default["decisions"] >= 616
    for op in ("create", "extend", "snapshot"):
        assert default[f"decisions.{op}"] > 0, op


def test_at_defaults_the_driver_takes_everything_the_scheduler_passes(
        figures: dict[str, Any]) -> None:
    default = figures["results"]["default (standard) / default"]
    assert default.get("scheduled_then_refused", 0) == 0, default["examples"]
    # and it refuses only what the scheduler refuses too: the same test, both ways
    assert default["agreements"] == default["decisions"]
    assert default["placements"]["placed"] == default["placements"]["admitted"] > 0


def test_the_cinder_calculation_refuses_what_the_scheduler_passes(
        figures: dict[str, Any]) -> None:
    strict = figures["results"]["cinder / default"]
    assert strict["scheduled_then_refused.create"] > 0
    assert strict["placements"]["admitted"] < strict["placements"]["placed"]


def test_driver_filter_makes_the_scheduler_agree_with_the_cinder_calculation(
        figures: dict[str, Any]) -> None:
    """Creates and snapshots agree; an extend's filter sees the size, not the growth."""
    filtered = figures["results"]["cinder / default+DriverFilter"]
    assert filtered.get("scheduled_then_refused.create", 0) == 0, filtered["examples"]
    assert filtered.get("scheduled_then_refused.snapshot", 0) == 0, filtered["examples"]
    assert all(e.startswith("extend ") for e in filtered["examples"])
    assert filtered["placements"]["placed"] == filtered["placements"]["admitted"] > 0


def test_the_cinder_guide_states_the_filter_function_and_these_figures(
        figures: dict[str, Any]) -> None:
    guide = " ".join((Path(__file__).parents[2] / "docs" / "cinder.md").read_text().split())
    assert capacity.CINDER_CALCULATION_FILTER_FUNCTION in guide
    stated = re.search(r"puts (\d+) decisions on (\d+) pool states .*? agree on all (\d+);"
                       r" with `cinder` the scheduler passes (\d+) that the driver refuses,"
                       r" (\d+) \(all extends\)", guide)
    assert stated, "docs/cinder.md's agreement figures"
    results = figures["results"]
    default = results["default (standard) / default"]
    assert [int(n) for n in stated.groups()] == [
        default["decisions"], figures["states"], default["agreements"],
        results["cinder / default"]["scheduled_then_refused"],
        results["cinder / default+DriverFilter"]["scheduled_then_refused"]]
