import dataclasses
import multiprocessing
import os
import threading

import pytest

from driver_kit import (AlreadyExists, CapacityExceeded, GiB, InvalidInput, InvalidSize,
                        VolumeNotFound, load_backend_config, validate_stats)
from driver_kit.exceptions import BackendUnavailable
from driver_kit.units import MAX_VOLUME_GB

from tests.unit.memdriver import MemoryDriver


def make(tmp_path, total_gb=100, **overrides):
    overrides.setdefault("lock_path", str(tmp_path / "locks"))
    overrides.setdefault("max_over_subscription_ratio", "2.0")
    return MemoryDriver(load_backend_config(overrides=overrides), total_gb=total_gb)


def pool(driver):
    return driver.get_volume_stats(refresh=True)["pools"][0]


def test_minimal_driver_gets_a_compliant_report(tmp_path):
    driver = make(tmp_path)
    stats = driver.get_volume_stats()
    assert validate_stats(stats) == []
    assert stats["pools"][0]["provisioned_capacity_gb"] == 0
    assert stats["pools"][0]["max_volume_size_gb"] == 200


def test_minimal_driver_gets_enforcement(tmp_path):
    driver = make(tmp_path)
    driver.create_volume("a", 150)
    with pytest.raises(CapacityExceeded) as refused:
        driver.create_volume("b", 51)
    assert "provisioned + in_flight + requested <= (total - reserved) * ratio" \
        in str(refused.value)
    assert refused.value.decision.failed_checks[0].shortfall_gb == 1
    assert "b" not in driver.volumes
    driver.create_volume("b", 50)
    assert pool(driver)["provisioned_capacity_gb"] == 200


def test_extend_is_enforced_and_refusal_changes_nothing(tmp_path):
    driver = make(tmp_path)
    driver.create_volume("a", 100)
    with pytest.raises(CapacityExceeded):
        driver.extend_volume("a", 201)
    assert driver.volumes["a"] == 100
    assert driver.extend_volume("a", 200).size_gb == 200
    with pytest.raises(InvalidSize, match="must exceed"):
        driver.extend_volume("a", 200)


@pytest.mark.parametrize("size", [0, -1, 1.5, float("nan"), "10", True])
def test_bad_sizes(tmp_path, size):
    with pytest.raises(InvalidSize):
        make(tmp_path).create_volume("a", size)


@pytest.mark.parametrize("size", [10 ** 400, MAX_VOLUME_GB + 1, 1e300])
def test_sizes_past_lvm_limit_are_one_line_refusals(tmp_path, size):
    driver = make(tmp_path)
    driver.create_volume("a", 1)
    for attempt in (lambda: driver.create_volume("b", size),
                    lambda: driver.extend_volume("a", size)):
        with pytest.raises(InvalidSize) as refused:
            attempt()
        assert "at most 8589934592 GiB (8 EiB" in str(refused.value)
        assert "\n" not in str(refused.value) and len(str(refused.value)) < 200
    assert driver.volumes == {"a": 1}


def test_the_largest_size_reaches_admission(tmp_path):
    with pytest.raises(CapacityExceeded):  # a number admission can weigh, no overflow
        make(tmp_path).create_volume("a", MAX_VOLUME_GB)


@pytest.mark.parametrize("name", ["", "-rf", "a b", "a;b", "$(x)", None, "a/b"])
def test_bad_names(tmp_path, name):
    with pytest.raises(InvalidInput):
        make(tmp_path).create_volume(name, 1)


def test_duplicate_unknown_and_idempotent_delete(tmp_path):
    driver = make(tmp_path)
    driver.create_volume("a", 1)
    with pytest.raises(AlreadyExists):
        driver.create_volume("a", 1)
    with pytest.raises(VolumeNotFound):
        driver.extend_volume("nope", 2)
    driver.delete_volume("a")
    driver.delete_volume("a")
    assert pool(driver)["provisioned_capacity_gb"] == 0


def test_reserved_percentage_and_standard_calculation(tmp_path):
    driver = make(tmp_path, reserved_percentage=10, over_provisioning_calculation="standard")
    driver.create_volume("a", 180)  # (100 - 10) * 2
    with pytest.raises(CapacityExceeded):
        driver.create_volume("b", 1)


def test_unknown_provisioning_type(tmp_path):
    driver = make(tmp_path)
    with pytest.raises(InvalidInput, match="thick"):
        driver.create_volume("a", 1, extra_specs={"provisioning:type": "thick"})
    with pytest.raises(InvalidInput, match="'thin' or 'thick'"):
        driver.create_volume("a", 1, extra_specs={"provisioning:type": "fat"})


def test_fail_closed_when_backend_cannot_be_read(tmp_path):
    driver = make(tmp_path)
    pool(driver)
    driver.broken = True
    down = pool(driver)
    assert down["backend_state"] == "down" and down["free_capacity_gb"] == 0
    assert "array unreachable" in down["down_reason"]
    assert validate_stats(driver.get_volume_stats()) == []
    with pytest.raises(BackendUnavailable):
        driver.create_volume("a", 1)


def test_refresh_false_is_served_from_cache(tmp_path):
    driver = make(tmp_path)
    first = driver.get_volume_stats()
    driver.broken = True
    assert driver.get_volume_stats() is first


def test_notifications(tmp_path):
    sent = []
    driver = MemoryDriver(load_backend_config(overrides={
        "lock_path": str(tmp_path), "max_over_subscription_ratio": "2.0",
        "capacity_warning_provisioned_percent": 50}), notifier=lambda e, p: sent.append((e, p)))
    driver.create_volume("a", 101)
    pool(driver)
    assert sent[-1][0] == "capacity.provisioned_over_limit"
    assert sent[-1][1]["pool_name"] == "mem" and sent[-1][1]["provisioned_capacity_gb"] == 101


def test_threads_never_admit_past_the_cap(tmp_path):
    driver = make(tmp_path, total_gb=10)  # cap 20 GiB
    results = []

    def create(i):
        try:
            driver.create_volume(f"v{i}", 3)
            results.append(True)
        except CapacityExceeded:
            results.append(False)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 6
    assert sum(driver.volumes.values()) == 18


class FileDriver(MemoryDriver):
    """Memory driver whose volumes live in a shared file, so processes race for real."""

    def __init__(self, conf, path):
        super().__init__(conf, total_gb=10)
        self.path = path

    def _load(self):
        with open(self.path) as f:
            return dict(line.split() for line in f if line.strip())

    def backend_read_pools(self):
        self.volumes = {k: int(v) for k, v in self._load().items()}
        return super().backend_read_pools()

    def backend_find_volume(self, name):
        self.volumes = {k: int(v) for k, v in self._load().items()}
        return super().backend_find_volume(name)

    def backend_create_volume(self, name, size_gb, *, pool_name, thin):
        with open(self.path, "a") as f:
            f.write(f"{name} {size_gb}\n")


def _worker(lock_path, path, index, queue):
    conf = load_backend_config(overrides={"lock_path": lock_path,
                                          "max_over_subscription_ratio": "2.0"})
    driver = FileDriver(conf, path)
    admitted = 0
    for j in range(4):
        try:
            driver.create_volume(f"p{index}-{j}", 1)
            admitted += 1
        except CapacityExceeded:
            pass
    queue.put(admitted)


def test_processes_never_admit_past_the_cap(tmp_path):
    path = str(tmp_path / "volumes")
    (tmp_path / "volumes").write_text("base 15\n")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "locks"), path, i, queue))
             for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    admitted = sum(queue.get() for _ in procs)
    assert admitted == 5  # cap 20, 15 taken
    total = sum(int(line.split()[1]) for line in
                (tmp_path / "volumes").read_text().splitlines())
    assert total == 20
    assert os.listdir(tmp_path / "locks")  # lock file is there, and free again:
    assert make(tmp_path).create_volume("after", 1)


def test_two_instances_in_one_process_exclude_each_other(tmp_path):
    """fcntl locks are per process: instances must share the in-process lock too."""
    first, second = make(tmp_path), make(tmp_path)
    second.volumes = first.volumes  # one backend seen by two driver instances
    entered, release = threading.Event(), threading.Event()
    original = first.backend_create_volume

    def slow_create(name, size_gb, *, pool_name, thin):
        entered.set()
        release.wait(5)
        original(name, size_gb, pool_name=pool_name, thin=thin)

    first.backend_create_volume = slow_create
    racer = threading.Thread(target=first.create_volume, args=("a", 150))
    racer.start()
    entered.wait(5)
    outcome = []
    blocked = threading.Thread(target=lambda: outcome.append(
        pytest.raises(CapacityExceeded, second.create_volume, "b", 100)))
    blocked.start()
    blocked.join(0.5)
    assert blocked.is_alive()  # waiting for the first instance's admission
    release.set()
    racer.join(5)
    blocked.join(5)
    assert outcome and sorted(first.volumes) == ["a"]


@pytest.mark.parametrize("first_gb, second_gb, second_volumes, size, admitted", [
    # the first instance's pool is small: its facts and claim would refuse
    (10, 100, {}, 190, True),
    # the second instance's own pool is full: the first's facts would admit
    (100, 10, {"old": 20}, 1, False),
], ids=["would-wrongly-refuse", "would-wrongly-admit"])
def test_queued_instances_never_share_each_others_fresh_read(
        tmp_path, first_gb, second_gb, second_volumes, size, admitted):
    """Same lock file, different driver instances: the handed-on lock keeps no facts.

    The second instance queues while the first holds the lock, so the external
    lock is handed on; it must still read its own backend, with no claims of
    the first's counted against it.
    """
    first, second = make(tmp_path, total_gb=first_gb), make(tmp_path, total_gb=second_gb)
    assert first.lock_file() == second.lock_file()
    second.volumes.update(second_volumes)
    reads = []
    original_read = second.backend_read_pools
    second.backend_read_pools = lambda: reads.append(1) or original_read()
    entered, release = threading.Event(), threading.Event()
    original_create = first.backend_create_volume

    def slow_create(name, size_gb, *, pool_name, thin):
        entered.set()
        release.wait(5)
        original_create(name, size_gb, pool_name=pool_name, thin=thin)

    first.backend_create_volume = slow_create
    racer = threading.Thread(target=first.create_volume, args=("a", 15))
    racer.start()
    assert entered.wait(5)
    outcome = []

    def queued():
        try:
            second.create_volume("b", size)
            outcome.append(True)
        except CapacityExceeded:
            outcome.append(False)

    waiter = threading.Thread(target=queued)
    waiter.start()
    state = first._gate._state(first.configuration.backend)
    for _ in range(500):  # until the second request waits for the lock
        if state.waiting:
            break
        waiter.join(0.01)
    assert state.waiting == 1 and not reads
    release.set()
    racer.join(5)
    waiter.join(5)
    assert first.volumes == {"a": 15}
    assert outcome == [admitted] and reads == [1]
    assert ("b" in second.volumes) is admitted


def test_provisioned_notification_uses_the_cinder_cap(tmp_path):
    sent = []
    driver = MemoryDriver(load_backend_config(overrides={
        "lock_path": str(tmp_path), "max_over_subscription_ratio": "2.0",
        "reserved_percentage": 29, "capacity_warning_provisioned_percent": 50}),
        notifier=lambda e, p: sent.append((e, p)))
    # Cinder reserves floor(100.0 * 0.29) = 28 GiB (not 29): cap (100 - 28) * 2 = 144,
    # half is 72 (exact arithmetic would say 71): 72 provisioned is not over
    driver.create_volume("a", 72)
    pool(driver)
    assert not [e for e, _ in sent if e == "capacity.provisioned_over_limit"]
    driver.create_volume("b", 1)
    pool(driver)
    assert sent[-1][0] == "capacity.provisioned_over_limit" and sent[-1][1]["limit_gb"] == 72
    assert sent[-1][1]["provisioned_capacity_gb"] == 73


def test_a_backend_slower_than_stats_timeout_fails_closed(tmp_path):
    driver = make(tmp_path, stats_timeout=0.05)
    driver.delay_s = 5.0  # every read of the array takes 5 s
    stats = driver.get_volume_stats(refresh=True)
    assert validate_stats(stats) == []
    [down] = stats["pools"]
    assert (down["backend_state"], down["free_capacity_gb"]) == ("down", 0)
    assert "did not answer within stats_timeout = 0.05 s" in down["down_reason"]
    driver.delay_s = 0.0
    assert pool(driver)["backend_state"] == "up"


class UnitDriver(MemoryDriver):
    """An array giving volumes whole units of 768 MiB (a 1 GiB volume takes 1.5 GiB),
    its pools sharing one disk group."""

    def allocation_unit_bytes(self, pool_name):
        return 768 * 1024 ** 2

    def capacity_group(self, pool_name):
        return "dg"

    def backend_read_pools(self):
        unit = self.allocation_unit_bytes("mem")
        return [dataclasses.replace(f, provisioned_bytes=sum(
            -(-size * GiB // unit) * unit for size in self.volumes.values()))
            for f in super().backend_read_pools()]


def test_admission_counts_whole_allocation_units(tmp_path):
    driver = UnitDriver(load_backend_config(overrides={
        "lock_path": str(tmp_path), "max_over_subscription_ratio": "1.0"}), total_gb=10)
    for name in "abcdef":
        driver.create_volume(name, 1)  # 6 x 1.5 GiB = 9 GiB of the 10
    with pytest.raises(CapacityExceeded, match="request of 1.5 GiB"):
        driver.create_volume("g", 1)
    driver.extend_volume("a", 2)  # 1.5 -> 2.25 GiB: 0.75 GiB more fits
    with pytest.raises(CapacityExceeded):
        driver.extend_volume("b", 2)  # another 0.75 GiB does not
    assert pool(driver)["provisioned_capacity_gb"] == 9.75


def test_claims_in_flight_count_for_the_whole_capacity_group(tmp_path):
    from driver_kit.admission import AdmissionGate
    driver = UnitDriver(load_backend_config(overrides={
        "lock_path": str(tmp_path), "max_over_subscription_ratio": "1.0"}), total_gb=10)
    gate = AdmissionGate(str(tmp_path))
    with gate.hold("default", driver._read_pools_or_raise, owner=driver) as session:
        session.record(driver.capacity_group("other-pool"), 9.0)
        with pytest.raises(CapacityExceeded):
            driver._admit(session, session.facts[0], 1.5, True)
