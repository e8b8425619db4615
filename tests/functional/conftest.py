"""One scenario suite, two backends: the LVM simulator (everywhere) and real
LVM (inside the VM lane, tests/realvm, where DK_REAL_LVM=1).

Each test gets a ``lab``: a volume group holding a fresh 2 GiB thin pool
named ``pool``, an operator's shell onto LVM (``lab.lvm(...)``) and a factory
of drivers configured for it. The unprivileged modules share ``unprivileged_host``
(the guest as a Cinder host, in the VM lane only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from driver_kit import GiB, load_backend_config
from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.run.executor import CommandResult, LVMExecutor

POOL_GB = 2
VG_GB = 4


class Lab:
    """A volume group with a thin pool, seen by an operator and by drivers."""

    def __init__(self, kind: str, tmp: Path, *, vg_bytes: int = VG_GB * GiB):
        self.kind = kind
        self.tmp = tmp
        self.state_file = str(tmp / "simulator.json")
        self.lock_path = str(tmp / "locks")
        self.simulator = None
        if kind == "sim":
            from lvm_driver.simulator import LVMSimulator
            self.vg_name = "dkvg"
            self.simulator = LVMSimulator(state_file=self.state_file)
            self.simulator.create_vg(self.vg_name, vg_bytes)
            self.executor = LVMExecutor(runner=self.simulator, timeout_s=30)
        else:
            self.vg_name = os.environ["DK_REAL_LVM_VG"]
            self.executor = LVMExecutor(timeout_s=120)
        self.vg = VolumeGroup(self.vg_name, executor=self.executor)

    def lvm(self, *argv: str) -> CommandResult:
        """Run an LVM command as the operator would, behind the driver's back."""
        return self.executor.run(list(argv), readonly=argv[0] in ("lvs", "vgs"))

    def overrides(self, **extra: Any) -> dict[str, Any]:
        base = {"volume_group": self.vg_name, "lvm_thin_pool_name": "pool",
                "lvm_create_thin_pool": False, "lock_path": self.lock_path,
                "max_over_subscription_ratio": "2.0", "lvm_command_timeout": 120.0,
                "lvm_backend": self.kind if self.kind == "real" else "simulator",
                "lvm_simulator_state_file": self.state_file}
        if self.kind == "real":
            # the VM lane's PV is a sparse file in guest RAM: wiping a whole thick GiB
            # on every delete would fill it (dd then fails with EIO); 16 MiB is wiped
            base["volume_clear_size"] = 16
        base.update(extra)
        return base

    def driver(self, **extra: Any) -> ThinLVMDriver:
        """A driver on this lab's pool, set up and checked as Cinder would."""
        conf = load_backend_config(extra_opts=LVM_OPTS, overrides=self.overrides(**extra))
        driver = ThinLVMDriver(conf)
        driver.do_setup()
        driver.check_for_setup_error()
        return driver

    def write(self, lv: str, nbytes: int) -> None:
        """Write ``nbytes`` of data into a thin volume, so the pool fills."""
        if self.simulator is not None:
            self.simulator.write_data(self.vg_name, lv, nbytes)
            return
        subprocess.run(["dd", "if=/dev/zero", f"of=/dev/{self.vg_name}/{lv}", "bs=1M",
                        f"count={nbytes // (1024 * 1024)}", "oflag=direct", "conv=fsync",
                        "status=none"], check=True)
        # dm-thin commits its metadata about once a second: let usage settle
        time.sleep(2)

    def fill(self, lv: str, nbytes: int) -> None:
        """Write ``nbytes`` of non-zero data at the start of active LV ``lv``."""
        if self.simulator is not None:
            self.simulator.write_data(self.vg_name, lv, nbytes)
            return
        with open(f"/dev/{self.vg_name}/{lv}", "r+b", buffering=0) as device:
            device.write(b"\xab" * nbytes)
            os.fsync(device.fileno())

    def nonzero_bytes(self, lv: str, nbytes: int) -> int:
        """How many of the first ``nbytes`` of active LV ``lv`` are not zero (on the
        simulator: the bytes of its data not zeroed since written)."""
        if self.simulator is not None:
            return self.simulator.data_bytes(self.vg_name, lv)
        with open(f"/dev/{self.vg_name}/{lv}", "rb", buffering=0) as device:
            return nbytes - device.read(nbytes).count(0)

    def lv_names(self) -> set[str]:
        return {lv.name for lv in self.vg.report().lvs if not lv.is_hidden}

    def teardown(self) -> None:
        if self.kind == "real":
            self.executor.run(["lvremove", "-f", "-y", self.vg_name], readonly=False)


def _kinds() -> list[Any]:
    return ["sim", pytest.param("real", marks=pytest.mark.realvm)]


@pytest.fixture(params=_kinds())
def lab(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "real" and os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("real-LVM scenarios run inside the VM lane: "
                    "tests/realvm/run_in_vm.sh -- .venv/bin/python -m pytest "
                    "tests/functional -m realvm")
    lab = Lab(request.param, tmp_path)
    if request.param == "real":
        lab.teardown()  # a previous run may have left LVs behind
    lab.lvm("lvcreate", "-T", "-L", f"{POOL_GB}g", f"{lab.vg_name}/pool")
    try:
        yield lab
    finally:
        lab.teardown()
        shutil.rmtree(lab.lock_path, ignore_errors=True)


@pytest.fixture(scope="package")
def unprivileged_host(tmp_path_factory: pytest.TempPathFactory):
    """The guest as a Cinder host, the driver's process running as cinder
    (``unprivileged_host.running_host``): set up once for the unprivileged modules,
    which run one after the other, and taken down after this package."""
    from tests.functional.unprivileged_host import running_host  # the VM lane's only
    with running_host(tmp_path_factory) as host:
        yield host
