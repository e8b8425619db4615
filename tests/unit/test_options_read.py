"""Every option does what its help says: one observable effect per option.

A new option without an entry here fails ``test_every_option_has_a_proof``.
"""

import os
import shlex
import sys

import pytest

from driver_kit import (BackendTimeout, CapacityExceeded, GiB, SetupError,
                        load_backend_config)
from driver_kit.config import DEFAULT_OPTS, KIT_OPTS, make_conf
from driver_kit.exceptions import CoordinationError
from driver_kit.loading import load_driver
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.privsep_runner import PrivsepRunner, forget_helper
from lvm_driver.run.executor import ProcessRunner
from lvm_driver.simulator import LVMSimulator


def _driver(tmp_path, setup=True, **extra):
    overrides = {"lvm_backend": "simulator", "volume_group": "dkvg",
                 "lvm_simulator_state_file": str(tmp_path / "state.json"),
                 "lock_path": str(tmp_path / "locks"), "lvm_simulator_vg_size_gb": 20}
    overrides.update(extra)
    tmp_path.mkdir(parents=True, exist_ok=True)
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides=overrides))
    if setup:
        driver.do_setup()
    return driver


def _pool(driver, index=0):
    return driver.get_volume_stats(refresh=True)["pools"][index]


def _enabled_backends(tmp_path):
    conf = tmp_path / "kit.conf"
    conf.write_text("[DEFAULT]\nenabled_backends = lvm-b\n[lvm-b]\n"
                    "lvm_backend = simulator\nvolume_group = vg-b\n")
    assert load_driver([str(conf)]).configuration.backend == "lvm-b"


def _volume_driver(tmp_path):
    driver = load_driver(overrides={"volume_driver": "tests.unit.memdriver:MemoryDriver"})
    assert type(driver).__name__ == "MemoryDriver"


def _volume_backend_name(tmp_path):
    stats = _driver(tmp_path, volume_backend_name="gold").get_volume_stats(refresh=True)
    assert stats["volume_backend_name"] == "gold"


def _ratio(tmp_path):
    assert _pool(_driver(tmp_path, max_over_subscription_ratio="3.5"))[
        "max_over_subscription_ratio"] == 3.5


def _reserved(tmp_path):
    assert _pool(_driver(tmp_path, reserved_percentage=7))["reserved_percentage"] == 7


def _calculation(tmp_path):
    for calculation, checks in (("standard", {"provisioned_cap"}),
                                ("cinder", {"provisioned_cap", "free_cap"})):
        driver = _driver(tmp_path / calculation, over_provisioning_calculation=calculation)
        with pytest.raises(CapacityExceeded) as err:
            driver.create_volume("huge", 10**6)
        assert {c.name for c in err.value.decision.checks} == checks


def _lock_path(tmp_path):
    driver = _driver(tmp_path, lock_path=str(tmp_path / "here"))
    driver.create_volume("volume-a", 1)
    assert os.path.dirname(driver.lock_file()) == str(tmp_path / "here")
    assert os.path.exists(driver.lock_file())


def _notified(tmp_path, **extra):
    """Events after a 2 GiB thin and a 2 GiB thick volume (the thick pool is used)."""
    events = []
    driver = _driver(tmp_path, lvm_offer_thick=True, lvm_thin_pool_size_percent=50, **extra)
    driver.notifier = lambda event, payload: events.append(event)
    driver.create_volume("volume-a", 2)
    driver.create_volume("thick-a", 2, extra_specs={"provisioning:type": "thick"})
    driver.get_volume_stats(refresh=True)
    return events


def _used_percent(tmp_path):
    assert "capacity.used_over_threshold" not in _notified(tmp_path / "a")
    events = _notified(tmp_path / "b", capacity_warning_used_percent=1.0)
    assert "capacity.used_over_threshold" in events


def _provisioned_percent(tmp_path):
    assert "capacity.provisioned_over_limit" not in _notified(tmp_path / "a")
    events = _notified(tmp_path / "b", capacity_warning_provisioned_percent=0.0)
    assert "capacity.provisioned_over_limit" in events


def _stats_timeout(tmp_path):
    driver = _driver(tmp_path, stats_timeout=0.25)
    driver.create_volume("volume-a", 1)
    driver.executor.runner.inject("lvs", delay_s=2.0)
    pool = _pool(driver)
    assert pool["backend_state"] == "down" and "0.25" in pool["down_reason"]
    # it bounds the stats only: a delete's lvs has lvm_command_timeout
    driver.executor.runner.inject("lvs", delay_s=0.5)
    driver.delete_volume("volume-a")
    assert driver.backend_find_volume("volume-a") is None


def _volume_group(tmp_path):
    assert _pool(_driver(tmp_path, volume_group="vg-other"))["location_info"] == \
        "ThinLVMDriver:vg-other:vg-other-pool"


def _thin_pool_name(tmp_path):
    assert _pool(_driver(tmp_path, lvm_thin_pool_name="thin-1"))["pool_name"] == "thin-1"


def _create_thin_pool(tmp_path):
    driver = _driver(tmp_path, lvm_create_thin_pool=False)
    with pytest.raises(SetupError, match="lvm_create_thin_pool = true"):
        driver.check_for_setup_error()


def _pool_size_percent(tmp_path):
    assert _pool(_driver(tmp_path, lvm_thin_pool_size_percent=50))[
        "total_capacity_gb"] == 10


def _offer_thick(tmp_path):
    stats = _driver(tmp_path, lvm_offer_thick=True).get_volume_stats(refresh=True)
    assert [p["pool_name"] for p in stats["pools"]] == ["dkvg-pool", "dkvg"]


def _conf_file(tmp_path):
    driver = _driver(tmp_path, lvm_conf_file=str(tmp_path / "etc" / "lvm.conf"))
    assert driver.executor.runner.last_env["LVM_SYSTEM_DIR"] == str(tmp_path / "etc")


def _privsep_backend(tmp_path, **options):
    """A driver whose backend section (a config file) says ``options``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    conf = tmp_path / "kit.conf"
    conf.write_text("[DEFAULT]\nenabled_backends = b\n[b]\n"
                    "volume_driver = lvm_driver.driver.ThinLVMDriver\nvolume_group = dkvg\n"
                    f"lock_path = {tmp_path / 'locks'}\n"
                    + "".join(f"{key} = {value}\n" for key, value in options.items()))
    return load_driver([str(conf)]), conf


def _privilege(tmp_path):
    """privsep: every command goes to the privileged daemon; direct: to LVM itself."""
    driver, _ = _privsep_backend(tmp_path / "a", lvm_privilege="privsep")
    assert isinstance(driver.executor.runner, PrivsepRunner)
    forget_helper()
    driver, _ = _privsep_backend(tmp_path / "b", lvm_privilege="direct")
    assert isinstance(driver.executor.runner, ProcessRunner)


def _root_helper(tmp_path):
    """The privileged daemon is started through the helper (here one that logs its argv
    and fails, so the pool reads down); LVM itself never is."""
    log = tmp_path / "helper.log"
    helper = tmp_path / "helper.py"
    tmp_path.mkdir(parents=True, exist_ok=True)
    helper.write_text("import sys\n"
                      f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                      "sys.exit(1)\n")
    driver, conf = _privsep_backend(tmp_path, lvm_privilege="privsep",
                                    lvm_root_helper=shlex.join([sys.executable, str(helper)]))
    try:
        assert _pool(driver)["backend_state"] == "down"
    finally:
        forget_helper()
    lines = log.read_text().splitlines()
    assert lines and all(line.startswith(
        f"privsep-helper --config-file {conf} --privsep_context "
        f"lvm_driver.privileged.default --privsep_sock_path /tmp/") for line in lines)


def _command_timeout(tmp_path):
    driver = _driver(tmp_path, lvm_command_timeout=0.3)
    driver.executor.runner.inject("lvcreate", delay_s=2.0)
    with pytest.raises(BackendTimeout, match="0.3 s"):
        driver.create_volume("volume-a", 1)
    assert driver.backend_find_volume("volume-a") is None


def _read_session(tmp_path):
    """Reports go through one lvm shell (here the simulator's): a refresh in steady
    state starts no process; off, every report is a process of its own."""
    for enabled in (True, False):
        driver = _driver(tmp_path / str(enabled), lvm_read_session=enabled)
        try:
            _pool(driver)
            before = driver.executor.commands_run
            driver.vg.forget_report()  # read the VG again, not the reused report
            assert _pool(driver)["backend_state"] == "up"
            assert (driver.executor.commands_run == before) is enabled
            assert (driver.executor.shell_commands_run > 0) is enabled
        finally:
            driver.executor.close()


def _session_max_commands(tmp_path):
    driver = _driver(tmp_path, lvm_read_session=True, lvm_read_session_max_commands=1)
    try:
        started, answered = driver.executor.commands_run, driver.executor.shell_commands_run
        for _ in range(2):
            driver.vg.forget_report()  # read the VG again, not the reused report
            _pool(driver)
        # a new shell for every report: as many starts as reports answered
        assert driver.executor.commands_run - started == \
            driver.executor.shell_commands_run - answered >= 2
    finally:
        driver.executor.close()


def _metadata_parse(tmp_path):
    """After a change by another command, the report is read from the VG's metadata
    text (no LVM process); off (the simulator's default), through lvs."""
    assert not _driver(tmp_path / "default").vg.parses_metadata
    assert _driver(tmp_path / "real", setup=False, lvm_backend="real").vg.parses_metadata
    for enabled in (True, False):
        driver = _driver(tmp_path / str(enabled), lvm_metadata_parse=enabled,
                         lvm_read_session=False)
        _pool(driver)
        driver.executor.run(["lvcreate", "-L", "4m", "-n", "theirs", "dkvg"],
                            readonly=False)
        before = driver.executor.commands_run
        assert driver.vg.report().find_lv("theirs") is not None
        assert (driver.executor.commands_run == before) is enabled
        assert (driver.vg.report_cache_stats.parsed > 0) is enabled


def _backend(tmp_path):
    assert isinstance(_driver(tmp_path, setup=False).executor.runner, LVMSimulator)
    assert isinstance(_driver(tmp_path, setup=False, lvm_backend="real").executor.runner,
                      ProcessRunner)


def _state_file(tmp_path):
    _driver(tmp_path, lvm_simulator_state_file=str(tmp_path / "elsewhere.json"))
    assert (tmp_path / "elsewhere.json").exists()


def _vg_size(tmp_path):
    driver = _driver(tmp_path, lvm_simulator_vg_size_gb=3, lvm_offer_thick=True)
    assert driver.vg.vg_info().vg_size_bytes == 3 * GiB


def _coordination_url(tmp_path):
    url = "etcd3+http://127.0.0.1:9/?timeout=120"  # nothing listens: fail closed
    driver = _driver(tmp_path, coordination_backend_url=url)
    with pytest.raises(CoordinationError, match="127.0.0.1:9"):
        driver.create_volume("v", 1)
    assert _pool(driver)["provisioned_capacity_gb"] == 0  # nothing made, stats fine
    conf = tmp_path / "kit.conf"
    conf.write_text(f"[coordination]\nbackend_url = {url}\n[b]\n")
    assert load_backend_config(make_conf([str(conf)]), "b").coordination_backend_url == url


def _wiped(tmp_path, **extra):
    """The wipes a thick and a thin volume's deletes run (thin ones are never wiped)."""
    driver = _driver(tmp_path, lvm_offer_thick=True, lvm_thin_pool_size_percent=50, **extra)
    driver.create_volume("thick-a", 2, extra_specs={"provisioning:type": "thick"})
    driver.create_volume("thin-a", 2)
    driver.delete_volume("thick-a")
    driver.delete_volume("thin-a")
    return driver.executor.runner.wipes()


def _volume_clear(tmp_path):
    assert _wiped(tmp_path / "a") == [{"device": "/dev/dkvg/thick-a", "bytes": 2 * GiB}]
    assert _wiped(tmp_path / "b", volume_clear="none") == []


def _volume_clear_size(tmp_path):
    assert _wiped(tmp_path, volume_clear_size=3) == [
        {"device": "/dev/dkvg/thick-a", "bytes": 3 * 1024 ** 2}]


PROOFS = {
    "coordination_backend_url": _coordination_url,
    "enabled_backends": _enabled_backends, "volume_driver": _volume_driver,
    "volume_backend_name": _volume_backend_name, "max_over_subscription_ratio": _ratio,
    "reserved_percentage": _reserved, "over_provisioning_calculation": _calculation,
    "lock_path": _lock_path, "capacity_warning_used_percent": _used_percent,
    "capacity_warning_provisioned_percent": _provisioned_percent,
    "stats_timeout": _stats_timeout, "volume_group": _volume_group,
    "lvm_thin_pool_name": _thin_pool_name, "lvm_create_thin_pool": _create_thin_pool,
    "lvm_thin_pool_size_percent": _pool_size_percent, "lvm_offer_thick": _offer_thick,
    "lvm_conf_file": _conf_file, "lvm_root_helper": _root_helper,
    "lvm_privilege": _privilege,
    "lvm_command_timeout": _command_timeout, "lvm_backend": _backend,
    "lvm_read_session": _read_session, "lvm_metadata_parse": _metadata_parse,
    "lvm_read_session_max_commands": _session_max_commands,
    "lvm_simulator_state_file": _state_file, "lvm_simulator_vg_size_gb": _vg_size,
    "volume_clear": _volume_clear, "volume_clear_size": _volume_clear_size,
}


def test_every_option_has_a_proof():
    declared = {opt.dest for opt in [*DEFAULT_OPTS, *KIT_OPTS, *LVM_OPTS]}
    assert declared == set(PROOFS)


@pytest.mark.parametrize("option", sorted(PROOFS))
def test_option_is_read(option, tmp_path):
    PROOFS[option](tmp_path)
