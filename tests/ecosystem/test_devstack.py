"""The DevStack plugin, run phase by phase with DevStack's functions and LVM stubbed
(tests/ecosystem/devstack_harness.sh records every call), and shellcheck."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from driver_kit import load_backend_config
from lvm_driver.driver import LVM_OPTS
from tests.ecosystem.support import IN_CI, REPO

HARNESS = REPO / "tests" / "ecosystem" / "devstack_harness.sh"
STACK = ["stack pre-install", "stack install", "stack post-config", "stack extra"]
DEVSTACK_CONF = """[DEFAULT]
enabled_backends = lvmdriver-1

[lvmdriver-1]
volume_driver = cinder.volume.drivers.lvm.LVMVolumeDriver
"""


def run(workdir: Path, *phases: str, **env: str) -> list[str]:
    """The plugin's phases in ``workdir``; returns the calls recorded by this run."""
    log = workdir / "calls.log"
    before = log.read_text().splitlines() if log.exists() else []
    proc = subprocess.run(["bash", str(HARNESS), str(workdir), *phases],
                          env=dict(os.environ, PYTHON=sys.executable, **env),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines()[len(before):]


def cinder_conf(workdir: Path) -> configparser.RawConfigParser:
    ini = configparser.RawConfigParser(default_section="no default: DEFAULT is a section")
    ini.read(workdir / "etc" / "cinder" / "cinder.conf")
    return ini


@pytest.fixture
def devstack(tmp_path: Path) -> Path:
    """A DevStack after its own configure_cinder: one LVM backend already enabled."""
    (tmp_path / "etc" / "cinder").mkdir(parents=True)
    (tmp_path / "etc" / "cinder" / "cinder.conf").write_text(DEVSTACK_CONF)
    return tmp_path


def test_stack_installs_makes_the_thin_pool_and_configures_cinder(devstack: Path) -> None:
    calls = run(devstack, *STACK, DRIVER_KIT_MAX_OVER_SUBSCRIPTION_RATIO="2.5",
                DRIVER_KIT_RESERVED_PERCENTAGE="10",
                DRIVER_KIT_OVER_PROVISIONING_CALCULATION="standard")
    backing = devstack / "data" / "driver-kit-volumes-backing-file"
    expected_in_order = [
        f"setup_develop {REPO}",
        f"truncate -s 24G {backing}",
        f"sudo losetup --find --show {backing}",
        "sudo vgcreate driver-kit-volumes /dev/loop7",
        "sudo lvcreate --type thin-pool -l 90%FREE -n driver-kit-pool driver-kit-volumes",
        "openstack --os-region-name=RegionOne volume type create "
        "--property volume_backend_name=driverkit-1 --property provisioning:type=thin "
        "driver-kit",
    ]
    positions = [calls.index(call) for call in expected_in_order]
    assert positions == sorted(positions)
    assert (devstack / "data" / "driver-kit" / "locks").is_dir()

    ini = cinder_conf(devstack)
    assert ini.get("DEFAULT", "enabled_backends") == "lvmdriver-1,driverkit-1"
    assert ini.get("lvmdriver-1", "volume_driver").endswith("LVMVolumeDriver")
    section = dict(ini.items("driverkit-1"))
    assert section == {
        "volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
        "driver_kit_driver": "lvm_driver.driver.ThinLVMDriver",
        "volume_backend_name": "driverkit-1",
        "volume_group": "driver-kit-volumes", "lvm_thin_pool_name": "driver-kit-pool",
        "lvm_create_thin_pool": "False", "lvm_offer_thick": "False",
        "lvm_root_helper": "sudo", "max_over_subscription_ratio": "2.5",
        "reserved_percentage": "10", "over_provisioning_calculation": "standard",
        "lock_path": str(devstack / "data" / "driver-kit" / "locks")}
    # the values are ones the kit accepts when the adapter loads them
    kit_options = {k: v for k, v in section.items()
                   if k not in ("volume_driver", "driver_kit_driver")}
    config = load_backend_config(backend="driverkit-1", extra_opts=LVM_OPTS,
                                 overrides=kit_options)
    assert (config.max_over_subscription_ratio, config.reserved_percentage,
            config.over_provisioning_calculation) == (2.5, 10, "standard")


def test_a_second_stack_changes_nothing(devstack: Path) -> None:
    run(devstack, *STACK)
    first = (devstack / "etc" / "cinder" / "cinder.conf").read_text()
    calls = run(devstack, *STACK)
    assert (devstack / "etc" / "cinder" / "cinder.conf").read_text() == first
    assert not [c for c in calls if c.startswith(("truncate", "sudo vgcreate", "sudo lvcreate",
                                                 "sudo losetup --find"))]
    assert not [c for c in calls if "volume type create" in c]


def test_nothing_happens_without_cinder_volume(devstack: Path) -> None:
    calls = run(devstack, *STACK, ENABLED_SERVICES="key,g-api,n-cpu")
    assert calls == ["define_plugin driver-kit"]
    assert (devstack / "etc" / "cinder" / "cinder.conf").read_text() == DEVSTACK_CONF


def test_clean_removes_the_volume_group_and_its_file(devstack: Path) -> None:
    run(devstack, *STACK)
    calls = run(devstack, "unstack", "clean")
    assert "sudo lvremove -f driver-kit-volumes" in calls
    assert "sudo vgremove -f driver-kit-volumes" in calls
    assert "sudo losetup --detach /dev/loop7" in calls
    assert not (devstack / "data" / "driver-kit-volumes-backing-file").exists()
    assert not list((devstack / "lvm").iterdir())


def test_shellcheck() -> None:
    if shutil.which("shellcheck") is None:
        if IN_CI:
            pytest.fail("shellcheck is not installed (tools/run-tests.sh installs it as root)")
        pytest.skip("shellcheck is not installed: apt-get install -y shellcheck")
    proc = subprocess.run(["shellcheck", "-s", "bash", "-x", "devstack/plugin.sh",
                           "devstack/settings", "tests/ecosystem/devstack_harness.sh"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
