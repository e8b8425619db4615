"""What the privileged daemon trusts: config files (and every directory above them)
owned by root and not writable by group or others, a section that is an enabled
backend of this driver, an ``lvm_conf_file`` directory that is root's alone; and the
daemon started by oslo.privsep refuses the same while it runs."""

from __future__ import annotations

import os
import shlex

import pytest
from oslo_config import cfg

from lvm_driver.privileged import CONFIG_SECTION, PrivilegeRefused, backend, commands
from lvm_driver.privsep_runner import forget_helper, use_helper
from tests.unit.privsep_lab import SECTION, close_lab, make_lab, root_helper

GOOD = """[DEFAULT]
enabled_backends = b1,adapted
[b1]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = vg1
lvm_thin_pool_name = thin
[adapted]
volume_driver = contrib.cinder_adapter.DriverKitVolumeDriver
volume_group = vg2
[backend_defaults]
lvm_conf_file = {conf_dir}/lvm.conf
"""


@pytest.fixture
def files(tmp_path):
    conf_dir = tmp_path / "lvm"
    conf_dir.mkdir()
    (conf_dir / "lvm.conf").write_text("global {}\n")
    path = tmp_path / "cinder.conf"
    path.write_text(GOOD.format(conf_dir=conf_dir))
    path.chmod(0o640)
    return tmp_path, path


def test_a_root_owned_file_is_served(files):
    tmp_path, path = files
    served = backend.load_from([str(path)], "b1")
    assert (served.vg, served.pools, served.simulated) == ("vg1", frozenset({"thin"}), False)
    assert served.system_dir == str(tmp_path / "lvm")
    adapted = backend.load_from([str(path)], "adapted")
    assert (adapted.vg, adapted.pools) == ("vg2", frozenset({"vg2-pool"}))


@pytest.mark.parametrize("change, match", [
    (lambda p: os.chown(p, 1000, -1), "owned by uid 1000"),
    (lambda p: p.chmod(0o660), "writable by group"),
    (lambda p: p.chmod(0o646), "writable by group or others"),
    (lambda p: os.chown(p.parent, 1000, -1), "directory above"),
    (lambda p: p.parent.chmod(0o777), "directory above"),
])
def test_a_file_others_could_write_is_refused(files, change, match):
    _, path = files
    change(path)
    with pytest.raises(PrivilegeRefused, match=match):
        backend.load_from([str(path)], "b1")


SIMULATED = """[DEFAULT]
enabled_backends = sim
[sim]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = vg1
lvm_backend = simulator
lvm_simulator_state_file = {state}
"""


@pytest.mark.parametrize("place, match", [
    (lambda d: os.chown(d / "state.json", 1000, -1), "state_file '.*' is owned by uid 1000"),
    (lambda d: (d / "state.json").chmod(0o666), "writable by group or others"),
    (lambda d: os.chown(d, 1000, 1000), "state_file's directory .* owned by uid 1000"),
    (lambda d: d.chmod(0o1777), "state_file's directory .* writable by group or others"),
    (lambda d: os.chown(d.parent, 1000, -1), "directory above .*state_file's directory"),
    (lambda d: ((d / "state.json").unlink(), (d / "state.json").symlink_to(
        d.parent.parent / "user" / "theirs.json")), "owned by uid 1000"),
], ids=["file-not-roots", "file-writable", "dir-not-roots", "dir-sticky-world-writable",
        "dir-above-not-roots", "symlink-to-users-file"])
def test_the_simulators_state_file_meets_the_same_rule(files, place, match):
    """The daemon writes the simulator's state (and its lock and PV files beside it) as
    root: a file or directory another user could write or swap is refused."""
    tmp_path, path = files
    state_dir = tmp_path / "sim" / "state"
    state_dir.mkdir(mode=0o755, parents=True)
    state = state_dir / "state.json"
    state.write_text("{}")
    state.chmod(0o644)
    theirs = tmp_path / "user" / "theirs.json"
    theirs.parent.mkdir()
    theirs.write_text("{}")
    os.chown(theirs, 1000, 1000)
    path.write_text(SIMULATED.format(state=state))
    assert backend.load_from([str(path)], "sim").state_file == str(state)
    state.unlink()  # not made yet: the directory alone decides
    assert backend.load_from([str(path)], "sim").simulated
    state.write_text("{}")
    place(state_dir)
    with pytest.raises(PrivilegeRefused, match=match):
        backend.load_from([str(path)], "sim")


def test_a_relative_state_file_is_refused(files):
    _, path = files
    path.write_text(SIMULATED.format(state="state.json"))
    with pytest.raises(PrivilegeRefused, match="not an absolute path"):
        backend.load_from([str(path)], "sim")


def test_a_symlink_is_judged_by_what_it_points_at(files, tmp_path):
    _, path = files
    theirs = tmp_path / "user" / "evil.conf"
    theirs.parent.mkdir()
    theirs.write_text(path.read_text())
    os.chown(theirs, 1000, 1000)
    link = tmp_path / "link.conf"
    link.symlink_to(theirs)
    with pytest.raises(PrivilegeRefused, match="owned by uid 1000"):
        backend.load_from([str(link)], "b1")


@pytest.mark.parametrize("text, section, match", [
    ("[DEFAULT]\nenabled_backends = b1\n[b1]\nvolume_group = vg1\n", "b1", "volume_driver"),
    ("[DEFAULT]\nenabled_backends = b1\n[b1]\nvolume_driver = "
     "cinder.volume.drivers.lvm.LVMVolumeDriver\n", "b1", "not the LVM thin driver"),
    ("[DEFAULT]\nenabled_backends = b1\n[b1]\nvolume_driver = "
     "contrib.cinder_adapter.DriverKitVolumeDriver\ndriver_kit_driver = tests.x.Y\n", "b1",
     "not the LVM thin driver"),
    ("[b1]\nvolume_driver = lvm_driver.driver.ThinLVMDriver\n", "b1", "enabled_backends"),
    (GOOD, "b2", "enabled_backends"),
    (GOOD, "DEFAULT", "not a config section"),
    (GOOD, "b1]\n[x", "not a config section"),
    ("[DEFAULT]\nenabled_backends = b1\n[b1]\nvolume_driver = "
     "lvm_driver.driver.ThinLVMDriver\nvolume_group = -rf\n", "b1", "starts with '-'"),
    ("[DEFAULT]\nenabled_backends = b1\n[b1]\nvolume_driver = "
     "lvm_driver.driver.ThinLVMDriver\nlvm_thin_pool_name = ../x\n", "b1", "not allow"),
    ("[DEFAULT]\nenabled_backends = b1\n[b1]\nvolume_driver = "
     "lvm_driver.driver.ThinLVMDriver\nlvm_backend = simulator\n", "b1", "state_file"),
    ("[DEFAULT]\nenabled_backends = b1\n[b1]\nvolume_driver = "
     "lvm_driver.driver.ThinLVMDriver\nlvm_conf_file = /tmp/x/my.conf\n", "b1", "lvm.conf"),
    ("[DEFAULT]\nenabled_backends = b1\n[b1]\nvolume_driver = "
     "lvm_driver.driver.ThinLVMDriver\nlvm_conf_file = /nonexistent/lvm.conf\n", "b1",
     "No such file"),
])
def test_sections_that_are_not_this_drivers_are_refused(tmp_path, text, section, match):
    path = tmp_path / "c.conf"
    path.write_text(text.format(conf_dir=tmp_path))
    path.chmod(0o644)
    with pytest.raises(PrivilegeRefused, match=match):
        backend.load_from([str(path)], section)


@pytest.mark.parametrize("change", [
    lambda d: os.chown(d, 1000, -1), lambda d: d.chmod(0o777), lambda d: d.chmod(0o775),
    lambda d: os.chown(d / "lvm.conf", 1000, -1)])
def test_an_lvm_conf_dir_others_could_write_is_refused(files, change):
    tmp_path, path = files
    change(tmp_path / "lvm")
    with pytest.raises(PrivilegeRefused, match="lvm_conf_file"):
        backend.load_from([str(path)], "b1")


def test_no_file_at_all_is_refused():
    with pytest.raises(PrivilegeRefused, match="without --config-file"):
        backend.load_from([], "b1")


def test_the_running_daemon_checks_its_file_on_every_call(tmp_path):
    lab = make_lab(tmp_path / "lab")
    try:
        assert commands.vg_report(SECTION, timeout_s=30)["exit_code"] == 0
        for change, undo in ((lambda: lab.conf.chmod(0o666), lambda: lab.conf.chmod(0o644)),
                             (lambda: os.chown(lab.conf, 1000, 1000),
                              lambda: os.chown(lab.conf, 0, 0))):
            change()
            with pytest.raises(PrivilegeRefused, match="config file"):
                commands.vg_report(SECTION, timeout_s=30)
            undo()
            assert commands.vg_report(SECTION, timeout_s=30)["exit_code"] == 0
    finally:
        close_lab()


def test_a_daemon_started_with_a_config_dir_serves_nothing(tmp_path):
    lab = make_lab(tmp_path / "lab")
    forget_helper()
    command = f"{root_helper()} privsep-helper --config-file {lab.conf} " \
              f"--config-dir {shlex.quote(str(tmp_path))}"
    cfg.CONF.set_override("helper_command", command, group=CONFIG_SECTION)
    try:
        with pytest.raises(PrivilegeRefused, match="--config-dir"):
            commands.vg_report(SECTION, timeout_s=30)
    finally:
        cfg.CONF.clear_override("helper_command", group=CONFIG_SECTION)
        close_lab()


def test_the_helper_command_of_the_backends_file_starts_the_daemon_as_written(tmp_path):
    """A standalone driver takes ``[lvm_driver_privileged] helper_command`` from its
    config file as written (what a sudoers rule pinning privsep-helper's argv needs),
    before the ``lvm_root_helper`` prefix."""
    lab = make_lab(tmp_path / "lab")
    forget_helper()
    written = f"{root_helper()} privsep-helper --config-file {lab.conf}"
    with open(lab.conf, "a") as conf:
        conf.write(f"\n[{CONFIG_SECTION}]\nhelper_command = {written}\n")
    try:
        use_helper("false", [str(lab.conf)])  # the prefix alone would start nothing
        assert cfg.CONF[CONFIG_SECTION].helper_command == written
        assert commands.vg_report(SECTION, timeout_s=30)["exit_code"] == 0
    finally:
        close_lab()


@pytest.mark.parametrize("euid, backend_kind, privilege, expected", [
    (0, "real", "auto", "direct"), (1000, "real", "auto", "privsep"),
    (1000, "simulator", "auto", "direct"), (0, "real", "privsep", "privsep"),
    (1000, "real", "direct", "direct")])
def test_auto_is_direct_as_root_or_on_the_simulator(monkeypatch, euid, backend_kind,
                                                     privilege, expected):
    from driver_kit import load_backend_config
    from lvm_driver import backends
    from lvm_driver.driver import LVM_OPTS
    monkeypatch.setattr(backends.os, "geteuid", lambda: euid)
    conf = load_backend_config(extra_opts=LVM_OPTS, overrides={
        "lvm_backend": backend_kind, "lvm_privilege": privilege})
    assert backends.privilege_of(conf) == expected
