"""Functional scenarios, run on the simulator and on real LVM alike."""

from __future__ import annotations

import math
import multiprocessing

import pytest

from driver_kit import (CapacityExceeded, GiB, InvalidInput, NotManaged, SetupError,
                        VolumeBusy, calculate_max_over_subscription_ratio,
                        load_backend_config, validate_stats)
from driver_kit.exceptions import BackendUnavailable
from driver_kit.units import bytes_to_gb_down, bytes_to_gb_up

from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from tests.functional.conftest import POOL_GB


def pool_stats(driver, name="pool"):
    stats = driver.get_volume_stats(refresh=True)
    assert validate_stats(stats) == []
    return next(p for p in stats["pools"] if p["pool_name"] == name)


def ground_truth(lab):
    """Pool figures from a plain-text ``lvs``, parsed independently of the driver."""
    out = lab.lvm("lvs", "--noheadings", "--units", "b", "--nosuffix", "--separator", "|",
                  "-o", "lv_name,lv_size,pool_lv,origin,data_percent,metadata_percent,lv_tags",
                  lab.vg_name).stdout
    rows = [line.strip().split("|") for line in out.splitlines() if line.strip()]
    pool = next(r for r in rows if r[0] == "pool")
    total = int(pool[1])
    used = math.ceil(total * float(pool[4]) / 100)
    free = min(total - used, math.floor(total * (100 - float(pool[5])) / 100))
    thin = [r for r in rows if r[2] == "pool"]
    is_snap = [bool(r[3]) and "driver_kit_volume" not in r[6].split(",") for r in thin]
    return {"total": total, "free": free,
            "provisioned": sum(int(r[1]) for r, s in zip(thin, is_snap) if not s),
            "snapshots": sum(int(r[1]) for r, s in zip(thin, is_snap) if s)}


def test_stats_agree_with_ground_truth(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    lab.write("volume-a", 64 * 1024 * 1024)
    truth = ground_truth(lab)
    facts = next(f for f in driver.backend_read_pools() if f.pool_name == "pool")
    assert (facts.total_bytes, facts.free_bytes, facts.provisioned_bytes) == \
        (truth["total"], truth["free"], truth["provisioned"])
    pool = pool_stats(driver)
    assert pool["total_capacity_gb"] == bytes_to_gb_down(truth["total"])
    assert pool["free_capacity_gb"] == bytes_to_gb_down(truth["free"])
    assert pool["provisioned_capacity_gb"] == bytes_to_gb_up(truth["provisioned"])
    assert pool["free_capacity_gb"] < POOL_GB  # data was written
    assert pool["data_percent"] > 0 and pool["metadata_percent"] > 0


def test_lvm_processes_per_stats_refresh_and_create(lab):
    driver = lab.driver()
    executor = driver.executor

    def counts() -> tuple[int, int]:  # LVM processes started, reports through the shell
        return executor.commands_run, executor.shell_commands_run

    before = counts()
    driver.get_volume_stats(refresh=True)
    assert counts() == before  # nothing changed: reused, no LVM command at all
    before, parsed = counts(), driver.vg.report_cache_stats.parsed
    driver.create_volume("volume-a", 1)
    if driver.vg.parses_metadata:  # real LVM's default: the change read from the text
        assert counts() == (before[0] + 1, before[1])  # the lvcreate; its reads none
        assert driver.vg.report_cache_stats.parsed == parsed + 1  # its marker confirmed
    else:  # the lvcreate, and one lvs of that LV confirming its marker
        assert sum(counts()) - sum(before) == 2
    before, parsed = counts(), driver.vg.report_cache_stats.parsed
    driver.get_volume_stats(refresh=True)
    if driver.vg.parses_metadata:  # the text read after the create, reused
        assert counts() == before
        assert driver.vg.report_cache_stats.parsed == parsed
    else:  # one lvs after the change: through the lvm shell or a process of its own
        assert sum(counts()) - sum(before) == 1


def test_out_of_band_counted_snapshots_apart(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    lab.lvm("lvcreate", "-T", "-V", "1g", "-n", "operator-made", f"{lab.vg_name}/pool")
    assert pool_stats(driver)["provisioned_capacity_gb"] == 2
    driver.create_snapshot("snap-a", "volume-a")
    lab.lvm("lvcreate", "-s", "-n", "operator-snap", f"{lab.vg_name}/operator-made")
    pool = pool_stats(driver)
    assert pool["provisioned_capacity_gb"] == 2
    assert pool["snapshot_capacity_gb"] == 2
    assert pool["total_volumes"] == 2


def test_create_until_the_cap_then_refuse(lab):
    driver = lab.driver()  # cap = 2 GiB * 2.0
    for i in range(4):
        driver.create_volume(f"volume-{i}", 1)
    with pytest.raises(CapacityExceeded) as refused:
        driver.create_volume("volume-4", 1)
    assert "(total - reserved) * ratio" in str(refused.value)
    assert "volume-4" not in lab.lv_names()
    with pytest.raises(CapacityExceeded):
        driver.extend_volume("volume-0", 2)
    assert driver.backend_find_volume("volume-0").size_gb == 1
    driver.delete_volume("volume-3")
    assert driver.extend_volume("volume-0", 2).size_gb == 2


def test_reserved_and_calculation_modes(lab):
    lab.lvm("lvcreate", "-T", "-V", "1g", "-n", "big", f"{lab.vg_name}/pool")
    lab.write("big", 600 * 1024 * 1024)
    # 50% of 2 GiB reserved: cap (2 - 1) * 2 = 2 GiB; free is about 1.41 GiB
    standard = lab.driver(reserved_percentage=50, over_provisioning_calculation="standard")
    cinder = lab.driver(reserved_percentage=50, over_provisioning_calculation="cinder")
    assert 1.3 < pool_stats(standard)["free_capacity_gb"] < 1.5
    # cinder: 1 <= (free - 1) * 2 fails; standard: 1 + 1 <= 2 passes
    with pytest.raises(CapacityExceeded) as refused:
        cinder.create_volume("a", 1)
    assert [c.name for c in refused.value.decision.failed_checks] == ["free_cap"]
    assert "a" not in lab.lv_names()
    standard.create_volume("a", 1)
    with pytest.raises(CapacityExceeded) as refused:  # 2 + 1 > 2
        standard.create_volume("b", 1)
    assert [c.name for c in refused.value.decision.failed_checks] == ["provisioned_cap"]
    assert lab.driver(over_provisioning_calculation="standard").create_volume("b", 1)


def test_auto_ratio_resolves_as_cinder_does(lab):
    driver = lab.driver(max_over_subscription_ratio="auto")
    assert pool_stats(driver)["max_over_subscription_ratio"] == 20.0
    driver.create_volume("volume-a", 3)
    lab.write("volume-a", 256 * 1024 * 1024)
    pool = pool_stats(driver)
    expected = calculate_max_over_subscription_ratio(
        {"thin_provisioning_support": True, "total_capacity_gb": pool["total_capacity_gb"],
         "free_capacity_gb": pool["free_capacity_gb"],
         "provisioned_capacity_gb": pool["provisioned_capacity_gb"]}, "auto")
    assert pool["max_over_subscription_ratio"] == math.floor(expected * 100) / 100


def _racer(overrides, index, queue):
    from driver_kit import CapacityExceeded, load_backend_config
    from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides=overrides))
    admitted = []
    for j in range(2):
        try:
            driver.create_volume(f"race-{index}-{j}", 1)
            admitted.append(f"race-{index}-{j}")
        except CapacityExceeded:
            pass
    queue.put(admitted)


def race(overrides_per_process):
    """One process per overrides making two 1 GiB creates at once; the names admitted."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(overrides, i, queue))
             for i, overrides in enumerate(overrides_per_process)]
    for p in procs:
        p.start()
    admitted = [name for _ in procs for name in queue.get(timeout=600)]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return admitted


def test_processes_racing_near_the_cap(lab):
    lab.lvm("lvcreate", "-T", "-V", "1g", "-n", "base", f"{lab.vg_name}/pool")
    admitted = race([lab.overrides()] * 4)
    assert len(admitted) == 3  # cap 4 GiB, 1 taken; 8 attempts
    racers = {n for n in lab.lv_names() if n.startswith("race-")}
    assert racers == set(admitted)
    # nobody holds the lock any more: a new driver is admitted at once
    driver = lab.driver()
    driver.delete_volume(admitted[0])
    assert driver.create_volume("after", 1)


def test_delete_frees_and_is_idempotent(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 2)
    assert pool_stats(driver)["provisioned_capacity_gb"] == 2
    driver.delete_volume("volume-a")
    driver.delete_volume("volume-a")
    assert pool_stats(driver)["provisioned_capacity_gb"] == 0


def test_fail_closed_when_the_vg_is_gone(lab):
    broken = ThinLVMDriver(load_backend_config(
        extra_opts=LVM_OPTS, overrides=lab.overrides(volume_group="no-such-vg")))
    stats = broken.get_volume_stats(refresh=True)
    assert validate_stats(stats) == []
    pool = stats["pools"][0]
    assert pool["backend_state"] == "down" and pool["free_capacity_gb"] == 0
    assert "no-such-vg" in pool["down_reason"]
    with pytest.raises(BackendUnavailable):
        broken.create_volume("volume-b", 1)


def test_fail_closed_when_the_pool_is_gone(lab):
    driver = lab.driver()
    lab.lvm("lvremove", "-f", "-y", f"{lab.vg_name}/pool")
    pool = pool_stats(driver)
    assert pool["backend_state"] == "down" and "not found" in pool["down_reason"]
    with pytest.raises(BackendUnavailable):
        driver.create_volume("volume-a", 1)


def test_setup_errors_say_what_to_fix(lab):
    def check(**extra):
        driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS,
                                                   overrides=lab.overrides(**extra)))
        driver.check_for_setup_error()

    with pytest.raises(SetupError, match="volume group 'no-such-vg' not found: create it"):
        check(volume_group="no-such-vg")
    with pytest.raises(SetupError, match="lvm_create_thin_pool = true"):
        check(lvm_thin_pool_name="other-pool")


def test_deletes_refuse_what_the_driver_did_not_make(lab):
    driver = lab.driver()
    lab.lvm("lvcreate", "-y", "-L", "100m", "-n", "operator-linear", lab.vg_name)
    lab.lvm("lvcreate", "-T", "-V", "1g", "-n", "operator-thin", f"{lab.vg_name}/pool")
    before = lab.lv_names()
    for name in ("operator-linear", "operator-thin", "pool"):
        with pytest.raises(NotManaged, match="nothing was deleted"):
            driver.delete_volume(name)
    assert lab.lv_names() == before


def test_a_volume_with_snapshots_is_refused_then_deleted_after_them(lab):
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    driver.create_snapshot("snap-a", "volume-a")
    with pytest.raises(VolumeBusy, match="snap-a"):
        driver.delete_volume("volume-a")
    with pytest.raises(InvalidInput, match="not a snapshot"):
        driver.delete_snapshot("volume-a")
    assert {"volume-a", "snap-a"} <= lab.lv_names()
    driver.delete_snapshot("snap-a")
    driver.delete_volume("volume-a")
    assert not {"volume-a", "snap-a"} & lab.lv_names()


def provisioned_bytes(driver):
    return next(f for f in driver.backend_read_pools() if f.pool_name == "pool") \
        .provisioned_bytes


def test_unaligned_extend_admits_the_bytes_it_adds(lab):
    """Cap 4 GiB: 2 GiB + two operator LVs of 500 MiB; growing one to 2 GiB adds
    1.51 GiB (4.49 GiB), over the cap; to 1 GiB adds 0.51 GiB (3.49 GiB)."""
    driver = lab.driver()
    driver.create_volume("volume-a", 2)
    for name in ("operator-1", "operator-2"):
        lab.lvm("lvcreate", "-T", "-V", "500m", "-n", name, f"{lab.vg_name}/pool")
    with pytest.raises(CapacityExceeded, match="provisioned_cap") as refused:
        driver.extend_volume("operator-1", 2)
    assert refused.value.decision.requested_gb == pytest.approx((2 * GiB - 500 * 2**20) / GiB)
    assert lab.vg.report().get_lv("operator-1").size_bytes == 500 * 2**20
    before = provisioned_bytes(driver)
    driver.extend_volume("operator-1", 1)
    assert lab.vg.report().get_lv("operator-1").size_bytes == GiB
    assert provisioned_bytes(driver) - before == GiB - 500 * 2**20  # what was admitted


def test_a_copy_of_an_unaligned_volume_is_the_size_the_api_returns(lab):
    driver = lab.driver()
    lab.lvm("lvcreate", "-T", "-V", "500m", "-n", "operator-1", f"{lab.vg_name}/pool")
    copy = driver.create_cloned_volume("copy-1", "operator-1")
    assert copy.size_gb == 1
    assert lab.vg.report().get_lv("copy-1").size_bytes == GiB
    assert driver.backend_find_volume("copy-1") == copy


def test_a_snapshot_outlives_its_origin_removed_by_the_operator(lab):
    """LVM forgets a thin snapshot's origin once the operator removes it; the
    driver's tag keeps it a snapshot (never provisioned), usable and deletable."""
    driver = lab.driver()
    driver.create_volume("volume-a", 1)
    driver.create_snapshot("snap-a", "volume-a")
    lab.lvm("lvremove", "-f", f"{lab.vg_name}/volume-a")
    assert lab.vg.report().get_lv("snap-a").origin is None
    assert pool_stats(driver)["provisioned_capacity_gb"] == 0
    copy = driver.create_volume_from_snapshot("copy-a", "snap-a")
    assert driver.backend_find_volume("copy-a") == copy  # a volume, not a snapshot
    assert pool_stats(driver)["provisioned_capacity_gb"] == 1
    driver.delete_snapshot("snap-a")
    assert "snap-a" not in lab.lv_names()
    driver.delete_volume("copy-a")
    assert "copy-a" not in lab.lv_names()


def test_a_volume_with_a_cow_snapshot_is_refused(lab):
    """lvremove --force of an origin would remove the operator's COW snapshot too."""
    driver = lab.driver(lvm_offer_thick=True)
    driver.create_volume("thick-a", 1, extra_specs={"provisioning:type": "thick"})
    lab.lvm("lvcreate", "-s", "-L", "100m", "-n", "operator-cow", f"{lab.vg_name}/thick-a")
    with pytest.raises(VolumeBusy, match="operator-cow"):
        driver.delete_volume("thick-a")
    assert {"thick-a", "operator-cow"} <= lab.lv_names()
    lab.lvm("lvremove", "-f", f"{lab.vg_name}/operator-cow")
    driver.delete_volume("thick-a")
    assert "thick-a" not in lab.lv_names()
