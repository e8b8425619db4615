import math

import pytest
from hypothesis import given, strategies as st

from driver_kit import InvalidSize, units


def test_gib_is_binary():
    assert units.GiB == 1024 ** 3


@pytest.mark.parametrize("nbytes, down, up", [
    (0, 0.0, 0.0),
    (units.GiB, 1.0, 1.0),
    (units.GiB + 1, 1.0, 1.01),
    (units.GiB - 1, 0.99, 1.0),
    (int(1.5 * units.GiB), 1.5, 1.5),
    (300 * units.MiB, 0.29, 0.3),
])
def test_conservative_rounding(nbytes, down, up):
    assert units.bytes_to_gb_down(nbytes) == down
    assert units.bytes_to_gb_up(nbytes) == up


@given(st.integers(min_value=0, max_value=2 ** 60))
def test_rounding_brackets_the_exact_value(nbytes):
    exact = nbytes / units.GiB
    down, up = units.bytes_to_gb_down(nbytes), units.bytes_to_gb_up(nbytes)
    assert down <= exact + 1e-9 and up >= exact - 1e-9
    assert round(up - down, 2) in (0.0, 0.01)
    for value in (down, up):
        assert value == round(value, 2)


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_round_helpers_are_conservative(value):
    assert units.round_down_2(value) <= value <= units.round_up_2(value)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", None, True])
def test_bytes_must_be_nonnegative_ints(bad):
    with pytest.raises((TypeError, ValueError)):
        units.bytes_to_gb_down(bad)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "x"])
def test_round_refuses_non_finite(bad):
    with pytest.raises((TypeError, ValueError)):
        units.round_up_2(bad)


@pytest.mark.parametrize("text, size", [("1", 1), ("10", 10), ("010", 10),
                                        (str(units.MAX_VOLUME_GB), units.MAX_VOLUME_GB)])
def test_size_text_of_ascii_digits(text, size):
    assert units.parse_size_gb(text, from_text=True) == size


@pytest.mark.parametrize("text", ["10_0", " 3 ", "3\n", "\uff13", "\u0663", "+3", "-3",
                                  "0x10", "1e3", "1.0", "", "0", "00",
                                  str(units.MAX_VOLUME_GB + 1), "9" * 5000])
def test_size_text_refusals_are_one_line(text):
    with pytest.raises(InvalidSize) as refused:
        units.parse_size_gb(text, from_text=True)
    message = str(refused.value)
    assert message.startswith("size must be ") and "\n" not in message
    assert len(message) < 200


@pytest.mark.parametrize("value, size", [(3, 3), (3.0, 3), (units.MAX_VOLUME_GB, 8 * 2 ** 30)])
def test_size_numbers(value, size):
    assert units.parse_size_gb(value) == size


@pytest.mark.parametrize("value", [True, False, "3", b"3", None, 1.5, math.nan, math.inf,
                                   -math.inf, 0, -1, 10 ** 400, -10 ** 400, 1e300])
def test_size_number_refusals_are_one_line(value):
    with pytest.raises(InvalidSize) as refused:
        units.parse_size_gb(value, "new size")
    message = str(refused.value)
    assert message.startswith("new size must be ") and "\n" not in message
    assert len(message) < 200


def test_the_largest_size_is_8_eib():
    assert units.MAX_VOLUME_BYTES == 2 ** 63 == units.MAX_VOLUME_GB * units.GiB
