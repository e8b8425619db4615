"""Proof the checks can fail: for each check, a driver breaking only its rule fails
only that check; the compliant drivers they derive from pass them all."""

import dataclasses

import pytest

from driver_kit.compliance import CATALOGUE, run_checks
from tests.compliance.drivers import (HAND_WRITTEN_HOOKS, MEMORY_HOOKS, MORE_BREAKS,
                                      HandWrittenArray, broken_harness, memory_factory)


def not_passing(report):
    return report.by_status("failed", "errored")


def test_the_base_of_the_broken_drivers_passes(tmp_path):
    report = run_checks(memory_factory(tmp_path), hooks=MEMORY_HOOKS, timeout_s=20)
    assert not_passing(report) == set(), report.results
    assert report.by_status("skipped") == {"admission.parallel-processes"}


def fails_exactly(check, what, harness):
    """Run the catalogue with ``harness``: only ``check`` fails; its result."""
    report = run_checks(timeout_s=20, **harness)
    assert not_passing(report) == {check.id}, (what, [
        (r.id, r.status, r.reason) for r in report.results if r.status != "passed"])
    failed = next(r for r in report.results if r.id == check.id)
    assert failed.status == "failed" and failed.reason
    assert report.exit_code == (1 if check.severity == "must" else 0)
    return failed


@pytest.mark.parametrize("check", CATALOGUE, ids=[c.id for c in CATALOGUE])
def test_a_broken_driver_fails_exactly_its_check(tmp_path, check):
    what, harness = broken_harness(check.id, tmp_path)
    fails_exactly(check, what, harness)


@pytest.mark.parametrize("check_id, what, reason, harness", MORE_BREAKS,
                         ids=[f"{b[0]}: {b[1]}" for b in MORE_BREAKS])
def test_each_other_way_to_break_a_check_fails_it(tmp_path, check_id, what, reason, harness):
    check = next(c for c in CATALOGUE if c.id == check_id)
    assert reason in fails_exactly(check, what, harness(tmp_path)).reason


def test_a_driver_without_backend_read_pools_shows_its_cache_through_the_hook():
    """stats.refresh-cached cannot count the reads of a driver without
    backend_read_pools: it makes a volume out of band and sees that
    refresh=False still serves the report of the last refresh."""
    made, out_of_band = [], []

    def factory():
        made.append(HandWrittenArray())
        return made[-1]

    def create_out_of_band(driver, name, size_gb):
        out_of_band.append(name)
        HAND_WRITTEN_HOOKS.create_out_of_band(driver, name, size_gb)
    hooks = dataclasses.replace(HAND_WRITTEN_HOOKS, create_out_of_band=create_out_of_band)
    report = run_checks(factory, hooks=hooks, timeout_s=20)
    assert not_passing(report) == set(), report.results
    cached = next(r for r in report.results if r.id == "stats.refresh-cached")
    assert (cached.status, cached.reason) == (
        "passed", "the cached report, unchanged by a volume made out of band")
    # one volume was made behind the driver's back, and the clean-up removed it
    assert len(out_of_band) == 1 and all(driver.array == {} for driver in made)


def test_every_check_has_a_stable_id_clause_and_severity():
    ids = [c.id for c in CATALOGUE]
    assert len(ids) == len(set(ids))
    for check in CATALOGUE:
        assert check.title and check.clause and check.severity in ("must", "should")
    report_ids = {c.id for c in CATALOGUE if c.kind == "report" and c.violation_ids}
    mapped = {v for c in CATALOGUE for v in c.violation_ids}
    assert len(report_ids) == 11
    # every rule of driver_kit.validate_stats is enforced by exactly one check
    assert mapped == {"required-field", "field-type", "gib-2-decimals", "no-infinite-unknown",
                      "no-allocated-capacity", "free-le-total", "non-negative",
                      "ratio-ge-1", "reserved-range", "provisioned-present",
                      "provisioning-support-declared", "capacity-factors-consistent"}
