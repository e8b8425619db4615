"""The creates benchmark (``tests/benchmarks/realdm_creates.py``) at a small size on real
LVM, as a regression guard of its machinery and of what it measures: a restored VG
whose pool takes new thin LVs, creates by all three paths, the driver's admission
reads after its own creates parsing only what changed. No time is asserted."""

from __future__ import annotations

import os

import pytest

from tests.benchmarks import realdm_creates

pytestmark = pytest.mark.realvm


def test_creates_and_refreshes_at_a_small_size():
    if os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("runs inside the VM lane: tests/realvm/run_in_vm.sh -- .venv/bin/python "
                    "-m pytest tests/functional/test_creates_benchmark_realvm.py -m realvm")
    result = realdm_creates.measure_size(100, 1)  # one round: a minute of the VM lane
    series = result["series"]
    assert {len(values) for values in series.values()} == {1}
    # the driver's own work is what is left of its create beside its lvcreate
    assert all(0 < process < wall for process, wall in zip(series["driver_lvcreate"],
                                                            series["driver"]))
    assert result["cache"].incremental >= 1
    assert "Not measured" not in realdm_creates.render({
        "command": "-", "machine": realdm_creates.machine(), "runs": 1, "sizes": [result],
        "took_s": 0, "load": "-", "failed": []})
