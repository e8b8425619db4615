"""Where Cinder's scheduler and the kit must take the same decision (issue 21's classes).

Each was seen in a real deployment (tests/ecosystem/test_cinder_deployment.py): the
scheduler passed the request and the driver refused it, the user's volume in error.
"""

import pytest

from driver_kit import CapacityExceeded, GiB, InvalidInput, load_backend_config
from driver_kit.loading import load_driver
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.simulator import LVMSimulator


def lvm(tmp_path, **extra):
    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    simulator.create_vg("dkvg", 12 * GiB)
    simulator.run(["lvcreate", "-T", "-L", "10g", "dkvg/pool"])
    overrides = {"lvm_backend": "simulator", "lvm_simulator_state_file":
                 str(tmp_path / "state.json"), "volume_group": "dkvg",
                 "lvm_thin_pool_name": "pool", "lock_path": str(tmp_path / "locks"),
                 "max_over_subscription_ratio": "2.0", "lvm_offer_thick": True, **extra}
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides=overrides))
    driver.do_setup()
    return simulator, driver


def test_a_thin_request_on_the_thick_only_pool_is_made_thick(tmp_path):
    """Cinder's CapacityFilter passes it there with the thick arithmetic (the pool reports
    no thin support); Cinder's LVM driver on a thick VG makes it thick too."""
    _, driver = lvm(tmp_path)
    info = driver.create_volume("volume-a", 1, extra_specs={"provisioning:type": "thin"},
                                pool_name="dkvg")
    assert (info.pool_name, info.thin) == ("dkvg", False)
    assert driver.backend_find_volume("volume-a").thin is False
    # as thick, it is admitted within the VG's free space only
    with pytest.raises(CapacityExceeded):
        driver.create_volume("volume-b", 2, extra_specs={"provisioning:type": "thin"},
                             pool_name="dkvg")


def test_a_thick_request_on_the_thin_only_pool_is_made_in_the_thick_pool(tmp_path):
    """No Cinder filter matches provisioning:type with a pool's capabilities, so Cinder's
    weigher may send a thick request to the thin pool: the backend's thick pool takes it,
    admitted by the thick pool's own figures."""
    _, driver = lvm(tmp_path)
    info = driver.create_volume("volume-a", 1, extra_specs={"provisioning:type": "thick"},
                                pool_name="pool")
    assert (info.pool_name, info.thin) == ("dkvg", False)
    assert driver.backend_find_volume("volume-a").thin is False
    with pytest.raises(CapacityExceeded):  # 1 GiB of the VG left outside the thin pool
        driver.create_volume("volume-b", 2, extra_specs={"provisioning:type": "thick"},
                             pool_name="pool")


def test_a_thick_request_on_a_backend_without_a_thick_pool_is_refused(tmp_path):
    """A thin volume would be less than asked (no space set aside)."""
    _, driver = lvm(tmp_path, lvm_offer_thick=False)
    with pytest.raises(InvalidInput, match="pool pool does not support thick provisioning"):
        driver.create_volume("volume-a", 1, extra_specs={"provisioning:type": "thick"},
                             pool_name="pool")
    assert driver.backend_find_volume("volume-a") is None


def test_an_extend_counts_its_growth_from_the_whole_gib_size_when_asked(tmp_path):
    """A managed LV of 512 MiB is 1 GiB to Cinder: growing it to 2 GiB is 1 GiB more."""
    simulator, driver = lvm(tmp_path)
    simulator.run(["lvcreate", "-T", "-V", "512m", "-n", "part", "dkvg/pool"])
    simulator.run(["lvcreate", "-T", "-V", "512m", "-n", "part-2", "dkvg/pool"])
    driver.create_volume("big", 18, pool_name="pool")  # provisioned 19 of a cap of 20
    with pytest.raises(CapacityExceeded):
        driver.extend_volume("part", 2)  # 1.5 GiB more, from the exact bytes
    driver.extend_volume("part", 2, growth_from_whole_gib=True)
    assert driver.backend_find_volume("part").size_bytes == 2 * GiB


def test_a_snapshot_is_admitted_as_thin_where_the_pool_offers_thin(tmp_path):
    """Cinder's snapshot request carries no type, so its scheduler checks the thin cap,
    also for a thick volume's snapshot on a pool offering both."""
    driver = load_driver(backend="shared", overrides={
        "volume_driver": "contrib.shared_pool_driver.SharedPoolDriver",
        "shared_array_dir": str(tmp_path / "array"), "shared_capacity_gb": 20,
        "lock_path": str(tmp_path / "locks")})
    driver.do_setup()
    driver.create_volume("thick", 12, extra_specs={"provisioning:type": "thick"},
                         pool_name="fast")
    snapshot = driver.create_snapshot("snap", "thick")  # 12 GiB > the 8 GiB left thick
    assert snapshot.pool_name == "fast"
