"""Admission across hosts on a real etcd: separate processes, each with its own lock_path.

Each "host" is a process with its OWN lock directory, so file locks cannot help;
they create into one shared backend file near the cap. Without a coordination
URL they over-commit; with etcd reservations they never do. etcd stopped
refuses creates naming the URL (its secrets redacted); a lease gone right
before the command refuses it and runs nothing; closing a session whose etcd
is gone returns within its bound; reservations read from etcd are checked.
"""

import json
import logging
import multiprocessing
import os
import shutil
import threading
import time
from urllib.parse import urlsplit

import etcd3gw
import pytest
from etcd3gw.lease import Lease

from driver_kit import CapacityExceeded, GiB, load_backend_config
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


def test_etcd_stopped_refuses_creates_naming_the_url_and_stats_work(etcd, tmp_path):
    url, proc = etcd
    (tmp_path / "vols").write_text("base 1\n")
    driver = _driver(tmp_path, 0, url, create_delay_s=0)
    driver.create_volume("before", 1)
    proc.kill()
    proc.wait()
    with pytest.raises(CoordinationError, match=url.split("/?")[0].split("+", 1)[1]) as refused:
        driver.create_volume("during", 1)
    assert "ConnectionFailedError" in str(refused.value)  # the cause, never an empty text
    assert "during" not in (tmp_path / "vols").read_text()
    assert driver.get_volume_stats(refresh=True)["pools"]


def test_stopping_a_session_whose_etcd_is_gone_returns_within_its_bound(etcd, tmp_path, caplog):
    url, proc = etcd
    (tmp_path / "vols").write_text("base 1\n")
    _driver(tmp_path, 0, url, create_delay_s=0).create_volume("v", 1)  # starts the session
    caplog.set_level(logging.WARNING, logger="driver_kit.etcd_session")
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while not any("heartbeat" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "no failed heartbeat logged"
        time.sleep(0.1)
    heartbeats = [t for t in threading.enumerate() if t.name == "driver_kit-etcd-heartbeat"]
    started = time.monotonic()
    assert stop_coordinators(url, timeout_s=2) == []  # given back (etcd gone: nothing to do)
    assert time.monotonic() - started < 3
    for thread in heartbeats:
        thread.join(3)
        assert not thread.is_alive(), "the heartbeat kept beating after the stop"


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan"), float("inf"), "3", True])
def test_stop_coordinators_refuses_a_bad_timeout_and_stops_nothing(timeout_s, monkeypatch):
    from driver_kit import coordination

    stopped = []
    fake = type("Coordinator", (), {"stop": lambda self: stopped.append(self)})()
    monkeypatch.setitem(coordination._COORDINATORS, "etcd3+http://x", fake)
    with pytest.raises(ValueError, match="timeout_s"):
        stop_coordinators(timeout_s=timeout_s)
    assert stopped == [] and coordination._COORDINATORS["etcd3+http://x"] is fake


def _sizes(tmp_path):
    return dict(line.split() for line in (tmp_path / "vols").read_text().splitlines()
                if line.strip())


def _revoke_every_lease(url):
    """End every lease on the etcd at ``url``, as an expiry (or a paused host) would."""
    where = urlsplit(url.split("+", 1)[1])
    client = etcd3gw.client(host=where.hostname, port=where.port)
    leases = client.post(client.get_url("/lease/leases"), json={}).get("leases", [])
    assert leases, "the host's lease should exist"
    for lease in leases:
        Lease(int(lease["ID"]), client).revoke()


@pytest.mark.parametrize("operation", ["create", "extend"])
def test_a_lease_gone_right_before_the_command_refuses_it_and_changes_nothing(
        etcd, tmp_path, operation, monkeypatch):
    url, _ = etcd
    (tmp_path / "vols").write_text("base 1\n")
    driver = _driver(tmp_path, 0, url, create_delay_s=0)
    driver.backend_extend_volume = lambda name, size: (tmp_path / "vols").write_text(
        "".join(f"{k} {size if k == name else v}\n" for k, v in _sizes(tmp_path).items()))
    driver.create_volume("v", 1)
    session = driver._reservations.session
    hold = session.hold
    monkeypatch.setattr(session, "hold", lambda r: (hold(r), _revoke_every_lease(url)))
    with pytest.raises(CoordinationError, match="lease ended before the command"):
        if operation == "create":
            driver.create_volume("late", 1)
        else:
            driver.extend_volume("v", 3)
    assert _sizes(tmp_path) == {"base": "1", "v": "1"}
    monkeypatch.setattr(session, "hold", hold)
    # a new lease is granted: the next requests go through in the same process
    driver.extend_volume("v", 2)
    driver.create_volume("after", 1)
    assert _sizes(tmp_path) == {"base": "1", "v": "2", "after": "1"}
    assert session.pending() == 0  # every reservation deleted


def _put_reservation(url, identity, key, value):
    from driver_kit.reservations import group_directory

    where = urlsplit(url.split("+", 1)[1])
    client = etcd3gw.client(host=where.hostname, port=where.port)
    client.put(f"{group_directory(identity)}reservations/{key}", value)


def test_a_reservation_from_etcd_is_checked_before_it_is_counted_or_reaches_the_backend(
        etcd, tmp_path):
    url, _ = etcd
    (tmp_path / "vols").write_text("base 16\n")
    driver = _driver(tmp_path, 0, url, create_delay_s=0)
    driver.create_volume("v", 1)
    asked = []
    find = driver.backend_find_volume
    driver.backend_find_volume = lambda name: asked.append(name) or find(name)
    identity = "SlowFileDriver#mem"
    # a name the backend would refuse is never passed to it, and stays counted
    _put_reservation(url, identity, "hostile", json.dumps(
        {"name": "--all; rm", "kind": "volume", "size_bytes": 2 * GiB, "gb": 2}))
    with pytest.raises(CapacityExceeded, match="in flight 2 GiB"):
        driver.create_volume("w", 2)
    assert "--all; rm" not in asked
    # one that cannot be read refuses the admission: what it holds is unknown
    _put_reservation(url, identity, "garbled", "{not json")
    with pytest.raises(CoordinationError, match="cannot be read"):
        driver.create_volume("x", 1)
    assert _sizes(tmp_path) == {"base": "16", "v": "1"}


def test_every_operation_of_a_real_driver_settles_its_reservation(etcd, tmp_path):
    from contrib.shared_pool_driver import SharedPoolDriver

    url, _ = etcd
    conf = load_backend_config(backend="arr", extra_opts=SharedPoolDriver.OPTIONS, overrides={
        "shared_array_dir": str(tmp_path / "array"), "shared_capacity_gb": 10,
        "shared_allocation_unit_mb": 1024, "lock_path": str(tmp_path / "locks"),
        "coordination_backend_url": url})
    driver = SharedPoolDriver(conf)
    driver.do_setup()
    session = driver._reservations.session
    steps = [lambda: driver.create_volume("v", 1), lambda: driver.extend_volume("v", 2),
             lambda: driver.create_snapshot("s", "v"),
             lambda: driver.create_volume_from_snapshot("c1", "s", 3),
             lambda: driver.create_cloned_volume("c2", "v"),
             lambda: driver.create_volume("thick", 1, extra_specs={"provisioning:type": "thick"})]
    for step in steps:
        step()
        assert session.pending() == 0  # shown by the backend: deleted at once
    sizes = {v["name"]: v["size_bytes"] // GiB for v in driver.array.load()["volumes"].values()}
    assert sizes == {"v": 2, "s": 2, "c1": 3, "c2": 2, "thick": 1}
