"""Reservations on a real etcd survive its outages and host failures, and hold the cap.

Host processes (each its own lock_path and etcd session) create into one shared
backend file near its 20 GiB cap, with 3 s leases. What a user would notice:
GiB over the cap (0 everywhere but a host paused past its lease, which is
bounded by that host's one request), creates going through again by themselves
within one lease after etcd comes back, and every host getting its creates in.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import etcd3gw
import pytest

from contrib.shared_pool_driver import DiskGroupArray, SharedPoolDriver
from driver_kit import CapacityExceeded, GiB, load_backend_config
from driver_kit.exceptions import CoordinationError
from tests.unit.etcd_hosts import (LEASE_S, etcd_server, make_driver, outcomes,  # noqa: F401
                                   over_commit_gb, requires_etcd, start_hosts, stop_hosts,
                                   try_create, volumes, wait_for)

pytestmark = requires_etcd


def _reservation_keys(server) -> list[bytes]:
    client = etcd3gw.client(port=int(server.client.rsplit(":", 1)[1]), timeout=2)
    return [meta["key"] for _, meta in client.get_prefix("/driver_kit/capacity/")
            if b"/reservations/" in meta["key"]]


def _warm(workdir, url):
    """One create from the test process, so the capacity group exists and has settled."""
    make_driver(workdir, "warm", url, delay_s=0).create_volume("warm", 1)


def test_etcd_stopped_mid_command_and_restarted_with_its_data_recovers_within_one_lease(
        etcd_server, tmp_path):
    # the old stuck lock: with tooz, no host created anything again after this
    server, url = etcd_server
    (tmp_path / "vols").write_text("base 14\n")
    _warm(tmp_path, url)
    flag = str(tmp_path / "holding")
    holder, queue = start_hosts(tmp_path, url, 1, [1], delay_s=1.5, flag=flag, linger_s=60)
    try:
        wait_for(flag, holder[0])
        server.stop()  # etcd gone while the command runs; the command finishes meanwhile
        assert outcomes(holder, queue, 1)[0][1] == "ok"
        server.start()  # the same data: the holder's reservation is still there
        restarted = time.monotonic()
        hosts, answers = start_hosts(tmp_path, url, 4, [1], delay_s=0, prefix="after")
        try:
            results = outcomes(hosts, answers, 4)
        finally:
            stop_hosts(hosts)
        took = max(t for _, _, t in results) - restarted
        print(f"4 hosts created again {took:.2f} s after etcd came back (lease {LEASE_S} s)")
        assert [r for _, r, _ in results] == ["ok"] * 4
        assert took < LEASE_S
        assert over_commit_gb(tmp_path) == 0 and sum(volumes(tmp_path).values()) == 20
        deadline = time.monotonic() + LEASE_S  # the holder's own heartbeat deletes it
        while _reservation_keys(server):
            assert time.monotonic() < deadline, "a finished command's reservation stayed"
            time.sleep(0.1)
    finally:
        stop_hosts(holder)


def test_a_command_ending_between_the_two_reads_does_not_refuse_a_request_that_fits(
        etcd_server, tmp_path):
    # the race the restart test met once in CI, made certain: another host's
    # volume appears after its reservation was counted and before the facts are read
    server, url = etcd_server
    (tmp_path / "vols").write_text("base 17\n")
    _warm(tmp_path, url)  # 18 GiB
    flag = str(tmp_path / "holding")
    holder, _ = start_hosts(tmp_path, url, 1, [1], delay_s=60, flag=flag)
    try:
        wait_for(flag, holder[0])  # its 1 GiB reserved: 19 GiB with it, 1 left
        driver = make_driver(tmp_path, "late", url, delay_s=0)
        read_facts, facts_reads = driver._read_pools_or_raise, []

        def facts_after_the_holders_command_ended():
            if len(facts_reads) == 1:  # after the group's read: the loop's first read
                with open(tmp_path / "vols", "a") as vols:
                    vols.write("h0-0 1\n")
            facts_reads.append(1)
            return read_facts()

        driver._read_pools_or_raise = facts_after_the_holders_command_ended
        assert try_create(driver, "late", 1) == "ok"  # 18 + 1 + 1: exactly the cap
        assert len(facts_reads) == 3  # refused on 21 GiB once, then read again
        assert sum(volumes(tmp_path).values()) == 20
        assert try_create(driver, "more", 1) == "refused"
    finally:
        stop_hosts(holder)


def test_a_host_killed_mid_command_holds_its_reservation_until_its_lease_ends(
        etcd_server, tmp_path):
    server, url = etcd_server
    (tmp_path / "vols").write_text("base 17\n")
    _warm(tmp_path, url)
    flag = str(tmp_path / "holding")
    holder, _ = start_hosts(tmp_path, url, 1, [1], delay_s=60, flag=flag)
    try:
        wait_for(flag, holder[0])
        os.kill(holder[0].pid, signal.SIGKILL)
        killed = time.monotonic()
    finally:
        stop_hosts(holder)
    driver = make_driver(tmp_path, "next", url, delay_s=0)
    assert try_create(driver, "next", 2) == "refused"  # the dead host's 1 GiB still counts
    while try_create(driver, "next", 2) != "ok":
        assert time.monotonic() - killed < LEASE_S + 2, "the reservation outlived its lease"
        time.sleep(0.2)
    print(f"the killed host's reservation ended {time.monotonic() - killed:.2f} s after SIGKILL")
    assert "h0-0" not in volumes(tmp_path) and over_commit_gb(tmp_path) == 0


def test_a_host_paused_past_its_lease_over_commits_at_most_its_one_request(
        etcd_server, tmp_path):
    server, url = etcd_server
    (tmp_path / "vols").write_text("base 17\n")
    _warm(tmp_path, url)  # 2 GiB left
    flag = str(tmp_path / "holding")
    paused, queue = start_hosts(tmp_path, url, 1, [2], delay_s=0.5, flag=flag, linger_s=30)
    try:
        wait_for(flag, paused[0])
        os.kill(paused[0].pid, signal.SIGSTOP)  # a long GC or VM pause mid-command
        time.sleep(LEASE_S + 1.5)  # its lease, and the reservation on it, end
        others = make_driver(tmp_path, "other", url, delay_s=0)
        assert try_create(others, "other", 2) == "ok"  # the paused 2 GiB no longer counted
        os.kill(paused[0].pid, signal.SIGCONT)
        assert outcomes(paused, queue, 1)[0][1] == "ok"  # its command was admitted: it stands
    finally:
        os.kill(paused[0].pid, signal.SIGCONT)
        stop_hosts(paused)
    over = over_commit_gb(tmp_path)
    print(f"paused past its lease: {over} GiB over the cap (the paused request: 2 GiB)")
    assert over <= 2
    assert try_create(others, "after", 1) == "refused"  # the backend counts it all again


def test_etcd_restarted_empty_mid_command_over_commits_nothing(etcd_server, tmp_path):
    server, url = etcd_server
    (tmp_path / "vols").write_text("base 16\n")
    _warm(tmp_path, url)
    flag = str(tmp_path / "holding")
    holder, queue = start_hosts(tmp_path, url, 1, [2], delay_s=2.5, flag=flag, linger_s=30)
    try:
        wait_for(flag, holder[0])
        server.stop()
        server.wipe()  # every key and lease lost: a new cluster
        server.start()
        restarted = time.monotonic()
        others = make_driver(tmp_path, "other", url, delay_s=0)
        # the group starts again and settles for one lease, while the holder's heartbeat
        # writes its reservation back under a new lease
        assert try_create(others, "other", 2) == "refused"
        assert time.monotonic() - restarted < 2 * LEASE_S
        assert outcomes(holder, queue, 1)[0][1] == "ok"
    finally:
        stop_hosts(holder)
    assert over_commit_gb(tmp_path) == 0
    assert try_create(others, "fits", 1) == "ok"  # and admissions go on without a restart


def _shared_pool_host(array_dir, section, url, barrier, queue):
    conf = load_backend_config(backend=section, extra_opts=SharedPoolDriver.OPTIONS, overrides={
        "shared_array_dir": array_dir, "shared_capacity_gb": 10,
        "shared_allocation_unit_mb": 1024, "max_over_subscription_ratio": "2.0",
        "lock_path": f"{array_dir}-locks-{section}", "coordination_backend_url": url})
    driver = SharedPoolDriver(conf)
    barrier.wait()
    try:
        driver.create_volume(f"v-{section}", 2)
        queue.put("ok")
    except CapacityExceeded:
        queue.put("refused")
    except Exception as exc:  # the test fails on it
        queue.put(repr(exc))


def test_hosts_naming_one_arrays_section_differently_share_its_reservations(
        etcd_server, tmp_path):
    server, url = etcd_server
    array = DiskGroupArray(str(tmp_path / "array"), capacity_bytes=10 * GiB, unit_bytes=GiB)
    (tmp_path / "array").mkdir()
    array.create("base", pool="fast", size_bytes=18 * GiB, thin=True)
    array.set_faults(delay_s=0.1)  # every array request slow: a real race window
    from tests.unit.etcd_hosts import CTX

    sections = ["array-east", "shared_dg1", "backend3"]
    barrier, queue = CTX.Barrier(len(sections)), CTX.Queue()
    procs = [CTX.Process(target=_shared_pool_host, daemon=True,
                         args=(str(tmp_path / "array"), s, url, barrier, queue))
             for s in sections]
    for proc in procs:
        proc.start()
    try:
        answers = [queue.get(timeout=60) for _ in procs]
    finally:
        stop_hosts(procs)
    provisioned = sum(v["size_bytes"] for v in array.load()["volumes"].values())
    assert sorted(answers) == ["ok", "refused", "refused"], answers
    assert provisioned == 20 * GiB  # the cap reached, never passed


@pytest.mark.parametrize("hosts", [4, 8])
def test_hosts_racing_near_the_cap_never_over_commit(etcd_server, tmp_path, hosts):
    server, url = etcd_server
    (tmp_path / "vols").write_text("base 13\n")
    _warm(tmp_path, url)  # 6 GiB left for hosts * 3 creates of 1 GiB
    procs, queue = start_hosts(tmp_path, url, hosts, [1, 1, 1], delay_s=0.2)
    try:
        results = Counter(r for _, r, _ in outcomes(procs, queue, 3 * hosts, timeout_s=90))
    finally:
        stop_hosts(procs)
    print(f"{hosts} hosts: {dict(results)}; {over_commit_gb(tmp_path)} GiB over")
    assert set(results) <= {"ok", "refused"}, results
    assert over_commit_gb(tmp_path) == 0
    assert 1 <= results["ok"] <= 6


def test_every_host_gets_creates_through_under_steady_load(etcd_server, tmp_path):
    server, url = etcd_server
    (tmp_path / "vols").write_text("")
    _warm(tmp_path, url)
    procs, queue = start_hosts(tmp_path, url, 4, [1] * 12, delay_s=0.05, ratio="1000")
    try:
        results = outcomes(procs, queue, 48, timeout_s=90)
    finally:
        stop_hosts(procs)
    assert {r for _, r, _ in results} == {"ok"}, results
    # while the fastest host made its 12 creates, how many each other host made
    first_done = min(max(t for i, _, t in results if i == host) for host in range(4))
    made = Counter(i for i, _, t in results if t <= first_done)
    print(f"creates per host while the fastest made 12: {dict(made)}")
    assert sorted(made) == [0, 1, 2, 3] and min(made.values()) >= 4  # a third of the fastest


def test_etcd_unreachable_refuses_with_the_cause_and_resumes_by_itself(etcd_server, tmp_path):
    server, url = etcd_server
    (tmp_path / "vols").write_text("base 1\n")
    driver = make_driver(tmp_path, 0, url, delay_s=0)
    driver.create_volume("before", 1)
    server.stop()
    with pytest.raises(CoordinationError, match="ConnectionFailedError") as refused:
        driver.create_volume("during", 1)
    assert server.client.split("//")[1] in str(refused.value)
    assert "during" not in volumes(tmp_path)
    assert driver.get_volume_stats(refresh=True)["pools"]  # stats need no etcd
    server.start()
    driver.create_volume("after", 1)  # the same process, no restart
    assert set(volumes(tmp_path)) == {"base", "before", "after"}


def test_etcd_slower_than_its_timeout_refuses_with_the_cause_and_resumes(etcd_server, tmp_path):
    server, url = etcd_server
    (tmp_path / "vols").write_text("base 1\n")
    driver = make_driver(tmp_path, 0, url, delay_s=0)
    driver.create_volume("before", 1)
    os.kill(server.proc.pid, signal.SIGSTOP)  # etcd alive but answering nothing
    try:
        started = time.monotonic()
        with pytest.raises(CoordinationError, match="ConnectionTimeoutError.*timed out"):
            driver.create_volume("during", 1)
        took = time.monotonic() - started
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    print(f"refused {took:.2f} s after asking a frozen etcd (one call may take 1 s)")
    assert took < LEASE_S
    driver.create_volume("after", 1)
    assert set(volumes(tmp_path)) == {"base", "before", "after"}
