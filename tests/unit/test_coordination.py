"""Admission across hosts on a real etcd: separate processes, each with its own lock_path.

Each "host" is a process with its OWN lock directory, so file locks cannot help;
they create into one shared backend file near the cap. Without a coordination
URL they over-commit; with etcd (tooz) they never do. A holder SIGKILLed keeps
nobody out past its lease; etcd stopped refuses creates naming the URL. A lock
lost between the admission read and the backend command (its lease revoked, or
etcd stopped, by a hook run right after the read) refuses the request: nothing
is created or grown.
"""

import logging
import multiprocessing
import os
import shutil
import signal
import threading
import time
from urllib.parse import urlsplit

import etcd3gw
import pytest
from etcd3gw.lease import Lease

from driver_kit import CapacityExceeded, load_backend_config
from driver_kit.exceptions import CoordinationError
from driver_kit.coordination import stop_coordinators
from tests.etcd_server import run_etcd
from tests.unit.test_driver import FileDriver

HOSTS = 3
CTX = multiprocessing.get_context("fork")

pytestmark = pytest.mark.skipif(
    shutil.which("etcd") is None,
    reason="NO REAL ETCD: the etcd binary is missing (apt-get install etcd-server, as "
           "tools/run-tests.sh does as root); the cross-host admission proof did not run")


@pytest.fixture
def etcd(tmp_path):
    """A real etcd on random loopback ports, data in a temp dir; yields (url, process)."""
    with run_etcd(str(tmp_path / "etcd-data")) as (client, proc):
        url = "etcd3+" + client + "/?timeout=3"
        yield url, proc
        stop_coordinators(url, timeout_s=3)  # no heartbeat left beating at a stopped etcd


class SlowFileDriver(FileDriver):
    """A shared-file backend whose create takes a while, so a race window is real."""

    create_delay_s = 0.5

    def backend_create_volume(self, name, size_gb, *, pool_name, thin):
        if os.environ.get("DK_HOLDING"):
            open(os.environ["DK_HOLDING"], "w").close()  # tell the test we hold the lock
        time.sleep(self.create_delay_s)
        super().backend_create_volume(name, size_gb, pool_name=pool_name, thin=thin)


def _driver(tmp_path, index, url, create_delay_s=0.5):
    overrides = {"lock_path": str(tmp_path / f"locks-{index}"),  # each host its own
                 "max_over_subscription_ratio": "2.0", "coordination_backend_url": url}
    driver = SlowFileDriver(load_backend_config(overrides=overrides), str(tmp_path / "vols"))
    driver.create_delay_s = create_delay_s
    return driver


def _host(tmp_path, index, url, barrier, queue):
    driver = _driver(tmp_path, index, url)
    barrier.wait()
    try:
        driver.create_volume(f"h{index}", 2)
        queue.put("ok")
    except CapacityExceeded:
        queue.put("refused")
    except Exception as exc:  # reported to the test, which fails on it
        queue.put(repr(exc))


def _race(tmp_path, url):
    """HOSTS processes create 2 GiB each at once with 18 of a 20 GiB cap taken; GiB over."""
    (tmp_path / "vols").write_text("base 18\n")
    barrier, queue = CTX.Barrier(HOSTS), CTX.Queue()
    procs = [CTX.Process(target=_host, args=(tmp_path, i, url, barrier, queue))
             for i in range(HOSTS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    outcomes = [queue.get(timeout=5) for _ in procs]
    assert set(outcomes) <= {"ok", "refused"}, outcomes
    total = sum(int(line.split()[1]) for line in (tmp_path / "vols").read_text().split("\n")
                if line.strip())
    return max(0, total - 20)


def test_hosts_over_commit_with_local_locks_and_never_with_etcd(etcd, tmp_path):
    url, _ = etcd
    local = tmp_path / "local"
    local.mkdir()
    over_local = _race(local, None)
    shared = tmp_path / "etcd"
    shared.mkdir()
    over_etcd = _race(shared, url)
    print(f"over-commit GiB: local locks {over_local}, etcd {over_etcd}")
    assert over_local > 0  # the race is real: each host's file lock is its own
    assert over_etcd == 0


def _holder(tmp_path, url, flag):
    os.environ["DK_HOLDING"] = flag
    _driver(tmp_path, 0, url, create_delay_s=60).create_volume("killed", 1)


def test_a_killed_holder_frees_the_lock_within_its_lease(etcd, tmp_path):
    url, _ = etcd
    (tmp_path / "vols").write_text("base 18\n")
    flag = str(tmp_path / "holding")
    holder = CTX.Process(target=_holder, args=(tmp_path, url, flag))
    holder.start()
    while not os.path.exists(flag):
        assert holder.is_alive()
        time.sleep(0.05)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join()
    # the next host waits out the 3 s lease, reads afresh (nothing of the dead one
    # was made) and gets the whole 2 GiB left
    driver = _driver(tmp_path, 1, url, create_delay_s=0)
    driver.create_volume("next", 2)
    assert "killed" not in (tmp_path / "vols").read_text()
    with pytest.raises(CapacityExceeded):
        driver.create_volume("over", 1)


def test_etcd_stopped_refuses_creates_naming_the_url_and_stats_work(etcd, tmp_path):
    url, proc = etcd
    (tmp_path / "vols").write_text("base 1\n")
    driver = _driver(tmp_path, 0, url, create_delay_s=0)
    driver.create_volume("before", 1)
    proc.kill()
    proc.wait()
    with pytest.raises(CoordinationError, match=url.split("/?")[0].split("+", 1)[1]):
        driver.create_volume("during", 1)
    assert "during" not in (tmp_path / "vols").read_text()
    assert driver.get_volume_stats(refresh=True)["pools"]


def _wait_for_a_failed_heartbeat(caplog, within_s=60.0):
    """Until tooz logs its first heartbeat retry (it then retries for ever)."""
    deadline = time.monotonic() + within_s
    while not any("heartbeat" in r.getMessage() and r.name.startswith("tooz")
                  for r in caplog.records):
        assert time.monotonic() < deadline, "no failed heartbeat logged"
        time.sleep(0.1)


def test_stopping_a_coordinator_whose_etcd_is_gone_returns_within_its_bound(
        etcd, tmp_path, caplog):
    url, proc = etcd
    (tmp_path / "vols").write_text("base 1\n")
    _driver(tmp_path, 0, url, create_delay_s=0).create_volume("v", 1)  # starts the coordinator
    caplog.set_level(logging.WARNING, logger="tooz")
    proc.kill()
    proc.wait()
    _wait_for_a_failed_heartbeat(caplog)
    outcome = []
    stopper = threading.Thread(target=lambda: outcome.append(stop_coordinators(url, timeout_s=2)),
                               daemon=True)
    started = time.monotonic()
    stopper.start()
    stopper.join(30)
    assert not stopper.is_alive(), "stop_coordinators did not return (tooz's stop waits for ever)"
    assert outcome == [[url]]  # left behind, and said so
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan"), float("inf"), "3", True])
def test_stop_coordinators_refuses_a_bad_timeout_and_stops_nothing(timeout_s, monkeypatch):
    from driver_kit import coordination

    stopped = []
    fake = type("Coordinator", (), {"stop": lambda self: stopped.append(self)})()
    monkeypatch.setitem(coordination._COORDINATORS, "etcd3+http://x", fake)
    with pytest.raises(ValueError, match="timeout_s"):
        stop_coordinators(timeout_s=timeout_s)
    assert stopped == [] and coordination._COORDINATORS["etcd3+http://x"] is fake


class HookedDriver(SlowFileDriver):
    """Runs ``after_read`` once, right after the next admission read (a test hook)."""

    after_read = None

    def backend_read_pools(self):
        pools = super().backend_read_pools()
        hook, self.after_read = self.after_read, None
        if hook is not None:
            hook()
        return pools

    def backend_extend_volume(self, name, new_size_gb):
        sizes = dict(self._load(), **{name: str(new_size_gb)})
        with open(self.path, "w") as f:
            f.writelines(f"{k} {v}\n" for k, v in sizes.items())


def _revoke_lock_leases(url):
    """End the lease of every tooz lock on the etcd at ``url``, as an expiry would."""
    where = urlsplit(url.split("+", 1)[1])
    client = etcd3gw.client(host=where.hostname, port=where.port)
    held = client.get_prefix("/tooz/locks")
    assert held, "the admission lock should be held during the read"
    for _, meta in held:
        Lease(int(meta["lease"]), client).revoke()


def _hooked(tmp_path, url):
    (tmp_path / "vols").write_text("base 1\n")
    overrides = {"lock_path": str(tmp_path / "locks"), "max_over_subscription_ratio": "2.0",
                 "coordination_backend_url": url}
    driver = HookedDriver(load_backend_config(overrides=overrides), str(tmp_path / "vols"))
    driver.create_delay_s = 0
    return driver


def _sizes(tmp_path):
    return dict(line.split() for line in (tmp_path / "vols").read_text().splitlines()
                if line.strip())


@pytest.mark.parametrize("operation", ["create", "extend"])
def test_a_lease_lost_after_the_read_refuses_the_command_and_changes_nothing(
        etcd, tmp_path, operation):
    url, _ = etcd
    driver = _hooked(tmp_path, url)
    driver.create_volume("v", 1)
    driver.after_read = lambda: _revoke_lock_leases(url)
    with pytest.raises(CoordinationError, match="lost"):
        if operation == "create":
            driver.create_volume("late", 1)
        else:
            driver.extend_volume("v", 3)
    assert _sizes(tmp_path) == {"base": "1", "v": "1"}
    # the lost lock is let go: the next request takes it anew and reads afresh
    driver.extend_volume("v", 2)
    driver.create_volume("after", 1)
    assert _sizes(tmp_path) == {"base": "1", "v": "2", "after": "1"}


def test_etcd_stopped_after_the_read_refuses_naming_the_url_and_creates_nothing(
        etcd, tmp_path):
    url, proc = etcd
    driver = _hooked(tmp_path, url)

    def stop_etcd():
        proc.kill()
        proc.wait()

    driver.after_read = stop_etcd
    with pytest.raises(CoordinationError, match=urlsplit(url.split("+", 1)[1]).netloc):
        driver.create_volume("during", 1)
    assert _sizes(tmp_path) == {"base": "1"}
    assert driver.get_volume_stats(refresh=True)["pools"]
