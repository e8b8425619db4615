"""A real Cinder deployment, driven by the OpenStack client as a user drives it.

RabbitMQ, MariaDB, cinder-api (gunicorn, noauth), cinder-scheduler and
cinder-volume run as processes of their own (``deployment.py``), with two
backends through the adapter: the LVM driver on the simulator (thin pool
``kitlvmpool``, 16 GiB, and the VG's thick pool ``kitlvmvg``, about 8 GiB) and
the shared-pool example (``fast``, thin and thick, and ``bulk``, thick, over
one 20 GiB disk group). Every scenario is checked from the client's side
(``openstack``, ``cinder``) and against the backend itself (the simulator's
state, the drivers' own stats). The stack's start and each scenario's time are
written to ``test-results/cinder_deployment_timings.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from driver_kit.loading import load_driver
from tests.ecosystem.cinder_user import User, host_pool, wait_reported
from tests.ecosystem.deployment import (APT_PACKAGES, REPO, STATS_PERIOD_S, Deployment,
                                        missing_parts, start_deployment, wait_for)
from tests.ecosystem.support import IN_CI, SimBackend, cinder_section, make_backend

MISSING = missing_parts()
pytestmark = pytest.mark.skipif(
    bool(MISSING) and not IN_CI,
    reason=f"the deployment needs {', '.join(MISSING)} (apt-get install "
           f"{' '.join(APT_PACKAGES)}; pip install -e '.[test,cinder]', as "
           f"tools/run-tests.sh does)")

THIN, THICK, SHARED_FAST, SHARED_BULK = ("kit-lvm#kitlvmpool", "kit-lvm#kitlvmvg",
                                         "kit-shared#fast", "kit-shared#bulk")
#: the volume types of docs/cinder.md's "DevStack plugin" section, per backend
DOCUMENTED = {
    "lvm-thin": {"volume_backend_name": "kit-lvm", "provisioning__type": "thin",
                 "thin_provisioning_support": "<is> True"},
    "lvm-thick": {"volume_backend_name": "kit-lvm", "provisioning__type": "thick",
                  "thick_provisioning_support": "<is> True"},
    "lvm-default": {"volume_backend_name": "kit-lvm"},
    "shared-thin": {"volume_backend_name": "kit-shared", "provisioning__type": "thin",
                    "thin_provisioning_support": "<is> True"},
    "shared-thick": {"volume_backend_name": "kit-shared", "provisioning__type": "thick",
                     "thick_provisioning_support": "<is> True"},
    "shared-default": {"volume_backend_name": "kit-shared"},
}
#: types a user may define without the capability keys
PLAIN = {
    "lvm-thick-plain": {"volume_backend_name": "kit-lvm", "provisioning__type": "thick"},
    "lvm-thin-plain": {"volume_backend_name": "kit-lvm", "provisioning__type": "thin"},
    "fast-thick": {"volume_backend_name": "kit-shared", "provisioning__type": "thick",
                   "pool_name": "fast"},
}


class Stack:
    """The running deployment, the user at its client, and the backends' truth."""

    def __init__(self, deployment: Deployment, lvm: SimBackend, shared: Any) -> None:
        self.deployment, self.lvm, self.shared = deployment, lvm, shared
        self.user = User(deployment)
        self.timings: dict[str, float] = dict(
            (f"start: {k}", round(v, 2)) for k, v in deployment.timings.items())

    def truth(self, pool: str) -> dict[str, Any]:
        """The driver's own stats for ``backend#pool``, read afresh."""
        backend, _, name = pool.partition("#")
        driver = self.lvm.driver if backend == "kit-lvm" else self.shared
        return next(p for p in driver.get_volume_stats(refresh=True)["pools"]
                    if p["pool_name"] == name)

    def reported(self) -> dict[str, Any]:
        """The pools once the scheduler's figures equal the drivers' (the next report)."""
        def fresh(pools: dict[str, Any]) -> bool:
            by_short = {name.partition("@")[2]: caps for name, caps in pools.items()}
            return all(by_short.get(p, {}).get(key) == self.truth(p)[key]
                       for p in (THIN, THICK, SHARED_FAST, SHARED_BULK)
                       for key in ("provisioned_capacity_gb", "free_capacity_gb"))
        return wait_reported(self.user, fresh, timeout_s=6 * STATS_PERIOD_S)

    def on_backend(self, volume: dict[str, Any]) -> Any:
        """The volume as its backend has it (None: not there)."""
        backend = (host_pool(volume) or "").partition("#")[0]
        driver = self.shared if backend == "kit-shared" else self.lvm.driver
        return driver.backend_find_volume(f"volume-{volume['id']}")

    def assert_db_matches_backend(self) -> None:
        """Every volume the database holds is on its backend in its pool at its size, or
        in error and on no backend."""
        for volume in self.user.volumes():
            found = self.on_backend(volume) if host_pool(volume) else None
            if volume["status"] == "error":
                assert found is None, volume
                continue
            assert volume["status"] == "available", volume
            assert found is not None, volume
            assert found.pool_name == host_pool(volume).partition("#")[2]
            assert -(-found.size_bytes // 1024 ** 3) == volume["size"], (found, volume)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("deployment")
    lvm = make_backend(workdir, "kit-lvm", vg_gb=24, pool_gb=16, lvm_offer_thick=True)
    shared_options = {"volume_driver": "contrib.shared_pool_driver.SharedPoolDriver",
                      "shared_array_dir": str(workdir / "array"), "shared_capacity_gb": 20,
                      "lock_path": str(workdir / "locks")}
    shared = load_driver(backend="kit-shared", overrides=dict(shared_options))
    shared.do_setup()
    sections = {"kit-lvm": cinder_section(lvm), "kit-shared": {
        **{k: v for k, v in shared_options.items() if k != "volume_driver"},
        "volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
        "driver_kit_driver": shared_options["volume_driver"],
        "volume_backend_name": "kit-shared"}}
    deployment = start_deployment(workdir, sections)
    result = Stack(deployment, lvm, shared)
    try:
        for name, properties in {**DOCUMENTED, **PLAIN}.items():
            result.user.volume_type(name, **properties)
        yield result
    finally:
        t0 = time.monotonic()
        deployment.stop()
        result.timings["stop"] = round(time.monotonic() - t0, 2)
        out = REPO / "test-results"
        out.mkdir(exist_ok=True)
        (out / "cinder_deployment_timings.json").write_text(
            json.dumps(result.timings, indent=1) + "\n")


@pytest.fixture
def user(stack: Stack, request: pytest.FixtureRequest) -> Iterator[User]:
    """The user, the scenario timed; every volume deleted after it (the pools start empty)."""
    t0 = time.monotonic()
    yield stack.user
    stack.timings[request.node.name] = round(time.monotonic() - t0, 2)
    stack.user.delete_everything()


def test_get_pools_long_shows_every_field_the_driver_reports(stack: Stack, user: User) -> None:
    stack.reported()
    pools = {name.partition("@")[2]: caps for name, caps in user.pools().items()}
    assert set(pools) == {THIN, THICK, SHARED_FAST, SHARED_BULK}
    for name, caps in pools.items():
        truth = stack.truth(name)
        for key in ("total_capacity_gb", "free_capacity_gb", "provisioned_capacity_gb",
                    "reserved_percentage", "max_over_subscription_ratio",
                    "thin_provisioning_support", "thick_provisioning_support",
                    "capacity_factors", "backend_state", "total_volumes"):
            assert key in caps, (name, key)
        for key, value in truth.items():
            if key == "multiattach":  # the adapter's, as Cinder's LVM driver reports it
                continue
            if key == "location_info":  # the adapter names this host in it
                kind, _, rest = value.partition(":")
                value = f"{kind}:{caps[key].split(':')[1]}:{rest}"
            assert caps[key] == value, (name, key)
    assert pools[THIN]["thick_provisioning_support"] is False
    assert pools[THICK]["thin_provisioning_support"] is False


def _expect_scheduler_refusal(user: User, volume: dict[str, Any]) -> None:
    """Refused by the scheduler: in error, never on a backend, the user told why."""
    assert volume["status"] == "error", volume
    assert host_pool(volume) is None, "the scheduler sent it to a backend, which refused it"
    messages = user.messages(volume["id"])
    assert any("Could not find any available weighted backend" in m for m in messages), messages


FILLS = [  # type, size (GiB), how many fit, where they land
    ("lvm-thin", 100, 3, {THIN}), ("lvm-default", 100, 3, {THIN}),
    ("lvm-thick", 3, 2, {THICK}), ("shared-thin", 150, 2, {SHARED_FAST}),
    ("shared-default", 150, 2, {SHARED_FAST}), ("shared-thick", 6, 3, {SHARED_FAST, SHARED_BULK}),
]


@pytest.mark.parametrize("vtype,size,fit,where", FILLS, ids=[f[0] for f in FILLS])
def test_each_type_fills_its_pool_and_the_scheduler_refuses_the_next(
        stack: Stack, user: User, vtype: str, size: int, fit: int, where: set[str]) -> None:
    stack.reported()
    for i in range(fit):
        volume = user.create(f"{vtype}-{i}", size, vtype)
        assert volume["status"] == "available", (volume, user.messages(volume["id"]))
        assert host_pool(volume) in where
        assert stack.on_backend(volume).size_gb == size
        stack.reported()  # the scheduler's view is the backend's before the next
    _expect_scheduler_refusal(user, user.create(f"{vtype}-past-the-cap", size, vtype))
    stack.assert_db_matches_backend()


LIFECYCLE = ["lvm-thin", "lvm-default", "shared-thin", "shared-thick", "shared-default"]


@pytest.mark.parametrize("vtype", LIFECYCLE)
def test_create_extend_snapshot_clone_delete(stack: Stack, user: User, vtype: str) -> None:
    volume = user.create(f"{vtype}-a", 1, vtype)
    assert user.extend(volume["id"], 2)["status"] == "available"
    assert stack.on_backend(volume).size_gb == 2
    snap = user.snapshot(f"{vtype}-snap", volume["id"])
    assert snap["status"] == "available", user.messages(snap["id"])
    clone = user.create(f"{vtype}-clone", 2, vtype, source=volume["id"])
    from_snap = user.create(f"{vtype}-from-snap", 3, vtype, snapshot=snap["id"])
    for made in (clone, from_snap):
        assert made["status"] == "available", user.messages(made["id"])
        assert host_pool(made) == host_pool(volume)
    assert stack.on_backend(from_snap).size_gb == 3
    stack.assert_db_matches_backend()
    user.delete_everything()
    assert stack.on_backend(volume) is None


def test_thick_lvm_volumes_cannot_be_snapshotted_and_the_user_is_told(
        stack: Stack, user: User) -> None:
    """The LVM driver snapshots and copies thin volumes only: refused, said in a message."""
    volume = user.create("thick-a", 1, "lvm-thick")
    snap = user.snapshot("thick-snap", volume["id"])
    assert snap["status"] == "error"
    assert any("Snapshot failed to create" in m for m in user.messages(snap["id"]))
    assert user.volume(volume["id"])["status"] == "available"


# ------------------------------------------------ the four classes of issue 21

def _refusals_logged(stack: Stack) -> int:
    """How many requests cinder-volume's drivers refused so far (its log's word for it)."""
    log = stack.deployment.cinder.services["volume"].log.read_text(errors="replace")
    return sum(marker in line for line in log.splitlines()
               for marker in ("does not support", "refused:", "CapacityExceeded"))


def test_a_thick_type_without_the_capability_key_lands_in_the_thick_pool(
        stack: Stack, user: User) -> None:
    """Class 1: the thin pool has more free space than the thick pool, so Cinder's weigher
    prefers it for a type with only ``provisioning:type=thick`` (CapabilitiesFilter skips
    scoped keys; CapacityFilter never reads ``thick_provisioning_support``). The driver
    makes the volume in the backend's thick pool and the volume's host names it; the
    documented type (with ``thick_provisioning_support='<is> True'``) goes there directly."""
    stack.reported()
    before = _refusals_logged(stack)
    documented = user.create("thick-documented", 3, "lvm-thick")
    assert (documented["status"], host_pool(documented)) == ("available", THICK)
    assert stack.on_backend(documented).thin is False
    stack.reported()
    assert stack.truth(THIN)["free_capacity_gb"] > stack.truth(THICK)["free_capacity_gb"]
    plain = user.create("thick-plain", 3, "lvm-thick-plain")
    assert (plain["status"], host_pool(plain)) == ("available", THICK), \
        user.messages(plain["id"])
    assert stack.on_backend(plain).thin is False
    assert _refusals_logged(stack) == before
    stack.reported()
    assert stack.truth(THICK)["provisioned_capacity_gb"] == 6
    assert stack.truth(THIN)["provisioned_capacity_gb"] == 0
    # the thick pool full, the thin pool's thick arithmetic still passes it: the one
    # case left where the driver refuses after the scheduler, with Cinder's fixed text
    past = user.create("thick-plain-past-the-cap", 3, "lvm-thick-plain")
    assert past["status"] == "error" and stack.on_backend(past) is None
    assert "create volume from backend storage:Driver failed to create the volume." in \
        user.messages(past["id"])
    stack.assert_db_matches_backend()


def test_a_thin_type_past_the_thin_cap_is_never_half_refused(stack: Stack, user: User) -> None:
    """Class 2: with the thin pool at its cap, Cinder's CapacityFilter passes the thick-only
    pool for a thin type without the capability key (its thick arithmetic has room)."""
    user.create("big", 318, "lvm-thin")
    stack.reported()
    documented = user.create("thin-documented", 5, "lvm-thin")
    _expect_scheduler_refusal(user, documented)
    before = _refusals_logged(stack)
    plain = user.create("thin-plain", 5, "lvm-thin-plain")
    assert (plain["status"], host_pool(plain)) == ("available", THICK), \
        user.messages(plain["id"])
    assert _refusals_logged(stack) == before
    stack.assert_db_matches_backend()


def test_a_snapshot_of_a_thick_volume_on_a_pool_offering_both(stack: Stack, user: User) -> None:
    """Class 3: the snapshot request carries no type; Cinder checks it as thin."""
    volume = user.create("thick-on-fast", 12, "fast-thick")
    assert (volume["status"], host_pool(volume)) == ("available", SHARED_FAST)
    stack.reported()
    snap = user.snapshot("thick-snap", volume["id"])
    assert snap["status"] == "available", user.messages(snap["id"])


def test_extending_a_managed_volume_of_a_part_gib(stack: Stack, user: User) -> None:
    """Class 4: Cinder counts an extend's growth from the volume's whole-GiB size."""
    vg, pool = stack.lvm.options["volume_group"], stack.lvm.options["lvm_thin_pool_name"]
    for lv in ("part-a", "part-b"):
        _simulator(stack, "lvcreate", "-T", "-V", "512m", "-n", lv, f"{vg}/{pool}")
    host = next(name for name in user.pools() if name.endswith(THIN))
    managed = [user.manage(f"managed-{lv}", lv, host, "lvm-thin") for lv in ("part-a", "part-b")]
    assert [m["size"] for m in managed] == [1, 1], managed
    user.create("big", 318, "lvm-thin")
    stack.reported()
    assert stack.truth(THIN)["provisioned_capacity_gb"] == 319
    extended = user.extend(managed[0]["id"], 2)
    assert extended["status"] == "available", user.messages(managed[0]["id"])
    assert stack.on_backend(extended).size_gb == 2
    stack.assert_db_matches_backend()


# ------------------------------------------------ report, restarts, concurrency

def _simulator(stack: Stack, *argv: str) -> None:
    """An operator's LVM command on the simulator's command line."""
    subprocess.run([sys.executable, "-m", "lvm_driver.simulator", "--state",
                    stack.lvm.options["lvm_simulator_state_file"], *argv],
                   check=True, cwd=REPO, capture_output=True, timeout=60)


def test_an_operators_lvcreate_shows_in_get_pools_within_one_report(
        stack: Stack, user: User) -> None:
    stack.reported()
    vg, pool = stack.lvm.options["volume_group"], stack.lvm.options["lvm_thin_pool_name"]
    _simulator(stack, "lvcreate", "-T", "-V", "40g", "-n", "by-hand", f"{vg}/{pool}")
    seen = wait_reported(user, lambda pools: any(
        name.endswith(THIN) and caps["provisioned_capacity_gb"] == 40
        for name, caps in pools.items()), timeout_s=4 * STATS_PERIOD_S)
    stack.timings["out-of-band lvcreate seen after (s)"] = round(seen["__waited_s"], 2)
    # one period for the driver's report, one for the scheduler's cast, plus the look
    assert seen["__waited_s"] <= 2 * STATS_PERIOD_S + 2
    _simulator(stack, "lvremove", "-f", f"{vg}/by-hand")


def test_a_cinder_volume_restart_loses_nothing(stack: Stack, user: User) -> None:
    before = [user.create(f"before-{i}", 1, "lvm-thin") for i in range(2)]
    volume = stack.deployment.cinder.services["volume"]
    volume.stop()
    during = [user.create(f"during-{i}", 1, "shared-thin", wait=False) for i in range(2)]
    volume.start()
    for made in during:
        assert user.settled("volume", made["id"])["status"] == "available"
    assert all(user.volume(v["id"])["status"] == "available" for v in before)
    stack.assert_db_matches_backend()


def test_a_rabbitmq_restart_loses_nothing(stack: Stack, user: User) -> None:
    before = user.create("before", 1, "lvm-thin")
    rabbit = stack.deployment.rabbit
    # the services' own queues (not the per-call reply queues, which come and go)
    served = {name for name, count in rabbit.consumers().items()
              if count and name.startswith("cinder-") and "_fanout_" not in name}
    assert {"cinder-scheduler"} <= served, served
    rabbit.stop()
    rabbit.start()
    # Cinder's queues are not durable: a cast sent before a service has
    # reconnected and declared its queue again is dropped by RabbitMQ, as in
    # any Cinder deployment; an operator waits for the consumers to come back
    waited = time.monotonic()
    wait_for("every Cinder service consuming again", lambda: all(
        rabbit.consumers().get(name, 0) > 0 for name in served), 180, interval_s=1)
    stack.timings["services back on the restarted bus after (s)"] = round(
        time.monotonic() - waited, 1)
    after = user.create("after", 1, "lvm-thin", wait=True)
    assert after["status"] == "available"
    assert user.volume(before["id"])["status"] == "available"
    stack.assert_db_matches_backend()


def test_fifty_creates_at_once_near_the_cap(stack: Stack, user: User) -> None:
    user.create("big", 300, "lvm-thin")  # 20 GiB left under the thin cap of 320
    stack.reported()
    ids = user.create_at_once(50, 1, "lvm-thin")
    settled = [user.settled("volume", ident, timeout_s=300) for ident in ids]
    available = [v for v in settled if v["status"] == "available"]
    refused = [v for v in settled if v["status"] != "available"]
    stack.timings["fifty creates: available"] = len(available)
    assert 0 < len(available) <= 20
    assert all(v["status"] == "error" and user.messages(v["id"]) for v in refused)
    assert stack.truth(THIN)["provisioned_capacity_gb"] <= 320
    stack.assert_db_matches_backend()
