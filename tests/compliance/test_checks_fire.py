"""Proof the checks can fail: each deliberately broken driver (``broken.BROKEN``, one
realistic bug each) fails exactly the checks it should, and together they fail every
check of the catalogue; the compliant drivers they derive from pass."""

import pytest

from driver_kit.compliance import CATALOGUE, run_checks
from tests.compliance.broken import BROKEN
from tests.compliance.drivers import HAND_WRITTEN_HOOKS, HandWrittenArray, memory_factory


def test_the_base_of_the_broken_drivers_passes(tmp_path):
    report = run_checks(memory_factory(tmp_path), timeout_s=20)
    assert report.by_status("failed", "errored") == set(), report.results
    # it has no device path
    assert report.by_status("skipped") == {"admission.parallel-processes", "ops.device-path"}


@pytest.mark.parametrize("broken", BROKEN, ids=[b.bug for b in BROKEN])
def test_a_broken_driver_fails_exactly_its_checks(tmp_path, broken):
    report = run_checks(timeout_s=20, **broken.harness(tmp_path))
    outcome = {r.id: (r.status, r.reason) for r in report.results
               if r.status in ("failed", "errored")}
    assert (report.by_status("failed"), report.by_status("errored")) == (
        broken.fails, broken.errors), outcome
    assert all(reason for _, reason in outcome.values())
    must = any(c.severity == "must" for c in CATALOGUE if c.id in broken.fails)
    assert report.exit_code == (1 if must or broken.errors else 0)


def test_every_check_fails_on_some_broken_driver():
    assert set().union(*(b.fails for b in BROKEN)) == {c.id for c in CATALOGUE}


def test_a_driver_without_backend_read_pools_shows_its_cache_through_the_hook():
    """stats.refresh-cached cannot count the reads of a driver without
    backend_read_pools nor a backend_calls hook: it makes a volume out of band and
    sees that refresh=False still serves the report of the last refresh."""
    made = []

    def factory():
        made.append(HandWrittenArray())
        return made[-1]
    report = run_checks(factory, hooks=HAND_WRITTEN_HOOKS, only=["stats.refresh-cached"],
                        timeout_s=20)
    cached = report.results[-1]
    assert (cached.status, cached.reason) == (
        "passed", "the cached report, unchanged by a volume made out of band")
    # one volume was made behind the driver's back, and the clean-up removed it
    assert all(driver.array == {} for driver in made)


def test_every_check_has_a_stable_id_clause_severity_and_its_hooks():
    ids = [c.id for c in CATALOGUE]
    assert len(ids) == len(set(ids)) == 54
    for check in CATALOGUE:
        assert check.title and check.clause and check.severity in ("must", "should")
    assert [c.id for c in CATALOGUE if c.severity == "should"] == [
        "stats.refresh-cached", "truth.total-volumes-group"]
    mapped = {v for c in CATALOGUE for v in c.violation_ids}
    # every rule of driver_kit.validate_stats is enforced by exactly one check
    assert mapped == {"required-field", "field-type", "gib-2-decimals", "no-infinite-unknown",
                      "no-allocated-capacity", "free-le-total", "non-negative",
                      "ratio-ge-1", "reserved-range", "provisioned-present",
                      "provisioning-support-declared", "capacity-factors-consistent"}
    assert {c.id for c in CATALOGUE if "read_truth" in c.hooks} >= {
        c.id for c in CATALOGUE if c.id.startswith("truth.")}
