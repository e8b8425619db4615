import copy

import pytest

from driver_kit import GiB, PoolFacts, validate_stats
from driver_kit.exceptions import InvalidInput
from driver_kit.stats import BackendStats, build_pool_stats, down_pool_stats


def facts(**kw):
    base = dict(pool_name="p", total_bytes=100 * GiB, free_bytes=60 * GiB,
                provisioned_bytes=150 * GiB, thin_provisioning_support=True,
                thick_provisioning_support=False, total_volumes=3)
    base.update(kw)
    return PoolFacts(**base)


def report(pool_facts=None, **kw):
    pool = build_pool_stats(pool_facts or facts(), max_over_subscription_ratio=kw.get(
        "ratio", 2.0), reserved_percentage=kw.get("reserved", 0))
    return BackendStats(volume_backend_name="b", vendor_name="v", driver_version="1",
                        storage_protocol="iSCSI", pools=(pool,)).to_dict()


def test_built_report_is_compliant_and_conservative():
    stats = report(facts(total_bytes=100 * GiB + 1, free_bytes=60 * GiB - 1,
                         provisioned_bytes=150 * GiB + 1))
    assert validate_stats(stats) == []
    pool = stats["pools"][0]
    assert (pool["total_capacity_gb"], pool["free_capacity_gb"],
            pool["provisioned_capacity_gb"]) == (100.0, 59.99, 150.01)
    assert "allocated_capacity_gb" not in pool
    assert [f["provisioned_type"] for f in pool["capacity_factors"]] == ["thin"]


def test_auto_ratio_is_resolved_before_reporting():
    pool = report(ratio="auto")["pools"][0]
    assert pool["max_over_subscription_ratio"] == 4.65  # 1 + 150 / 41, rounded down


def test_max_volume_size_is_what_admission_accepts():
    pool = report(reserved=10)["pools"][0]  # cap (100 - 10) * 2 - 150 = 30, free (60-10)*2
    assert pool["max_volume_size_gb"] == 30


def test_facts_that_break_rules_are_refused():
    with pytest.raises(InvalidInput, match="exceeds total"):
        build_pool_stats(facts(free_bytes=101 * GiB), max_over_subscription_ratio=1,
                         reserved_percentage=0)
    with pytest.raises(InvalidInput, match="negative"):
        build_pool_stats(facts(provisioned_bytes=-1), max_over_subscription_ratio=1,
                         reserved_percentage=0)


def test_facts_marked_unavailable_give_a_down_pool_with_that_reason():
    stats = report(facts(thin_provisioning_support=False, thick_provisioning_support=True,
                         unavailable_reason="usage of thin pool vg/p is unknown"),
                   reserved=5)
    assert validate_stats(stats) == []
    pool = stats["pools"][0]
    assert pool["backend_state"] == "down"
    assert pool["down_reason"] == "usage of thin pool vg/p is unknown"
    assert (pool["total_capacity_gb"], pool["free_capacity_gb"]) == (0.0, 0.0)
    assert (pool["thin_provisioning_support"], pool["thick_provisioning_support"],
            pool["reserved_percentage"]) == (False, True, 5)


def test_down_pool_is_valid_and_has_no_capacity():
    pool = down_pool_stats("p", "lvs failed").to_dict()
    assert pool["free_capacity_gb"] == 0 and pool["backend_state"] == "down"
    assert pool["down_reason"] == "lvs failed"


BROKEN = {
    "no-infinite-unknown": lambda p: p.update(free_capacity_gb="infinite"),
    "no-allocated-capacity": lambda p: p.update(allocated_capacity_gb=10),
    "gib-2-decimals": lambda p: p.update(total_capacity_gb=100.123),
    "free-le-total": lambda p: p.update(free_capacity_gb=100.01),
    "non-negative": lambda p: p.update(provisioned_capacity_gb=-1.0),
    "ratio-ge-1": lambda p: p.update(max_over_subscription_ratio=0.5),
    "reserved-range": lambda p: p.update(reserved_percentage=101),
    "provisioned-present": lambda p: p.pop("provisioned_capacity_gb"),
    "provisioning-support-declared": lambda p: p.pop("thin_provisioning_support"),
    "field-type": lambda p: p.update(total_volumes="3"),
    "capacity-factors-consistent": lambda p: p["capacity_factors"][0].update(
        virtual_free_capacity=1e6),
}


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_each_rule_fires(rule):
    stats = copy.deepcopy(report())
    BROKEN[rule](stats["pools"][0])
    ids = {v.id for v in validate_stats(stats)}
    assert rule in ids


def test_all_violations_are_returned_not_just_the_first():
    stats = copy.deepcopy(report())
    for rule in ("no-allocated-capacity", "gib-2-decimals", "reserved-range"):
        BROKEN[rule](stats["pools"][0])
    violations = validate_stats(stats)
    assert {"no-allocated-capacity", "gib-2-decimals", "reserved-range"} <= \
        {v.id for v in violations}
    assert all(v.clause.startswith("specs/") for v in violations)


def test_top_level_shape():
    assert {v.id for v in validate_stats({"pools": []})} == {"required-field"}
    assert validate_stats([])[0].id == "field-type"
