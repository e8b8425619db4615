"""LVM's config-tree parser on hostile text: linear time on malformed input, and only
ConfigTextError (never another exception) for anything it does not understand."""

from __future__ import annotations

import time

import pytest

from lvm_driver.read import config_text
from lvm_driver.read.config_text import ConfigTextError, parse_config

#: malformed runs that made the statement reader search ahead from every position
HOSTILE = {
    "name-without-value": lambda n: "\\" + "a" * n,
    "word-after-a-comment": lambda n: "a = 1 # \\\n" + "b" * n,
    "string-never-closed": lambda n: 'a = "\\' + "x" * n,
}


def _seconds(text: str) -> float:
    """The best of three parses of ``text`` (each must refuse it)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        with pytest.raises(ConfigTextError):
            parse_config(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("make", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_malformed_run_is_refused_in_linear_time(make):
    small, large = _seconds(make(30_000)), _seconds(make(60_000))
    assert large < 0.5, f"60k characters took {large:.2f} s"
    # linear: twice the text, about twice the time (quadratic is four times); the
    # floor keeps timer noise on sub-millisecond runs from deciding
    assert large < 3 * max(small, 0.01), f"30k: {small:.4f} s, 60k: {large:.4f} s"


@pytest.mark.parametrize("text", [
    "a = " + "9" * 5000,                            # one statement a line
    "a = " + "9" * 5000 + " # \\",                  # the statement reader
    "a = [1, " + "9" * 5000 + "]",                  # in a list
    "vg {\nseqno = 1" + "0" * 5000 + "\n}\n",
], ids=["line", "statement", "list", "section"])
def test_an_integer_beyond_pythons_digit_limit_is_a_config_text_error(text):
    with pytest.raises(ConfigTextError, match=r"characters\) is beyond the 64 bits"):
        parse_config(text)
    with pytest.raises(ConfigTextError):
        config_text._parse_statements(text)
