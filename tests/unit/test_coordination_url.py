"""Coordination URLs: refused at setup in one line when admission cannot use them, and
never shown with their secrets (no etcd needed: nothing listens where they point)."""

import logging

import pytest

from driver_kit import load_backend_config
from driver_kit.config import KIT_OPTS
from driver_kit.coordination import redact_url
from driver_kit.exceptions import ConfigError, CoordinationError
from tests.unit.test_coordination import SlowFileDriver, _driver, _sizes


@pytest.mark.parametrize("url, shown", [
    ("etcd3+http://cinder:s3cretPW@db:2379/?timeout=3", "etcd3+http://***@db:2379/?timeout=3"),
    ("redis://:s3cretPW@cache:6379?sentinel_password=x&db=1",
     "redis://***@cache:6379?sentinel_password=***&db=1"),
    ("etcd3+https://e:2379?token=abc&cert_key=/k.pem",
     "etcd3+https://e:2379?token=***&cert_key=***"),
    ("zookeeper://zk:2181", "zookeeper://zk:2181"),
])
def test_redacted_urls_keep_where_and_lose_secrets(url, shown):
    assert redact_url(url) == shown


SECRET_URL = "etcd3+http://cinder:s3cretPW@127.0.0.1:9/?timeout=3&password=t0kenPW"


def test_a_coordination_url_never_shows_its_secrets(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    (tmp_path / "vols").write_text("base 1\n")
    with pytest.raises(CoordinationError) as refused:  # nothing listens on port 9
        _driver(tmp_path, 0, SECRET_URL, create_delay_s=0).create_volume("v", 1)
    message = str(refused.value)
    assert "127.0.0.1:9" in message and "ConnectionFailedError" in message  # the cause
    for secret in ("s3cretPW", "t0kenPW"):
        assert secret not in message
        assert not [r for r in caplog.records if secret in r.getMessage()]
    assert _sizes(tmp_path) == {"base": "1"}
    # oslo.config hides it too (--help, logged options), as Cinder does its backend_url
    assert next(o for o in KIT_OPTS if o.name == "coordination_backend_url").secret


@pytest.mark.parametrize("url, why", [
    ("etcd4+http://127.0.0.1:2379", "unknown scheme 'etcd4+http'"),
    ("http://127.0.0.1:2379", "unknown scheme 'http'"),
    ("etcd3+http://127.0.0.1:2379/?timeout=0", "timeout='0' must be a positive"),
    ("etcd3+http://127.0.0.1:2379/?timeout=-5", "timeout='-5' must be a positive"),
    ("etcd3+http://127.0.0.1:2379/?timeout=abc", "timeout='abc' must be a positive"),
    ("etcd3+http://u:s3cretPW@127.0.0.1:2379/?timeout=0", "timeout='0'"),
])
def test_setup_refuses_a_url_admission_cannot_use_in_one_line(tmp_path, url, why):
    with pytest.raises(ConfigError) as refused:
        _driver(tmp_path, 0, url)
    message = str(refused.value)
    assert why in message and "\n" not in message and "s3cretPW" not in message


def test_setup_refuses_a_lease_shorter_than_the_backend_command_timeout(tmp_path):
    class TimedDriver(SlowFileDriver):
        def backend_command_timeout_s(self):
            return 120.0

    overrides = {"lock_path": str(tmp_path / "locks"),
                 "coordination_backend_url": "etcd3+http://127.0.0.1:2379/?timeout=30"}
    with pytest.raises(ConfigError, match="lease .timeout=30 s. is shorter than the backend "
                                          "command timeout .120 s.*timeout=120 or more"):
        TimedDriver(load_backend_config(overrides=overrides), str(tmp_path / "vols"))
    for url in ("etcd3+http://127.0.0.1:2379/?timeout=120", "etcd3+http://127.0.0.1:2379"):
        overrides["coordination_backend_url"] = url  # no timeout: the lease fits the command
        driver = TimedDriver(load_backend_config(overrides=overrides), str(tmp_path / "vols"))
        assert driver._reservations.settings.lease_s == 120  # and no I/O was done


