"""The DevStack plugin, run phase by phase with DevStack's functions and LVM stubbed
(tests/ecosystem/devstack_harness.sh records every call), and shellcheck."""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from driver_kit import load_backend_config
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.privileged import CONTEXT_NAME, backend
from tests.unit import test_rootwrap
from tests.ecosystem.support import IN_CI, REPO

HARNESS = REPO / "tests" / "ecosystem" / "devstack_harness.sh"
STACK = ["stack pre-install", "stack install", "stack post-config", "stack extra",
         "stack test-config"]
DEVSTACK_CONF = """[DEFAULT]
enabled_backends = lvmdriver-1

[lvmdriver-1]
volume_driver = cinder.volume.drivers.lvm.LVMVolumeDriver
"""
CONTROLLER = "key,c-api,c-sch,tempest"   # a multinode controller: no cinder-volume
STORAGE_NODE = "c-vol"                   # a storage node: cinder-volume only


def run(workdir: Path, *phases: str, **env: str) -> list[str]:
    """The plugin's phases in ``workdir``; returns the calls recorded by this run."""
    log = workdir / "calls.log"
    before = log.read_text().splitlines() if log.exists() else []
    base = {k: v for k, v in os.environ.items() if k != "DEVSTACK_DIR"}  # only if asked
    proc = subprocess.run(["bash", str(HARNESS), str(workdir), *phases],
                          env=dict(base, PYTHON=sys.executable, **env),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines()[len(before):]


def ini(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(default_section="no default: DEFAULT is a section")
    parser.read(path)
    return parser


def cinder_conf(workdir: Path) -> configparser.RawConfigParser:
    return ini(workdir / "etc" / "cinder" / "cinder.conf")


def tempest_conf(workdir: Path) -> configparser.RawConfigParser:
    return ini(workdir / "etc" / "tempest" / "tempest.conf")


def volume_types(calls: list[str]) -> dict[str, dict[str, str]]:
    """The volume types created, by name, with their properties."""
    created = {}
    for call in calls:
        argv = shlex.split(call)
        if argv[:4] == ["openstack", "--os-region-name=RegionOne", "volume", "type"] \
                and argv[4] == "create":
            properties = [argv[i + 1] for i, a in enumerate(argv) if a == "--property"]
            created[argv[-1]] = dict(p.split("=", 1) for p in properties)
    return created


@pytest.fixture
def devstack(tmp_path: Path) -> Path:
    """A DevStack after its own configure_cinder: one LVM backend already enabled."""
    (tmp_path / "etc" / "cinder").mkdir(parents=True)
    (tmp_path / "etc" / "cinder" / "cinder.conf").write_text(DEVSTACK_CONF)
    return tmp_path


def test_stack_makes_the_pool_with_lib_lvm_and_configures_cinder(devstack: Path) -> None:
    calls = run(devstack, *STACK, DRIVER_KIT_MAX_OVER_SUBSCRIPTION_RATIO="2.5",
                DRIVER_KIT_RESERVED_PERCENTAGE="10",
                DRIVER_KIT_OVER_PROVISIONING_CALCULATION="cinder")
    backing = devstack / "data" / "driver-kit-volumes-backing-file"
    expected_in_order = [
        f"setup_develop {REPO}",
        "init_lvm_volume_group driver-kit-volumes 24G",      # DevStack's lib/lvm
        f"truncate -s 24G {backing}",
        "systemctl enable --now driver-kit-volumes-backing-file.service",
        "sudo vgcreate driver-kit-volumes /dev/loop7",
        "sudo lvcreate --type thin-pool -l 90%FREE -n driver-kit-pool driver-kit-volumes",
    ]
    positions = [calls.index(call) for call in expected_in_order]
    assert positions == sorted(positions)
    assert (devstack / "data" / "driver-kit" / "locks").is_dir()

    conf = cinder_conf(devstack)
    assert conf.get("DEFAULT", "enabled_backends") == "lvmdriver-1,driverkit-1"
    assert conf.get("lvmdriver-1", "volume_driver").endswith("LVMVolumeDriver")
    section = dict(conf.items("driverkit-1"))
    assert section == {
        "volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
        "driver_kit_driver": "lvm_driver.driver.ThinLVMDriver",
        "volume_backend_name": "driverkit-1",
        "volume_group": "driver-kit-volumes", "lvm_thin_pool_name": "driver-kit-pool",
        "lvm_create_thin_pool": "False", "lvm_offer_thick": "False",
        "lvm_privilege": "privsep", "max_over_subscription_ratio": "2.5",
        "reserved_percentage": "10", "over_provisioning_calculation": "cinder",
        "lock_path": str(devstack / "data" / "driver-kit" / "locks"),
        "target_helper": "lioadm", "target_protocol": "iscsi"}
    # the values are ones the kit accepts when the adapter loads them
    kit_options = {k: v for k, v in section.items()
                   if k not in ("volume_driver", "driver_kit_driver", "target_helper",
                                "target_protocol")}
    config = load_backend_config(backend="driverkit-1", extra_opts=LVM_OPTS,
                                 overrides=kit_options)
    assert (config.max_over_subscription_ratio, config.reserved_percentage,
            config.over_provisioning_calculation) == (2.5, 10, "cinder")


def test_cinder_starts_the_privileged_daemon_with_a_root_owned_file_of_its_own(
        devstack: Path) -> None:
    """The daemon trusts no file the stack user owns (DevStack's cinder.conf): it gets
    one of its own, which it serves; cinder-rootwrap gets the one filters line."""
    calls = run(devstack, *STACK)
    privsep_conf = devstack / "etc" / "driver-kit" / "privsep.conf"
    assert any(call.startswith("sudo install -D -o root -g root -m 0644 ")
               and call.endswith(f" {privsep_conf}") for call in calls)
    served = backend.load_from([str(privsep_conf)], "driverkit-1")
    assert (served.vg, served.pools) == ("driver-kit-volumes",
                                         frozenset({"driver-kit-pool"}))
    filters = devstack / "etc" / "cinder" / "rootwrap.d" / "driver-kit.filters"
    assert filters.read_text() == (REPO / "etc" / "driver-kit" / "rootwrap.d" /
                                   "driver-kit.filters").read_text()
    helper = shlex.split(cinder_conf(devstack).get("lvm_driver_privileged", "helper_command"))
    assert helper == ["sudo", "/usr/local/bin/cinder-rootwrap",
                      f"{devstack}/etc/cinder/rootwrap.conf", "privsep-helper",
                      "--config-file", str(privsep_conf)]
    # what cinder-rootwrap then receives, with the plugin's default path under /etc
    settings = (REPO / "devstack" / "settings").read_text()
    default = re.search(r"^DRIVER_KIT_PRIVSEP_CONF=\$\{DRIVER_KIT_PRIVSEP_CONF:-(.*)\}$",
                        settings, re.MULTILINE)[1]
    start = (*helper[3:5], default, "--privsep_context", CONTEXT_NAME,
             "--privsep_sock_path", "/tmp/tmpq1w2e3r4/privsep.sock")
    assert test_rootwrap.allowed(test_rootwrap.our_lines(), start)


def test_the_calculation_defaults_to_the_kits(devstack: Path) -> None:
    run(devstack, *STACK)
    calculation = cinder_conf(devstack).get("driverkit-1", "over_provisioning_calculation")
    assert calculation == load_backend_config().over_provisioning_calculation == "standard"


def test_the_volume_type_asks_for_thin_provisioning(devstack: Path) -> None:
    """CapabilitiesFilter then keeps thin volumes off a thick-only pool."""
    types = volume_types(run(devstack, *STACK))
    assert types == {"driver-kit": {"volume_backend_name": "driverkit-1",
                                    "provisioning:type": "thin",
                                    "thin_provisioning_support": "<is> True"}}


def test_thick_volumes_get_a_type_of_their_own(devstack: Path) -> None:
    calls = run(devstack, *STACK, DRIVER_KIT_OFFER_THICK="True")
    assert cinder_conf(devstack).get("driverkit-1", "lvm_offer_thick") == "True"
    assert volume_types(calls)["driver-kit-thick"] == {
        "volume_backend_name": "driverkit-1", "provisioning:type": "thick",
        "thick_provisioning_support": "<is> True"}


def test_test_config_puts_the_backend_among_tempests(devstack: Path) -> None:
    run(devstack, *STACK)
    tempest = tempest_conf(devstack)
    assert tempest.get("volume", "backend_names") == "lvmdriver-1,driverkit-1"
    assert tempest.get("volume-feature-enabled", "multi_backend") == "True"
    assert not tempest.has_option("volume", "volume_type")


def test_test_config_keeps_the_backends_tempest_has(devstack: Path) -> None:
    (devstack / "etc" / "tempest").mkdir(parents=True)
    (devstack / "etc" / "tempest" / "tempest.conf").write_text(
        "[volume]\nbackend_names = lvmdriver-1,lvmdriver-2\n")
    run(devstack, *STACK)
    run(devstack, "stack test-config")
    assert tempest_conf(devstack).get("volume", "backend_names") == \
        "lvmdriver-1,lvmdriver-2,driverkit-1"


def test_tempest_can_run_its_volume_tests_on_the_backend(devstack: Path) -> None:
    run(devstack, *STACK, DRIVER_KIT_TEMPEST_USE_TYPE="True")
    volume = dict(tempest_conf(devstack).items("volume"))
    assert volume["volume_type"] == "driver-kit"
    # what the driver reports, so Tempest's capability checks match it
    assert (volume["vendor_name"], volume["storage_protocol"]) == \
        (ThinLVMDriver.VENDOR_NAME, ThinLVMDriver.STORAGE_PROTOCOL)


def test_a_controller_without_cinder_volume_creates_the_types(devstack: Path) -> None:
    """Multinode: the type and Tempest are the controller's, the pool the storage node's."""
    calls = run(devstack, *STACK, ENABLED_SERVICES=CONTROLLER)
    assert list(volume_types(calls)) == ["driver-kit"]
    assert tempest_conf(devstack).get("volume", "backend_names") == "lvmdriver-1,driverkit-1"
    assert (devstack / "etc" / "cinder" / "cinder.conf").read_text() == DEVSTACK_CONF
    assert not [c for c in calls if c.startswith(("setup_develop", "init_lvm", "sudo"))]


def test_a_storage_node_makes_the_pool_and_the_backend_only(devstack: Path) -> None:
    calls = run(devstack, *STACK, ENABLED_SERVICES=STORAGE_NODE)
    assert "sudo vgcreate driver-kit-volumes /dev/loop7" in calls
    assert cinder_conf(devstack).has_section("driverkit-1")
    assert not [c for c in calls if c.startswith("openstack")]
    assert not (devstack / "etc" / "tempest" / "tempest.conf").exists()


def test_a_second_stack_starts_from_an_empty_pool_as_devstacks_lvm_does(
        devstack: Path) -> None:
    """stack.sh makes Cinder's database anew: the volume group is emptied, the rest kept."""
    run(devstack, *STACK)
    first = (devstack / "etc" / "cinder" / "cinder.conf").read_text()
    first_tempest = (devstack / "etc" / "tempest" / "tempest.conf").read_text()
    calls = run(devstack, *STACK)
    assert (devstack / "etc" / "cinder" / "cinder.conf").read_text() == first
    assert (devstack / "etc" / "tempest" / "tempest.conf").read_text() == first_tempest
    assert not [c for c in calls if c.startswith(("truncate", "sudo vgcreate", "systemctl"))]
    assert calls.index("sudo lvremove -f driver-kit-volumes") < calls.index(
        "sudo lvcreate --type thin-pool -l 90%FREE -n driver-kit-pool driver-kit-volumes")
    assert not volume_types(calls)


def test_nothing_happens_without_cinder(devstack: Path) -> None:
    calls = run(devstack, *STACK, "clean", ENABLED_SERVICES="key,g-api,n-cpu")
    assert calls == ["define_plugin driver-kit"]
    assert (devstack / "etc" / "cinder" / "cinder.conf").read_text() == DEVSTACK_CONF


def test_clean_removes_the_volume_group_and_its_file(devstack: Path) -> None:
    run(devstack, *STACK)
    calls = run(devstack, "unstack", "clean")
    assert "clean_lvm_volume_group driver-kit-volumes" in calls   # DevStack's lib/lvm
    assert "sudo lvremove -f driver-kit-volumes" in calls
    assert "sudo vgremove -f driver-kit-volumes" in calls
    assert not (devstack / "lvm" / "loop").exists()
    assert not (devstack / "data" / "driver-kit-volumes-backing-file").exists()
    assert not list((devstack / "lvm").iterdir())


def test_the_settings_name_what_the_driver_reports() -> None:
    settings = (REPO / "devstack" / "settings").read_text()
    default = dict(re.findall(r"^(DRIVER_KIT_\w+)=\$\{\1:-(.*)\}$", settings, re.MULTILINE))
    assert default["DRIVER_KIT_VENDOR_NAME"] == ThinLVMDriver.VENDOR_NAME
    assert default["DRIVER_KIT_STORAGE_PROTOCOL"] == ThinLVMDriver.STORAGE_PROTOCOL


@pytest.mark.skipif(not os.environ.get("DEVSTACK_DIR"),
                    reason="set DEVSTACK_DIR to a DevStack checkout to run on its lib/lvm")
def test_with_devstacks_own_lib_lvm(devstack: Path) -> None:
    calls = run(devstack, *STACK, DEVSTACK_DIR=os.environ["DEVSTACK_DIR"])
    assert "sudo vgcreate driver-kit-volumes /dev/loop7" in calls
    assert "sudo lvcreate --type thin-pool -l 90%FREE -n driver-kit-pool " \
           "driver-kit-volumes" in calls
    assert (devstack / "data" / "driver-kit-volumes-backing-file").exists()
    run(devstack, "unstack", "clean", DEVSTACK_DIR=os.environ["DEVSTACK_DIR"])
    assert not (devstack / "data" / "driver-kit-volumes-backing-file").exists()
    # the loop device is detached by the unit lib/lvm writes to /etc/systemd: not here
    assert [p.name for p in (devstack / "lvm").iterdir()] in ([], ["loop"])


def test_shellcheck() -> None:
    if shutil.which("shellcheck") is None:
        if IN_CI:
            pytest.fail("shellcheck is not installed (tools/run-tests.sh installs it as root)")
        pytest.skip("shellcheck is not installed: apt-get install -y shellcheck")
    proc = subprocess.run(["shellcheck", "-s", "bash", "-x", "devstack/plugin.sh",
                           "devstack/settings", "tests/ecosystem/devstack_harness.sh"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
