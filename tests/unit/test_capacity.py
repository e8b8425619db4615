import math

import pytest
from hypothesis import example, given, strategies as st

from driver_kit import capacity
from driver_kit.exceptions import InvalidInput, InvalidSize
from driver_kit.scheduler import backend_passes

capacities = st.floats(min_value=0, max_value=1e6, allow_nan=False).map(lambda x: round(x, 2))
ratios = st.floats(min_value=1.0, max_value=100.0).map(lambda x: round(x, 2))
reserved = st.integers(min_value=0, max_value=100)
sizes = st.integers(min_value=1, max_value=10 ** 6)


def test_factors_have_exactly_the_seed_002_keys():
    factors = capacity.calculate_capacity_factors(1024, 100, 100, True, 2.0, 5, True)
    assert set(factors) == {
        "total_capacity", "free_capacity", "reserved_capacity",
        "total_reserved_available_capacity", "max_over_subscription_ratio",
        "total_available_capacity", "provisioned_capacity", "calculated_free_capacity",
        "virtual_free_capacity", "free_percent", "provisioned_ratio", "provisioned_type"}
    # the seed-002 example: reserved is floored to 51, thin available = 973 * 2
    assert factors["reserved_capacity"] == 51
    assert factors["total_available_capacity"] == 1946
    assert factors["virtual_free_capacity"] == 1846


def test_thick_virtual_free_is_bounded_by_free():
    factors = capacity.calculate_capacity_factors(5120, 400, 500, True, 2.0, 20, False)
    assert factors["provisioned_type"] == "thick"
    assert factors["max_over_subscription_ratio"] is None
    assert factors["calculated_free_capacity"] == 5120 - 1024 - 500
    assert factors["virtual_free_capacity"] == 400


@pytest.mark.parametrize("capability, global_ratio, expected", [
    ({"thin_provisioning_support": True, "total_capacity_gb": 100, "free_capacity_gb": 100,
      "provisioned_capacity_gb": 0}, "auto", 20),
    ({"thin_provisioning_support": True, "total_capacity_gb": 100, "free_capacity_gb": 60,
      "provisioned_capacity_gb": 205}, "auto", 1 + 205 / 41),
    ({"thin_provisioning_support": False}, "auto", 1.0),
    ({"thin_provisioning_support": True, "max_over_subscription_ratio": "3.5"}, "20.0", 3.5),
    ({"thin_provisioning_support": True}, "7", 7.0),
])
def test_ratio_resolution(capability, global_ratio, expected):
    assert capacity.calculate_max_over_subscription_ratio(capability, global_ratio) == expected


@pytest.mark.parametrize("args, virtual_free", [
    ((10, 0, 0, True, 0.5, 0, True), 5.0),        # a ratio below 1: Cinder computes on
    ((100, 0, 0, True, 2.0, 101, True), -2.0),    # reserved past 100%
    ((-1, 0, 0, True, 2.0, 0, True), -2.0),       # a negative total
    (("10", 0, 0, True, 2.0, 0, True), 20.0),     # a string Cinder's float() reads
    ((10, 0, 0, "yes", 2.0, 0, 1), 20.0),         # truthy non-bools
])
def test_cinder_named_functions_judge_nothing(args, virtual_free):
    """They answer what Cinder answers; validate_stats and admit() are the strict ones."""
    assert capacity.calculate_capacity_factors(*args)["virtual_free_capacity"] == virtual_free
    assert capacity.calculate_virtual_free_capacity(*args) == virtual_free


@pytest.mark.parametrize("args", [
    ("unknown", 0, 0, True, 2.0, 0, True),        # Cinder: ValueError
    (10, "5", 0, True, 2.0, 0, False),            # Cinder: TypeError
    (10, 0, 0, True, "2.0", 0, True),             # Cinder: TypeError
])
def test_where_cinder_fails_the_kit_says_so_in_one_line(args):
    with pytest.raises(InvalidInput, match="Cinder's scheduler fails") as err:
        capacity.calculate_capacity_factors(*args)
    assert "\n" not in str(err.value)


def test_ratio_resolution_takes_what_cinder_takes():
    thin = {"thin_provisioning_support": True}
    assert capacity.calculate_max_over_subscription_ratio(thin, 0.5) == 0.5
    assert capacity.calculate_max_over_subscription_ratio(
        dict(thin, max_over_subscription_ratio=0), "3") == 3.0
    assert capacity.calculate_max_over_subscription_ratio({}, "0.5") == 1.0
    with pytest.raises(InvalidInput, match="Cinder's scheduler fails"):
        capacity.calculate_max_over_subscription_ratio([], 2.0)


def _admit(**kw):
    base = dict(total_capacity=100, free_capacity=100, provisioned_capacity=0, requested=1,
                max_over_subscription_ratio=2.0, reserved_percentage=0, thin=True)
    base.update(kw)
    return capacity.admit(**base)


def test_admit_standard_and_cinder_differ_on_a_full_pool():
    # 190 provisioned of a 200 cap, but only 4 GiB physically free
    kw = dict(provisioned_capacity=190, free_capacity=4, requested=9)
    assert _admit(calculation="standard", **kw).admitted
    refused = _admit(calculation="cinder", **kw)
    assert not refused.admitted
    assert [c.name for c in refused.failed_checks] == ["free_cap"]
    assert refused.failed_checks[0].shortfall_gb == 1


def test_admit_counts_in_flight_and_reserved():
    decision = _admit(provisioned_capacity=150, in_flight=30, requested=11,
                      reserved_percentage=5)  # cap (100 - 5) * 2 = 190
    assert not decision.admitted
    assert decision.reserved_capacity_gb == 5
    assert "190" in decision.explain() and "in flight 30" in decision.explain()
    assert _admit(provisioned_capacity=150, in_flight=30, requested=10,
                  reserved_percentage=5).admitted


@pytest.mark.parametrize("total, pct, expected", [
    (100, 29, 28),  # 100.0 * 0.29 == 28.999999999999996: Cinder reserves 28, not 29
    (100, 10, 10), (1024, 5, 51), (100, 0, 0), (100, 100, 100), (0, 50, 0),
])
def test_reserved_gb_is_cinders_float_floor(total, pct, expected):
    assert capacity.reserved_gb(total, pct) == expected
    assert isinstance(capacity.reserved_gb(total, pct), int)


def test_admit_reserves_as_cinder_does_at_a_float_boundary():
    """100 GiB at 29%: Cinder reserves 28, so a thick 72 fits and 73 does not."""
    pool = dict(total_capacity=100, free_capacity=100, provisioned_capacity=0,
                max_over_subscription_ratio=1.0, reserved_percentage=29, thin=False)
    assert capacity.admit(requested=1, **pool).reserved_capacity_gb == 28
    assert capacity.calculate_capacity_factors(100, 100, 0, False, 1.0, 29, False)[
        "reserved_capacity"] == 28
    assert capacity.max_admissible(**pool) == 72
    cinder_pool = {"pool_name": "p", "total_capacity_gb": 100, "free_capacity_gb": 100,
                   "provisioned_capacity_gb": 0, "reserved_percentage": 29,
                   "thin_provisioning_support": False, "thick_provisioning_support": True}
    for size, fits in ((72, True), (73, False)):
        assert capacity.admit(requested=size, **pool).admitted is fits, size
        assert backend_passes(cinder_pool, {"size": size, "extra_specs": {
            "provisioning:type": "thick"}}) is fits, size
    # thin: the cap is (100 - 28) * 2 = 144
    thin = dict(pool, thin=True, max_over_subscription_ratio=2.0)
    assert capacity.admit(requested=144, **thin).admitted
    assert not capacity.admit(requested=145, **thin).admitted


def test_admit_thick_uses_free_as_cinder_does_and_free_minus_reserved_when_strict():
    pool = dict(thin=False, free_capacity=15, reserved_percentage=10)
    assert _admit(requested=15, **pool).admitted            # Cinder's filter: free
    assert [c.name for c in _admit(requested=16, **pool).failed_checks] == ["free_space"]
    assert _admit(requested=5, calculation="cinder", **pool).admitted   # the specs
    assert not _admit(requested=6, calculation="cinder", **pool).admitted


def test_the_default_calculation_is_cinders_filter():
    assert capacity.DEFAULT_CALCULATION == "standard"
    full = dict(provisioned_capacity=190, free_capacity=4, requested=9)
    assert _admit(**full).admitted and _admit(**full).calculation == "standard"


@pytest.mark.parametrize("kw, error", [
    ({"requested": 0}, InvalidSize), ({"requested": -1}, InvalidSize),
    ({"requested": math.nan}, InvalidSize), ({"calculation": "magic"}, InvalidInput),
    ({"max_over_subscription_ratio": 0.9}, InvalidInput),
    ({"reserved_percentage": 150}, InvalidInput), ({"in_flight": -2}, InvalidInput),
])
def test_admit_refuses_bad_input(kw, error):
    with pytest.raises(error):
        _admit(**kw)


@given(total=capacities, free_fraction=st.floats(0, 1), provisioned=capacities, ratio=ratios,
       reserved_pct=reserved, size=sizes, in_flight=capacities,
       calculation=st.sampled_from(capacity.CALCULATIONS), thin=st.booleans())
# Cinder reserves 28 GiB of 100 at 29%, so this thick 72 GiB is admitted at the cap
@example(total=100, free_fraction=1.0, provisioned=0, ratio=1.0, reserved_pct=29, size=72,
         in_flight=0, calculation="cinder", thin=False)
def test_admission_never_admits_past_the_cap(total, free_fraction, provisioned, ratio,
                                             reserved_pct, size, in_flight, calculation, thin):
    free = round(total * free_fraction, 2)
    decision = capacity.admit(total_capacity=total, free_capacity=free,
                              provisioned_capacity=provisioned, requested=size,
                              max_over_subscription_ratio=ratio,
                              reserved_percentage=reserved_pct, thin=thin,
                              in_flight=in_flight, calculation=calculation)
    reserved_gb = capacity.reserved_gb(total, reserved_pct)  # Cinder's float floor
    if decision.admitted:
        if thin:  # the cap as Cinder rounds it: to 2 decimals
            assert provisioned + in_flight + size <= (total - reserved_gb) * ratio + 0.005 + 1e-6
            if calculation == "cinder":
                assert size <= (free - reserved_gb) * ratio + 1e-6
        else:
            kept = reserved_gb if calculation == "cinder" else 0
            assert size <= free - kept - in_flight + 1e-6
            assert provisioned + in_flight + size <= total - reserved_gb + 1e-6


@given(total=capacities, free_fraction=st.floats(0, 1), provisioned=capacities, ratio=ratios,
       reserved_pct=reserved, in_flight=capacities,
       calculation=st.sampled_from(capacity.CALCULATIONS), thin=st.booleans())
def test_max_admissible_is_exactly_where_admission_stops(total, free_fraction, provisioned,
                                                         ratio, reserved_pct, in_flight,
                                                         calculation, thin):
    free = round(total * free_fraction, 2)
    pool = dict(total_capacity=total, free_capacity=free, provisioned_capacity=provisioned,
                max_over_subscription_ratio=ratio, reserved_percentage=reserved_pct,
                thin=thin, in_flight=in_flight, calculation=calculation)
    largest = capacity.max_admissible(**pool)
    assert largest >= 0
    if largest:
        assert capacity.admit(requested=largest, **pool).admitted
    assert not capacity.admit(requested=largest + 1, **pool).admitted


def test_max_admissible_validates_like_admit():
    with pytest.raises(InvalidInput):
        capacity.max_admissible(total_capacity=10, free_capacity=10, provisioned_capacity=0,
                                max_over_subscription_ratio=0.5, reserved_percentage=0,
                                thin=True)


@given(total=capacities, free_fraction=st.floats(0, 1), provisioned=capacities,
       r1=ratios, r2=ratios, reserved_pct=reserved)
def test_virtual_free_is_monotone_in_the_ratio(total, free_fraction, provisioned, r1, r2,
                                                reserved_pct):
    low, high = sorted((r1, r2))
    free = round(total * free_fraction, 2)
    vf_low = capacity.calculate_virtual_free_capacity(total, free, provisioned, True, low,
                                                      reserved_pct, True)
    vf_high = capacity.calculate_virtual_free_capacity(total, free, provisioned, True, high,
                                                       reserved_pct, True)
    assert vf_low <= vf_high


@given(total=capacities, free_fraction=st.floats(0, 1), provisioned=capacities, ratio=ratios,
       reserved_pct=reserved, size=st.integers(min_value=1, max_value=10 ** 6),
       thin=st.booleans(), thin_support=st.booleans())
# a cap of 99.9 * 1.01 = 100.899: Cinder rounds the room 9.999 to 10.0 and passes 10 GiB
@example(total=99.9, free_fraction=1.0, provisioned=90.9, ratio=1.01, reserved_pct=0,
         size=10, thin=True, thin_support=True)
def test_standard_admission_is_cinders_capacity_filter(total, free_fraction, provisioned,
                                                       ratio, reserved_pct, size, thin,
                                                       thin_support):
    """At the default calculation, the driver admits exactly what Cinder's filter passes."""
    free = round(total * free_fraction, 2)
    pool = {"pool_name": "p", "total_capacity_gb": total, "free_capacity_gb": free,
            "provisioned_capacity_gb": provisioned, "reserved_percentage": reserved_pct,
            "max_over_subscription_ratio": ratio if thin_support else 1.0,
            "thin_provisioning_support": thin_support,
            "thick_provisioning_support": not thin_support}
    request = {"size": size, "extra_specs": {"provisioning:type": "thin" if thin else "thick"}}
    try:
        passes = backend_passes(pool, request)
    except InvalidInput:  # Cinder itself fails (a thin pool with nothing left after reserve)
        return
    as_thin = thin and thin_support  # Cinder's filter, as the driver picks the type
    decision = capacity.admit(total_capacity=total, free_capacity=free,
                              provisioned_capacity=provisioned, requested=size,
                              max_over_subscription_ratio=ratio if as_thin else 1.0,
                              reserved_percentage=reserved_pct, thin=as_thin)
    assert decision.admitted is passes, decision.explain()
