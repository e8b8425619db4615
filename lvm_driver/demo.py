"""``driver-kit demo``: a narrated walkthrough of the LVM driver on the simulator."""

from __future__ import annotations

import os
from typing import Any

from driver_kit import CapacityExceeded, GiB
from driver_kit.loading import load_driver
from driver_kit.tables import pools_table, stats_table
from lvm_driver.driver import ThinLVMDriver

__all__ = ["run_demo"]


def _say(text: str) -> None:
    print(f"\n== {text}")


def _stats(driver: ThinLVMDriver) -> dict[str, Any]:
    stats = driver.get_volume_stats(refresh=True)
    print(stats_table(stats))
    return stats["pools"][0]


def _operator(driver: ThinLVMDriver, argv: list[str], why: str) -> None:
    _say(f"an operator runs `{' '.join(argv)}`: {why}")
    driver.executor.run(argv, readonly=False)


def run_demo(workdir: str) -> int:
    """Walk through stats, admission, out-of-band volumes and snapshots; returns 0."""
    state = os.path.join(workdir, "simulator.json")
    driver = load_driver(overrides={
        "volume_driver": "lvm_driver.driver.ThinLVMDriver", "lvm_backend": "simulator",
        "lvm_simulator_state_file": state, "lvm_simulator_vg_size_gb": 12,
        "volume_group": "demo-vg", "lvm_thin_pool_name": "pool",
        "lvm_create_thin_pool": False, "max_over_subscription_ratio": "2.0",
        "lvm_offer_thick": True,
        "reserved_percentage": 10, "lock_path": os.path.join(workdir, "locks")})
    assert isinstance(driver, ThinLVMDriver) and driver.executor.create_missing_vg is not None
    print(f"LVM simulator state: {state}")
    driver.do_setup()  # the simulator stands in for the operator's vgcreate of 12 GiB
    _operator(driver, ["lvcreate", "-T", "-L", "10g", "demo-vg/pool"],
              "a 12 GiB volume group gets a 10 GiB thin pool; max over-subscription ratio "
              "2.0 and 10% reserved make the cap (10 - 1) * 2 = 18 GiB provisioned; the VG's "
              "free extents form a thick pool")
    driver.check_for_setup_error()
    _stats(driver)

    _say("create volume-1 (2 GiB) and volume-2 (6 GiB): thin, so nothing is written yet")
    driver.create_volume("volume-1", 2)
    driver.create_volume("volume-2", 6)
    driver.executor.runner.write_data("demo-vg", "volume-1", 3 * GiB // 2)
    print("(1.5 GiB written into volume-1: free drops, provisioned does not move)")
    _stats(driver)

    _operator(driver, ["lvcreate", "-T", "-V", "2g", "-n", "operator-made", "demo-vg/pool"],
              "behind the driver's back")
    pool = _stats(driver)
    print(f"-> provisioned counts it: {pool['provisioned_capacity_gb']} GiB = 2 + 6 + 2")

    _say("snapshot of volume-1: snapshots are reported apart, not as provisioned")
    driver.create_snapshot("snap-1", "volume-1")
    _stats(driver)

    _say("create volume-3 of 9 GiB: 10 + 9 > 18, so the admission guard refuses it")
    try:
        driver.create_volume("volume-3", 9)
    except CapacityExceeded as exc:
        print(f"refused:\n{exc.decision.explain()}")
    print(f"volume-3 exists afterwards: {driver.backend_find_volume('volume-3') is not None}")

    _say("extend volume-2 from 6 to 15 GiB: also refused, and volume-2 keeps its size")
    try:
        driver.extend_volume("volume-2", 15)
    except CapacityExceeded as exc:
        print(f"refused: {exc.decision.failed_checks[0].formula}, short by "
              f"{exc.decision.failed_checks[0].shortfall_gb:g} GiB")
    print(f"volume-2 is {driver.backend_find_volume('volume-2').size_gb} GiB")

    _say("the scheduler's view: capacity factors per provisioning type (thick = VG free)")
    print(pools_table(driver.get_volume_stats(refresh=True)))
    _say("done: `driver-kit stats --json` prints the exact get_volume_stats() dict")
    return 0
