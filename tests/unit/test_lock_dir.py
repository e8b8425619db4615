"""The default lock_path (a directory in the shared temporary directory) is used only
when it is the service user's own: made private when missing, refused with one line
when another user owns it, others may write to it, it is a symlink or holds one."""

from __future__ import annotations

import os
import tempfile

import pytest

from driver_kit import load_backend_config
from driver_kit.exceptions import ConfigError
from tests.unit.memdriver import MemoryDriver

NOBODY = 65534


@pytest.fixture
def default_locks(tmp_path, monkeypatch):
    """The default lock_path, in a temporary directory of this test's own."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path / "driver_kit-locks"


def _driver() -> MemoryDriver:
    config = load_backend_config(overrides={"max_over_subscription_ratio": "2.0"})
    return MemoryDriver(config, total_gb=10)


def _refused(driver: MemoryDriver, why: str) -> str:
    with pytest.raises(ConfigError) as refused:
        driver.create_volume("a", 1)
    message = str(refused.value)
    assert "\n" not in message and "lock_path" in message and why in message
    assert driver.volumes == {}
    return message


def test_a_missing_default_is_made_the_services_own(default_locks):
    driver = _driver()
    assert driver.configuration.lock_path == str(default_locks)
    driver.create_volume("a", 1)
    info = os.lstat(default_locks)
    assert (info.st_uid, info.st_mode & 0o777) == (os.geteuid(), 0o700)


def test_a_default_another_user_made_with_symlinks_in_it_is_refused(default_locks, tmp_path):
    default_locks.mkdir()
    planted = tmp_path / "planted"  # where the attacker's symlink sends the lock file
    driver = _driver()
    (default_locks / os.path.basename(driver.lock_file())).symlink_to(planted)
    os.chmod(default_locks, 0o777)
    os.chown(default_locks, NOBODY, NOBODY)
    message = _refused(driver, f"owned by uid {NOBODY}")
    assert str(default_locks) in message
    assert not planted.exists()


def test_a_default_others_may_write_to_is_refused(default_locks):
    default_locks.mkdir()
    os.chmod(default_locks, 0o777)
    _refused(_driver(), "writable by group or others")


def test_a_default_that_is_a_symlink_is_refused(default_locks, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    default_locks.symlink_to(elsewhere)
    os.lchown(default_locks, NOBODY, NOBODY)
    _refused(_driver(), "is a symlink")
    assert list(elsewhere.iterdir()) == []


def test_a_default_holding_a_symlink_is_refused(default_locks, tmp_path):
    default_locks.mkdir(mode=0o700)
    driver = _driver()
    link = default_locks / os.path.basename(driver.lock_file())
    link.symlink_to(tmp_path / "planted")
    os.lchown(link, NOBODY, NOBODY)
    _refused(driver, "symlink")
    assert not (tmp_path / "planted").exists()


def test_a_lock_path_set_in_the_configuration_is_the_operators_choice(tmp_path):
    chosen = tmp_path / "shared-locks"
    chosen.mkdir()
    os.chmod(chosen, 0o775)  # e.g. shared by a group of service users
    driver = MemoryDriver(load_backend_config(overrides={
        "lock_path": str(chosen), "max_over_subscription_ratio": "2.0"}), total_gb=10)
    driver.create_volume("a", 1)
    assert os.path.exists(driver.lock_file())
