"""What the scheduler view tells a user about a backend's pools."""

from __future__ import annotations

from typing import Any

import pytest

from driver_kit.exceptions import InvalidInput, InvalidSize, InvalidStats
from driver_kit.scheduler import backend_passes, get_pools, weigh


def thin_and_thick_pool(**overrides: Any) -> dict[str, Any]:
    pool = {"pool_name": "pool1", "total_capacity_gb": 100, "free_capacity_gb": 50,
            "provisioned_capacity_gb": 30, "reserved_percentage": 0,
            "max_over_subscription_ratio": 10.0, "thin_provisioning_support": True,
            "thick_provisioning_support": True}
    pool.update(overrides)
    return pool


def create(size: int, provisioning: str | None = None) -> dict[str, Any]:
    specs = {"provisioning:type": provisioning} if provisioning else {}
    return {"size": size, "new_size": None, "extra_specs": specs}


def test_thick_request_ignores_the_ratio_and_needs_real_free_space() -> None:
    pool = thin_and_thick_pool()
    # thin: (100 * 10) - 30 = 970 GiB of virtual room
    assert backend_passes(pool, create(60, "thin"))
    assert backend_passes(pool, create(60))  # no provisioning:type means thin
    # thick: min(free, total - provisioned) = min(50, 70): only 50 GiB
    assert not backend_passes(pool, create(60, "thick"))
    assert backend_passes(pool, create(50, "thick"))


def test_thick_request_counts_everything_provisioned_against_total() -> None:
    # 50 GiB free, but thin volumes already promise 300 of the 100 GiB
    pool = thin_and_thick_pool(provisioned_capacity_gb=300)
    assert not backend_passes(pool, create(1, "thick"))
    assert backend_passes(pool, create(1, "thin"))


def test_thin_request_is_bounded_by_total_times_ratio_minus_provisioned() -> None:
    pool = thin_and_thick_pool(free_capacity_gb=1)  # free space is not consulted for thin
    assert backend_passes(pool, create(970))
    assert not backend_passes(pool, create(971))


def test_extend_asks_only_for_the_difference() -> None:
    pool = thin_and_thick_pool(free_capacity_gb=30)
    extend = {"size": 100, "new_size": 120, "extra_specs": {"provisioning:type": "thick"}}
    assert backend_passes(pool, extend)  # needs 20
    assert not backend_passes(pool, {**extend, "new_size": 131})  # needs 31
    assert not backend_passes(pool, create(120, "thick"))


def test_manage_request_of_size_zero_always_passes() -> None:
    assert backend_passes(thin_and_thick_pool(total_capacity_gb=0), create(0))


def test_infinite_or_unknown_free_capacity_passes_any_size() -> None:
    for free in ("infinite", "unknown"):
        pool = {"pool_name": "p", "total_capacity_gb": free, "free_capacity_gb": free}
        assert backend_passes(pool, create(10 ** 6))


def test_unknown_total_with_a_reserve_cannot_be_judged_and_fails() -> None:
    pool = {"pool_name": "p", "total_capacity_gb": "unknown", "free_capacity_gb": 100}
    assert backend_passes(pool, create(10))
    assert not backend_passes({**pool, "reserved_percentage": 10}, create(10))


def test_non_compliant_reports_are_read_with_cinder_defaults() -> None:
    # ratio as a string, provisioned missing (allocated stands in for it)
    pool = {"pool_name": "p", "total_capacity_gb": 100, "free_capacity_gb": 100,
            "allocated_capacity_gb": 150, "max_over_subscription_ratio": "2.0",
            "thin_provisioning_support": True}
    assert backend_passes(pool, create(50))
    assert not backend_passes(pool, create(51))
    # no ratio in the pool: the global option applies
    del pool["max_over_subscription_ratio"]
    assert backend_passes(pool, create(51), global_max_over_subscription_ratio="3.0")


def test_auto_ratio_is_resolved_from_usage() -> None:
    # 'auto' = 1 + provisioned / (used + 1) = 1 + 99 / 100 = 1.99 -> room 199 - 99 = 100
    pool = {"pool_name": "p", "total_capacity_gb": 100, "free_capacity_gb": 1,
            "provisioned_capacity_gb": 99, "max_over_subscription_ratio": "auto",
            "thin_provisioning_support": True}
    assert backend_passes(pool, create(100))
    assert not backend_passes(pool, create(101))


def test_weigh_ranks_by_virtual_free_capacity_best_first() -> None:
    pools = [thin_and_thick_pool(pool_name="small", total_capacity_gb=50),
             thin_and_thick_pool(pool_name="big"),
             thin_and_thick_pool(pool_name="mid", total_capacity_gb=80)]
    ranking = weigh(pools, create(1))
    assert [name for name, _ in ranking] == ["big", "mid", "small"]
    assert ranking[0][1] == 1.0 and ranking[-1][1] == 0.0
    stacked = weigh(pools, create(1), multiplier=-1.0)
    assert [name for name, _ in stacked] == ["small", "mid", "big"]


def test_weigh_keeps_input_order_on_ties_and_puts_infinite_pools_last() -> None:
    pools = [thin_and_thick_pool(pool_name="a"), thin_and_thick_pool(pool_name="b"),
             {"pool_name": "endless", "total_capacity_gb": "infinite",
              "free_capacity_gb": "infinite"}]
    assert [name for name, _ in weigh(pools, create(1))] == ["a", "b", "endless"]
    # stacking also avoids them: they get a weight far beyond every real pool
    assert [name for name, _ in weigh(pools, create(1), -1.0)] == ["a", "b", "endless"]


def test_get_pools_gives_one_factors_entry_per_supported_type_thick_first() -> None:
    stats = {"volume_backend_name": "lvm", "vendor_name": "Open Source",
             "driver_version": "1.0", "storage_protocol": "iSCSI",
             "pools": [thin_and_thick_pool(),
                       thin_and_thick_pool(pool_name="thin_only",
                                           thick_provisioning_support=False)]}
    both, thin_only = get_pools(stats)
    assert both["name"] == "lvm#pool1" and thin_only["name"] == "lvm#thin_only"
    assert both["capabilities"]["vendor_name"] == "Open Source"
    assert [f["provisioned_type"] for f in both["capacity_factors"]] == ["thick", "thin"]
    assert [f["provisioned_type"] for f in thin_only["capacity_factors"]] == ["thin"]
    thin = both["capacity_factors"][1]
    assert (thin["max_over_subscription_ratio"], thin["total_available_capacity"],
            thin["virtual_free_capacity"]) == (10.0, 1000.0, 970.0)


def test_get_pools_thick_virtual_free_never_exceeds_reported_free() -> None:
    # Seed spec 002's example pool: the spec prints 873, Cinder computes 100.
    stats = {"volume_backend_name": "b", "pools": [
        {"pool_name": "pool1", "total_capacity_gb": 1024, "free_capacity_gb": 100,
         "provisioned_capacity_gb": 100, "reserved_percentage": 5,
         "thin_provisioning_support": False, "thick_provisioning_support": True}]}
    (thick,) = get_pools(stats)[0]["capacity_factors"]
    assert thick["reserved_capacity"] == 51
    assert thick["calculated_free_capacity"] == 873
    assert thick["virtual_free_capacity"] == 100


def test_get_pools_legacy_report_without_pools_is_one_pool() -> None:
    stats = {"volume_backend_name": "old", "total_capacity_gb": 10, "free_capacity_gb": 4}
    (pool,) = get_pools(stats)
    assert pool["name"] == "old#old"
    assert [f["virtual_free_capacity"] for f in pool["capacity_factors"]] == [4]


def test_get_pools_reports_no_factors_for_infinite_capacity() -> None:
    stats = {"pools": [{"pool_name": "p", "total_capacity_gb": "infinite",
                        "free_capacity_gb": "infinite", "thin_provisioning_support": True}]}
    (pool,) = get_pools(stats)
    assert pool["name"] == "p" and pool["capacity_factors"] == []


@pytest.mark.parametrize("request_", [
    create(-1), {"size": 1.5, "new_size": None, "extra_specs": {}},
    {"size": 10, "new_size": 5, "extra_specs": {}}, {"new_size": 5}, create(True)])
def test_bad_requests_are_refused(request_: dict[str, Any]) -> None:
    with pytest.raises(InvalidSize):
        backend_passes(thin_and_thick_pool(), request_)


@pytest.mark.parametrize("pool", [["not", "a", "dict"], {"total_capacity_gb": 10},
                                  {"pool_name": None}])
def test_bad_pools_are_refused(pool: Any) -> None:
    with pytest.raises(InvalidStats):
        backend_passes(pool, create(1))
    with pytest.raises(InvalidStats):
        weigh([pool], create(1))


def test_pools_cinder_itself_fails_on_are_refused_with_the_reason() -> None:
    # reserved 100% leaves no capacity and Cinder's filter divides by it
    with pytest.raises(InvalidStats, match="ZeroDivisionError"):
        backend_passes(thin_and_thick_pool(reserved_percentage=100), create(1))
    # Cinder's weigher cannot rank pools that all report 'infinite' when stacking
    endless = {"pool_name": "e", "total_capacity_gb": "infinite",
               "free_capacity_gb": "infinite"}
    with pytest.raises(InvalidInput, match="infinite"):
        weigh([endless], create(1), multiplier=-1.0)


def test_bad_global_ratio_is_refused() -> None:
    with pytest.raises(InvalidInput):
        backend_passes(thin_and_thick_pool(), create(1),
                       global_max_over_subscription_ratio="lots")
