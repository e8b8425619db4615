"""A refresh sees every change made behind the driver's back, and costs no LVM process
when nothing changed: on the simulator everywhere, on real LVM and device-mapper in the
VM lane (``-m realvm``). Each operator change is a separate LVM process (``lab.lvm``)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from driver_kit import GiB
from lvm_driver.policy.tags import VOLUME_TAG

MiB = 1024 ** 2

CHANGES: dict[str, tuple[Callable[[Any], tuple[str, ...]], Callable[[Any, Any], bool]]] = {
    "lvcreate": (lambda vg: ("lvcreate", "-T", "-V", "1g", "-n", "theirs", f"{vg}/pool"),
                 lambda driver, report: report.find_lv("theirs") is not None),
    "lvextend": (lambda vg: ("lvextend", "-L", "2g", f"{vg}/volume-a"),
                 lambda driver, report: report.get_lv("volume-a").size_bytes == 2 * GiB),
    "lvremove": (lambda vg: ("lvremove", "-f", f"{vg}/volume-a"),
                 lambda driver, report: report.find_lv("volume-a") is None),
    "lvrename": (lambda vg: ("lvrename", vg, "volume-a", "renamed"),
                 lambda driver, report: report.find_lv("renamed") is not None
                 and report.find_lv("volume-a") is None),
    "addtag": (lambda vg: ("lvchange", "--addtag", "theirs", f"{vg}/volume-a"),
               lambda driver, report: "theirs" in report.get_lv("volume-a").tags),
    "deltag": (lambda vg: ("lvchange", "--deltag", VOLUME_TAG, f"{vg}/volume-a"),
               lambda driver, report: VOLUME_TAG not in report.get_lv("volume-a").tags),
    "deactivate": (lambda vg: ("lvchange", "-an", f"{vg}/volume-a"),
                   lambda driver, report: report.find_lv("volume-a") is not None
                   and not driver.vg.lv_report("volume-a").is_active),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_an_operators_change_is_seen_by_the_next_refresh(lab, change):
    argv, seen = CHANGES[change]
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    before = driver.vg.report()
    assert not seen(driver, before)
    driver.get_volume_stats(refresh=True)
    lab.lvm(*argv(lab.vg_name))
    stats = driver.get_volume_stats(refresh=True)
    assert seen(driver, driver.vg.report())
    pool = stats["pools"][0]
    # deactivating the pool's last active volume may take the pool down with it: then
    # the pool is down for that, and says so
    assert pool["backend_state"] == "up" or "inactive" in pool["down_reason"]
    if change == "deactivate":  # the driver's own path activates it again
        assert driver.backend_device_path("volume-a").endswith("/volume-a")
        assert driver.vg.lv_report("volume-a").is_active


def test_data_written_shows_in_the_pools_usage_on_the_next_refresh(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    before = driver.get_volume_stats(refresh=True)["pools"][0]
    lab.write("volume-a", 256 * MiB)
    hits = driver.vg.report_cache_stats.hits
    start = driver.executor.commands_run
    after = driver.get_volume_stats(refresh=True)["pools"][0]
    assert driver.executor.commands_run == start  # metadata unchanged: no LVM process
    assert driver.vg.report_cache_stats.hits == hits + 1
    assert after["free_capacity_gb"] < before["free_capacity_gb"]
    used = driver.vg.report().get_lv("pool").data_percent
    assert used is not None and used >= 12.0  # 256 MiB of a 2 GiB pool


def test_a_refresh_with_nothing_changed_starts_no_lvm_process(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    first = driver.get_volume_stats(refresh=True)
    hits = driver.vg.report_cache_stats.hits
    start = driver.executor.commands_run
    for _ in range(5):
        again = driver.get_volume_stats(refresh=True)
    assert driver.executor.commands_run == start
    assert driver.vg.report_cache_stats.hits == hits + 5
    assert again["pools"][0]["free_capacity_gb"] == first["pools"][0]["free_capacity_gb"]
    start = driver.executor.commands_run
    driver.create_volume("volume-b", 1)  # its admission read reused the report too
    # the lvcreate; its marker read from the metadata text (real LVM's default), else
    # from one lvs of that LV
    assert driver.executor.commands_run == start + (1 if driver.vg.parses_metadata else 2)
