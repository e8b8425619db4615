"""The benchmark's machinery, small and untimed, so it cannot rot between runs.

No time is asserted anywhere (benchmarks never gate CI). What is asserted is
what must hold at any speed: generated metadata and reports say what they
should, and a burst of creates with enforcement never over-commits.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any, Callable

import pytest

from driver_kit import GiB
from lvm_driver.commands.lvm import REPORT_FIELDS, parse_lvs_report
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
    # one lvcreate each, one lvs confirming its marker (the simulator offers no metadata
    # text to read it from), and one lvs for each admission read after a create (the
    # first reuses the report read before the burst: nothing changed since)
    assert sequential.commands == 3 * sequential.created - 1
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


def test_real_dm_report_renders_every_path_and_ratio():
    from lvm_driver.read.dm_status import ThinPoolStatus
    from tests.benchmarks import realdm

    series = {name: run.Series() for name in
              ("driver", "driver_after_change", "brick", "bare", "dm_ioctl")}
    for name, wall in (("driver", 0.1), ("driver_after_change", 0.2), ("brick", 0.8),
                       ("bare", 0.09), ("dm_ioctl", 0.00002)):
        series[name].add(wall, wall, 0 if name == "dm_ioctl" else 1)
    pool = {"total_capacity_gb": 16.0, "free_capacity_gb": 15.5,
            "provisioned_capacity_gb": 1003.0, "total_volumes": 1003}
    result = {
        "command": "test", "machine": run.machine(), "runs": 1, "lv_count": 1000,
        "budget_s": 60.0, "pool_gb": 16, "lv_gb": 1, "took_s": 1.0,
        "build": {"pool_create_s": 1.0, "batches": [{"lvs": 500, "seconds": 50.0,
                                                      "per_lv_s": 0.1}],
                  "single_lvcreate_s": [0.5], "thin_lvs": 503, "active": 503,
                  "created_in_budget": 500},
        "measure": {"series": series, "cache": (None, None), "change_s": [0.5],
                    "executor_counts": {"driver": [(1, None)],
                                        "driver_after_change": [(1, None)]},
                    "thin_lvs_end": 504, "active_end": 504, "brick_readonly_lvs": "16.00:",
                    "driver_pool": {"backend_state": "up", **pool}, "brick_pool": pool,
                    "dm_status": ThinPoolStatus(3, 10, 100, 20, 200, 65536, "rw", False)}}
    text = realdm.render(result)

    assert "| **this driver**, `get_volume_stats(refresh=True)`, steady state | 1 | 1 |" in text
    assert "8.00x faster" in text and "4.00x faster" in text and "20 µs" in text
    assert "the creation budget of 60 s stopped at 500" in text
    assert "printed `16.00:`: no data%" in text
    assert realdm._lvcreate_line(7, 1).split() == [
        "lvcreate", "-q", "-T", "-V", "1g", "-n", "volume-00007", "--addtag",
        "driver_kit_volume", "dkrealdm/pool"]


def test_the_incremental_read_after_a_one_lv_change_stays_far_below_a_full_parse():
    """A regression guard with a wide margin, not the targets: at 2,000 LVs the read after
    a one-LV change is measured at about 1/20 of the full parse or less; it must stay
    under a third of it (medians of three changes, side by side in one run)."""
    from tests.benchmarks import incremental

    result = incremental.measure(2000, 3)
    assert result["incremental_s"] * 3 < result["full_parse_s"], result


def test_the_persisted_parse_design_gives_the_cold_parses_report_without_a_parse():
    """``persisted_parse`` at 300 LVs: after loading the pickled state, the same text and
    a one-LV change are read with no full parse, the report equal (asserted inside)."""
    from tests.benchmarks import persisted_parse

    result = persisted_parse.measure(300, 1)
    assert result["pickle_bytes"] > 0 and "| 300 |" in persisted_parse.render([result], 1)


def _on_a_real_vg(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()``'s result, or a skip where no real PV can be put on a loop device."""
    from tests.benchmarks.realvg import BenchmarkSetupError

    if os.geteuid() != 0 or shutil.which("losetup") is None or shutil.which("lvm") is None:
        pytest.skip("needs root, losetup and lvm2 to put a real PV on a loop device")
    try:
        return measure()
    except BenchmarkSetupError as exc:
        pytest.skip(f"no loop device here: {exc}")


def test_the_whole_refresh_after_a_one_lv_change_runs_no_lvm_and_stays_below_a_cold_one():
    """``large_vg`` at 2,000 thin LVs (root and a loop device; 100,000 when run by hand):
    every refresh after a committed one-LV change is read from the text (no LVM process,
    every LV listed: asserted inside), incrementally, and stays under a third of the
    first, full one (a guard with a wide margin: about a tenth measured)."""
    from tests.benchmarks import large_vg

    result = _on_a_real_vg(lambda: large_vg.measure(2000, 3))
    assert result["cache"].incremental == 3, result["cache"]
    assert result["after_change"] * 3 < result["cold_s"], result


def test_the_host_creates_benchmark_runs_through_the_drivers_check_after_a_create():
    """``incremental --creates`` at 300 thin LVs (root and a loop device): each create's
    stand-in commits an LV the driver's marker check finds (a stand-in that makes no
    such LV broke this benchmark once, unnoticed), and every series is timed."""
    from tests.benchmarks import incremental

    result = _on_a_real_vg(lambda: incremental.measure_creates(300, 2))
    assert {len(values) for values in result["series"].values()} == {2}, result
    assert result["process"] > 0 and result["lock_held"] >= result["process"], result


def test_the_creates_benchmark_wires_cinder_and_times_the_admission_lock(tmp_path):
    """What the VM-lane creates benchmark builds, on the simulator and a stand-in VG:
    Cinder's LVM driver asks os-brick for the thin LV, and the admission lock's hold
    time is taken per create."""
    from types import SimpleNamespace

    from driver_kit import load_backend_config
    from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
    from lvm_driver.simulator import LVMSimulator
    from tests.benchmarks import realdm_creates

    made = []
    brick = SimpleNamespace(create_volume=lambda *args: made.append(args))
    cinder = realdm_creates.make_cinder(
        SimpleNamespace(vg_name="dkcreates", lvm_conf=str(tmp_path / "lvm.conf")), brick)
    cinder.create_volume({"name": "volume-1", "size": 1})
    assert made == [("volume-1", "1g", "thin", 0)]

    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    simulator.create_vg("simvg", 8 * GiB)
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides={
        "volume_group": "simvg", "lvm_thin_pool_name": "pool", "lvm_backend": "simulator",
        "lvm_simulator_state_file": str(tmp_path / "state.json"),
        "lock_path": str(tmp_path / "locks")}))
    driver.do_setup()
    held: list[float] = []
    with realdm_creates.lock_timer(driver, held):
        driver.create_volume("volume-2", 1)
    assert len(held) == 1 and held[0] > 0


def test_the_vm_reports_open_with_their_command_and_machine_and_are_kept(tmp_path, monkeypatch):
    from tests.benchmarks import realdm_creates, vm_report

    monkeypatch.setenv("DK_BENCH_COMMAND", "sudo bash tests/benchmarks/run_realdm.sh --creates")
    machine = dict.fromkeys(("cpu_model", "nproc", "memory_gib", "kernel", "lvm", "python",
                             "os_brick"), "?")
    text = realdm_creates.render({"command": vm_report.command("realdm_creates"),
                                  "machine": machine, "runs": 1, "sizes": [], "took_s": 1,
                                  "load": "0.5", "failed": []})
    assert text.splitlines()[:3] == [
        "## Creates and refreshes on real LVM (VM lane)", "",
        "- Command: `sudo bash tests/benchmarks/run_realdm.sh --creates`"]
    assert text.splitlines()[3].startswith("- Machine (inside the VM): ?, ? CPUs (nproc)")
    vm_report.save(text, str(tmp_path / "report.md"))
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == text + "\n"
