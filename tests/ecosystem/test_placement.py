"""Placement inventory: Placement's capacity formula gives the kit's admission cap."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driver_kit import admit, capacity
from driver_kit.placement import Inventory, pool_inventory, resource_providers
from tests.ecosystem.support import REPO, SimBackend, make_backend

INVENTORY_FIELDS = {"total", "reserved", "min_unit", "max_unit", "step_size",
                    "allocation_ratio"}


def _admit(pool: dict[str, Any], size: int, calculation: str) -> Any:
    return admit(total_capacity=pool["total_capacity_gb"],
                 free_capacity=pool["free_capacity_gb"],
                 provisioned_capacity=pool["provisioned_capacity_gb"], requested=size,
                 max_over_subscription_ratio=pool["max_over_subscription_ratio"],
                 reserved_percentage=pool["reserved_percentage"],
                 thin=pool["thin_provisioning_support"], calculation=calculation)


def _kit_cap(pool: dict[str, Any], calculation: str) -> float:
    """The kit's cap on provisioned GiB, read off its own admission decision."""
    decision = _admit(pool, 1, calculation)
    check = next(c for c in decision.checks if c.name == "provisioned_cap")
    # thin: (total - reserved) * ratio; thick: total - reserved - provisioned
    return check.allowed_gb + (0 if pool["thin_provisioning_support"]
                               else pool["provisioned_capacity_gb"])


def _backend(tmp: Path, name: str, calculation: str, **options: Any) -> SimBackend:
    backend = make_backend(tmp, name, vg_gb=24, pool_gb=20, lvm_offer_thick=True,
                           over_provisioning_calculation=calculation, **options)
    backend.driver.create_volume(f"{name}-1", 12)
    backend.driver.create_volume(f"{name}-2", 9)
    backend.write(f"{name}-1", 11)
    backend.driver.create_volume(f"{name}-thick", 2, extra_specs={"provisioning:type": "thick"})
    return backend


CASES = [
    ("standard", {"max_over_subscription_ratio": "2.0", "reserved_percentage": 10}),
    ("cinder", {"max_over_subscription_ratio": "2.0", "reserved_percentage": 10}),
    ("standard", {"max_over_subscription_ratio": "1.5", "reserved_percentage": 29}),
    ("cinder", {"max_over_subscription_ratio": "auto", "reserved_percentage": 0}),
]


@pytest.mark.parametrize("calculation,options", CASES,
                         ids=[f"{c}-{o['max_over_subscription_ratio']}-{o['reserved_percentage']}"
                              for c, o in CASES])
def test_placement_formula_equals_the_kit_admission_cap(
        tmp_path: Path, calculation: str, options: dict[str, Any]) -> None:
    backend = _backend(tmp_path, "kit", calculation, **options)
    stats = backend.driver.get_volume_stats(refresh=True)
    thin = next(p for p in stats["pools"] if p["thin_provisioning_support"])
    assert thin["total_capacity_gb"] == 20.0  # a whole-GiB pool: no rounding between them
    inventory = pool_inventory(thin)
    assert inventory is not None
    assert inventory.total == 20
    assert inventory.allocation_ratio == thin["max_over_subscription_ratio"]
    assert inventory.reserved == capacity.reserved_gb(20, options["reserved_percentage"])
    # (total - reserved) * allocation_ratio is the kit's cap, to the digit
    assert inventory.capacity == _kit_cap(thin, calculation)
    usage = resource_providers(stats)["resource_providers"][0]["usages"]["DISK_GB"]
    assert usage == thin["provisioned_capacity_gb"] == 21
    # and Placement allocates exactly the sizes the kit admits
    largest = capacity.max_admissible(
        total_capacity=thin["total_capacity_gb"], free_capacity=thin["free_capacity_gb"],
        provisioned_capacity=thin["provisioned_capacity_gb"],
        max_over_subscription_ratio=thin["max_over_subscription_ratio"],
        reserved_percentage=thin["reserved_percentage"], thin=True, calculation=calculation)
    assert inventory.max_unit == largest
    for size in range(1, int(inventory.capacity) + 3):
        assert inventory.fits(usage, size) == _admit(thin, size, calculation).admitted, size
    if calculation == "standard":  # Placement's formula alone decides it
        assert largest == math.floor(inventory.capacity - usage)


def test_thick_pool_has_ratio_one_and_never_offers_more_than_the_kit(tmp_path: Path) -> None:
    backend = _backend(tmp_path, "kit", "cinder", max_over_subscription_ratio="20.0",
                       reserved_percentage=5)
    stats = backend.driver.get_volume_stats(refresh=True)
    thick = next(p for p in stats["pools"] if not p["thin_provisioning_support"])
    inventory = pool_inventory(thick)
    assert inventory is not None and inventory.allocation_ratio == 1.0
    # whole GiB only: a fractional total is floored, so Placement's cap is never above
    assert inventory.total == math.floor(thick["total_capacity_gb"])
    assert inventory.capacity <= _kit_cap(thick, "cinder") < inventory.capacity + 1
    usage = math.ceil(thick["provisioned_capacity_gb"])
    for size in range(1, 8):
        assert inventory.fits(usage, size) == _admit(thick, size, "cinder").admitted, size


@pytest.mark.parametrize("thin", [True, False], ids=["thin", "thick"])
def test_reserved_is_cinders_float_floor(thin: bool) -> None:
    """100 GiB at 29%: Cinder reserves 28 (float floor), and so does the inventory."""
    pool = {"pool_name": "p", "total_capacity_gb": 100.0, "free_capacity_gb": 100.0,
            "provisioned_capacity_gb": 0.0, "reserved_percentage": 29,
            "max_over_subscription_ratio": 2.0 if thin else 1.0,
            "thin_provisioning_support": thin, "backend_state": "up"}
    pool["max_volume_size_gb"] = capacity.max_admissible(
        total_capacity=100.0, free_capacity=100.0, provisioned_capacity=0.0,
        max_over_subscription_ratio=pool["max_over_subscription_ratio"],
        reserved_percentage=29, thin=thin)
    inventory = pool_inventory(pool)
    assert inventory is not None
    assert inventory.reserved == 28
    assert inventory.capacity == (144 if thin else 72) == _kit_cap(pool, "cinder")
    for size in range(1, int(inventory.capacity) + 3):
        assert inventory.fits(0, size) == _admit(pool, size, "cinder").admitted, size


def test_a_full_pool_offers_nothing_and_a_down_pool_has_no_inventory() -> None:
    full = {"pool_name": "p", "total_capacity_gb": 10.0, "free_capacity_gb": 1.0,
            "provisioned_capacity_gb": 20.0, "reserved_percentage": 0,
            "max_over_subscription_ratio": 2.0, "thin_provisioning_support": True,
            "max_volume_size_gb": 0, "backend_state": "up"}
    inventory = pool_inventory(full)
    assert inventory == Inventory(total=10, reserved=10, min_unit=1, max_unit=1,
                                  step_size=1, allocation_ratio=2.0)
    assert not inventory.fits(0, 1)
    down = dict(full, backend_state="down", down_reason="backend cannot be read: boom",
                total_capacity_gb=0.0)
    providers = resource_providers({"volume_backend_name": "b", "pools": [down]})
    assert providers == {"resource_providers": [{
        "name": "b#p", "inventories": {}, "usages": {}, "backend_state": "down",
        "down_reason": "backend cannot be read: boom"}]}


def test_driver_kit_placement_command(tmp_path: Path) -> None:
    conf = tmp_path / "kit.conf"
    conf.write_text(f"""[DEFAULT]
enabled_backends = lvm-1

[lvm-1]
volume_driver = lvm_driver.driver.ThinLVMDriver
lvm_backend = simulator
lvm_simulator_state_file = {tmp_path / 'sim.json'}
volume_group = dkvg
lvm_thin_pool_name = pool
lvm_offer_thick = true
max_over_subscription_ratio = 2.5
reserved_percentage = 5
lock_path = {tmp_path / 'locks'}
""")
    run = [sys.executable, "-m", "driver_kit.cli", "--config-file", str(conf)]
    subprocess.run(run + ["create", "v1", "10"], cwd=REPO, check=True, capture_output=True,
                   timeout=60)
    out = subprocess.run(run + ["placement"], cwd=REPO, check=True, capture_output=True,
                         text=True, timeout=60).stdout
    providers = json.loads(out)["resource_providers"]
    assert [p["name"] for p in providers] == ["lvm-1#pool", "lvm-1#dkvg"]
    for provider in providers:
        assert set(provider["inventories"]) == {"DISK_GB"}
        disk = provider["inventories"]["DISK_GB"]
        assert set(disk) == INVENTORY_FIELDS
        assert all(isinstance(disk[k], int) for k in INVENTORY_FIELDS - {"allocation_ratio"})
        assert isinstance(disk["allocation_ratio"], float)
        assert 1 <= disk["min_unit"] <= disk["max_unit"] and disk["step_size"] == 1
        assert 0 <= disk["reserved"] <= disk["total"]
    assert providers[0]["usages"] == {"DISK_GB": 10}
    assert providers[0]["inventories"]["DISK_GB"]["allocation_ratio"] == 2.5
    assert providers[1]["inventories"]["DISK_GB"]["allocation_ratio"] == 1.0
