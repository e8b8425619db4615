"""Proof the checks can fail: for each check, a driver breaking only its rule fails
only that check; the compliant drivers they derive from pass them all."""

import pytest

from driver_kit.compliance import CATALOGUE, run_checks
from tests.compliance.drivers import MEMORY_HOOKS, broken_harness, memory_factory


def not_passing(report):
    return report.by_status("failed", "errored")


def test_the_base_of_the_broken_drivers_passes(tmp_path):
    report = run_checks(memory_factory(tmp_path), hooks=MEMORY_HOOKS, timeout_s=20)
    assert not_passing(report) == set(), report.results
    assert report.by_status("skipped") == {"admission.parallel-processes"}


@pytest.mark.parametrize("check", CATALOGUE, ids=[c.id for c in CATALOGUE])
def test_a_broken_driver_fails_exactly_its_check(tmp_path, check):
    what, harness = broken_harness(check.id, tmp_path)
    report = run_checks(timeout_s=20, **harness)
    assert not_passing(report) == {check.id}, (what, [
        (r.id, r.status, r.reason) for r in report.results if r.status != "passed"])
    failed = next(r for r in report.results if r.id == check.id)
    assert failed.status == "failed" and failed.reason
    assert report.exit_code == (1 if check.severity == "must" else 0)


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
