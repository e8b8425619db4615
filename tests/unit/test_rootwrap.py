"""The shipped rootwrap filters allow every command the LVM driver runs, proven with
oslo.rootwrap's own matcher (``load_filters`` + ``match_filter``), as
``cinder-rootwrap`` would decide; Cinder's own volume.filters are measured too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from oslo_rootwrap import wrapper

from driver_kit import load_backend_config
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from tests.rootwrap_recorder import RECORDED

REPO = Path(__file__).resolve().parents[2]
OURS = REPO / "etc" / "driver-kit" / "rootwrap.d"
CINDERS = Path(sys.prefix) / "etc" / "cinder" / "rootwrap.d"
EXEC_DIRS = ["/sbin", "/usr/sbin", "/bin", "/usr/bin"]


def allowed(filters: list, argv: tuple[str, ...]) -> bool:
    """What cinder-rootwrap decides for ``argv`` (a missing executable aside)."""
    try:
        wrapper.match_filter(filters, list(argv), exec_dirs=EXEC_DIRS)
    except wrapper.FilterMatchNotExecutable:
        return True
    except wrapper.NoFilterMatched:
        return False
    return True


def _workload(tmp_path: Path, **extra) -> None:
    """Every operation of the driver once, on the simulator."""
    tmp_path.mkdir(parents=True)
    overrides = {"lvm_backend": "simulator", "volume_group": "dkvg", "lvm_offer_thick": True,
                 "lvm_simulator_state_file": str(tmp_path / "state.json"),
                 "lock_path": str(tmp_path / "locks"), "lvm_simulator_vg_size_gb": 20,
                 "lvm_thin_pool_size_percent": 50, "volume_clear_size": 1, **extra}
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides=overrides))
    driver.do_setup()
    driver.check_for_setup_error()
    driver.get_volume_stats(refresh=True)
    driver.create_volume("volume-a", 1)
    driver.create_volume("thick-a", 1, extra_specs={"provisioning:type": "thick"})
    driver.extend_volume("volume-a", 2)
    driver.create_snapshot("snap-a", "volume-a")
    driver.create_volume_from_snapshot("from-snap", "snap-a", 3)
    driver.create_cloned_volume("clone-a", "volume-a")
    driver.backend_device_path("clone-a")
    driver.revert_to_snapshot("volume-a", "snap-a")
    driver.unmanage("thick-a")
    driver.manage_existing("managed-a", {"source-name": "thick-a"})
    driver.manageable_volumes()
    driver.unmanage_snapshot("snap-a")
    driver.manage_existing_snapshot("snap-b", {"source-name": "snap-a"}, "volume-a")
    driver.delete_snapshot("snap-b")
    for name in ("managed-a", "from-snap", "clone-a", "volume-a", "never-made"):
        driver.delete_volume(name)
    driver.vg.lvm_version()
    driver.executor.close()


def test_every_operation_of_the_driver_is_allowed(tmp_path: Path) -> None:
    before = set(RECORDED)
    _workload(tmp_path / "plain")
    _workload(tmp_path / "conf", lvm_conf_file=str(tmp_path / "etc" / "lvm.conf"))
    _workload(tmp_path / "shell", lvm_read_session=True)
    ran = {argv for argv, test in RECORDED.items()
           if argv not in before or test.endswith("::test_every_operation_of_the_driver_is_allowed")}
    assert {argv[0] for argv in ran} == {"env", "dd"}
    assert any(arg.startswith("LVM_SYSTEM_DIR=") for argv in ran for arg in argv)
    assert any(argv[-1] == "lvm" for argv in ran)  # the read session's shell
    filters = wrapper.load_filters([str(OURS)])
    assert [argv for argv in ran if not allowed(filters, argv)] == []


def test_the_filters_refuse_what_the_driver_never_runs() -> None:
    filters = wrapper.load_filters([str(OURS)])
    env = ("env", "LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1")
    for argv in [("lvremove", "--force", "dkvg"),                 # a whole VG
                 (*env, "lvremove", "--force", "dkvg"),
                 (*env, "lvremove", "-ff", "dkvg/pool"),
                 (*env, "vgremove", "-f", "dkvg"),
                 (*env, "lvs", "--reportformat", "json", "--units", "b", "--nosuffix",
                  "-o", "lv_name", "dkvg", "--config", "global{}"),
                 (*env, "LVM_SYSTEM_DIR=/etc/../tmp", "lvm", "version"),
                 (*env, "lvm"),                                     # a shell with history
                 ("env", "HOME=/dev/null", *env[1:], "LVM_SYSTEM_DIR=/tmp/c", "lvm",
                  "lvremove", "-ff", "dkvg"),                       # a command, not a shell
                 ("dd", "if=/dev/sda", "of=/dev/dkvg/v", "count=1", "bs=1M",
                  "iflag=count_bytes", "oflag=direct", "conv=fdatasync"),
                 ("dd", "if=/dev/zero", "of=/etc/passwd", "count=1", "bs=1M",
                  "iflag=count_bytes", "oflag=direct", "conv=fdatasync"),
                 ("sh", "-c", "lvs")]:
        assert not allowed(filters, argv), argv


def test_every_command_the_tests_ran_is_allowed() -> None:
    """Runs last (tests/rootwrap_recorder.py): every command of the whole session."""
    if not RECORDED:
        pytest.skip("no driver command was recorded in this session")
    filters = wrapper.load_filters([str(OURS)])
    denied = {argv: test for argv, test in RECORDED.items() if not allowed(filters, argv)}
    assert denied == {}, f"{len(denied)} of {len(RECORDED)} commands denied"
    if CINDERS.is_dir():
        cinders = wrapper.load_filters([str(CINDERS)])
        by_cinder = {argv for argv in RECORDED if allowed(cinders, argv)}
        denied_kinds = sorted({" ".join(a for a in argv if "=" not in a or a.startswith(
            ("if=", "of="))).split()[1 if argv[0] == "env" else 0]
            for argv in set(RECORDED) - by_cinder})
        print(f"\nrootwrap: {len(RECORDED)} of {len(RECORDED)} distinct commands allowed by "
              f"driver-kit.filters, {len(by_cinder)} by Cinder's volume.filters (it denies "
              f"some of: {', '.join(denied_kinds)})")
