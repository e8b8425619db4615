"""The benchmark's machinery, small and untimed, so it cannot rot between runs.

No time is asserted anywhere (benchmarks never gate CI). What is asserted is
what must hold at any speed: generated metadata and reports say what they
should, and a burst of creates with enforcement never over-commits.
"""

from __future__ import annotations

import re

from driver_kit import GiB
from lvm_driver.lvm import REPORT_FIELDS, parse_lvs_report
from tests.benchmarks import creates, run, vgmeta


def test_generated_metadata_describes_the_pool_and_every_thin_lv():
    layout = vgmeta.plan_vg(vg_name="benchvg", device="/dev/loop9",
                            dev_size_bytes=64 * GiB, lv_count=100)
    text = vgmeta.metadata_text(layout)

    assert text.count('type = "thin"') == 100
    assert text.count('type = "thin-pool"') == 1
    assert text.count('flags = ["ACTIVATION_SKIP"]') == 5  # every 20th is a snapshot
    # unique ids: 100 thin LVs, the pool, its data and metadata LVs, the spare, VG, PV
    assert len(set(re.findall(r'id = "([^"]+)"', text))) == 100 + 6
    assert f"pe_start = {layout.pe_start_sectors}" in text
    assert layout.metadata_area_bytes == 64 * 1024 ** 2
    # data, metadata and spare fit on the PV
    assert layout.pool_extents + 2 * layout.tmeta_extents <= layout.pe_count


def test_synthetic_report_parses_into_every_lv():
    text = vgmeta.lvs_report_json(500, fields=tuple(REPORT_FIELDS))
    report = parse_lvs_report(text, "benchvg")

    assert len(report.lvs) == 501
    pool = report.get_lv("pool")
    assert pool.is_thin_pool and pool.data_percent == 37.21
    assert len(report.thin_volumes("pool")) == 500
    assert sum(lv.is_thin_snapshot for lv in report.lvs) == 25


def test_bursts_with_enforcement_never_over_commit(tmp_path):
    results = creates.run_all(1, str(tmp_path))

    sequential = results["sequential"][0]
    # one lvcreate each, and one lvs for each admission read after a create (the first
    # reuses the report read before the burst: nothing changed since)
    assert sequential.commands == 2 * sequential.created - 1
    for key in ("threads", "processes"):
        burst = results[key][0]
        assert burst.errors == 0
        assert burst.created == creates.ROOM
        assert burst.refused == creates.BURST - creates.ROOM
        assert burst.over_commits == 0 and burst.overshoot_gb == 0
    unchecked = results["no-check"][0]
    assert unchecked.over_commits == creates.BURST - creates.ROOM


def test_report_renders_without_the_real_volume_group():
    result = {"command": "test", "runs": 1, "machine": run.machine(),
              "load_start": "0", "load_end": "0", "started": "now", "took_s": 0.0,
              "parse": run.parse_benchmark(200, 1),
              "scheduler": run.scheduler_benchmark(50, 1)}
    text = run.render(result)

    assert "parse a 200-LV" in text and "capacity filter over 50 pools" in text
    assert "| parse of 200 LVs < 0.5 s |" in text
