"""The Cinder adapter against real Cinder from PyPI (the ``cinder`` extra).

(a) The LVM driver's stats, reported by Cinder's own volume manager through the
    adapter, go through Cinder's HostManager, CapacityFilter and
    CapacityWeigher; Cinder takes them as reported and answers every request
    exactly as ``driver_kit.scheduler`` does.
(b) Cinder's volume manager loads the adapter from cinder.conf and runs create,
    extend, snapshot, clone, delete and stats through it on the simulator, with
    Cinder's volume objects and database; kit errors arrive as Cinder's.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driver_kit import scheduler, validate_stats
from tests.ecosystem.support import (CINDER_INSTALLED, IN_CI, NO_CINDER, REPO, SimBackend,
                                      cinder_section, make_backend, requires_cinder,
                                      run_cinder_side, write_cinder_conf)

# keys Cinder's volume manager adds to each pool on its way to the scheduler
MANAGER_KEYS = {"allocated_capacity_gb", "filter_function", "goodness_function", "cacheable"}


def test_cinder_is_installed_where_ci_runs() -> None:
    if not IN_CI:
        pytest.skip("only checked under CI=true")
    assert CINDER_INSTALLED, f"CI=true but {NO_CINDER}"


def test_adapter_imports_without_cinder() -> None:
    """Docs and Cinder-less installs can import the module; using it says what is missing."""
    code = ("import sys; sys.modules['cinder'] = None\n"
            "import contrib.cinder_adapter as a\n"
            "assert a.CINDER_AVAILABLE is False\n"
            "try:\n    a.DriverKitVolumeDriver(configuration=None)\n"
            "except RuntimeError as exc:\n    print(exc)\n")
    proc = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'driver-kit[cinder]'" in proc.stdout


def test_the_adapter_takes_cinders_coordination_url_when_set_or_clustered(
        tmp_path: Path) -> None:
    """Cinder's default URL on a lone host is left to the file lock; set or clustered, used."""
    code = ("import sys; sys.modules['cinder'] = None\n"
            "from oslo_config import cfg\n"
            "import contrib.cinder_adapter as a\n"
            "cfg.CONF.register_opt(cfg.StrOpt('state_path', default='/var/lib/cinder'))\n"
            "cfg.CONF.register_opt(cfg.StrOpt('backend_url', default='file://$state_path'),"
            " group='coordination')\n"
            "cfg.CONF(sys.argv[1:], default_config_files=[])\n"
            "print(a._cinder_coordination_url(False), a._cinder_coordination_url(True))\n")
    conf = tmp_path / "cinder.conf"
    conf.write_text("[coordination]\nbackend_url = etcd3+http://etcd1:2379\n")

    def urls(*argv: str) -> str:
        proc = subprocess.run([sys.executable, "-W", "error", "-c", code, *argv], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert urls() == "None file:///var/lib/cinder"
    assert urls("--config-file", str(conf)) == " ".join(["etcd3+http://etcd1:2379"] * 2)


# ---------------------------------------------------------------- (a) scheduler

def _scheduler_backends(tmp: Path) -> list[SimBackend]:
    """Two LVM backends, each a thin pool plus a thick pool, at different fill levels."""
    a = make_backend(tmp, "kit-a", vg_gb=40, pool_gb=30, max_over_subscription_ratio="2.0",
                     reserved_percentage=10, over_provisioning_calculation="standard",
                     lvm_offer_thick=True)
    for name, size in (("a-1", 10), ("a-2", 15), ("a-3", 5)):
        a.driver.create_volume(name, size)
    a.write("a-1", 6)
    a.driver.create_volume("a-thick", 3, extra_specs={"provisioning:type": "thick"})
    b = make_backend(tmp, "kit-b", vg_gb=20, pool_gb=16, max_over_subscription_ratio="auto",
                     reserved_percentage=0, over_provisioning_calculation="cinder",
                     lvm_offer_thick=True)
    b.driver.create_volume("b-1", 4)
    b.write("b-1", 3)
    b.operator("lvcreate", "-T", "-V", "6g", "-n", "made-by-hand", f"{b.options['volume_group']}/"
               f"{b.options['lvm_thin_pool_name']}")
    return [a, b]


def _requests(stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Creates and extends of every type, sized around each pool's virtual free space."""
    sizes = {1, 5, 10, 20, 40, 100}
    for report in stats:
        for pool in scheduler.get_pools(report):
            for factors in pool["capacity_factors"]:
                edge = int(factors["virtual_free_capacity"])
                sizes |= {max(edge, 1), edge + 1}
    requests = [{"size": size, "extra_specs": specs}
                for size in sorted(sizes)
                for specs in ({}, {"provisioning:type": "thin"},
                              {"provisioning:type": "thick"})]
    requests += [{"size": 10, "new_size": 25, "extra_specs": {}},
                 {"size": 2, "new_size": 9, "extra_specs": {"provisioning:type": "thick"}}]
    return requests


@pytest.fixture(scope="module")
def cinder_scheduler(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not CINDER_INSTALLED and not IN_CI:
        pytest.skip(NO_CINDER)
    tmp = tmp_path_factory.mktemp("cinder-scheduler")
    backends = _scheduler_backends(tmp)
    kit_stats = [b.driver.get_volume_stats(refresh=True) for b in backends]
    write_cinder_conf(tmp, {b.section: cinder_section(b) for b in backends})
    spec = {"backends": [{"section": b.section, "host": f"node1@{b.section}"}
                         for b in backends],
            "requests": _requests(kit_stats)}
    (tmp / "requests.json").write_text(json.dumps(spec))
    answer = run_cinder_side("scheduler", tmp)
    answer["kit_stats"] = kit_stats
    return answer


def _pools_as_scheduled(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The pool capabilities Cinder's scheduler received, in its own order."""
    by_name = {pool["pool_name"]: pool
               for caps in answer["capabilities"].values() for pool in caps["pools"]}
    return [by_name[state["pool_name"]] for state in answer["pools"]]


@requires_cinder
def test_cinder_receives_the_kit_report_with_the_data_path_added(
        cinder_scheduler: dict[str, Any]) -> None:
    """The kit's figures arrive unchanged; the adapter adds what Cinder's LVM driver
    says about its data path: multiattach, this host in location_info, the target's
    protocol, no shared targets, sparse copies only when every pool is thin."""
    received = {caps["volume_backend_name"]: caps
                for caps in cinder_scheduler["capabilities"].values()}
    for report in cinder_scheduler["kit_stats"]:
        got = received[report["volume_backend_name"]]
        hostname = socket.gethostname()
        expected = [dict(pool, multiattach=True, location_info=pool["location_info"].replace(
            "ThinLVMDriver:", f"ThinLVMDriver:{hostname}:", 1)) for pool in report["pools"]]
        assert [{k: v for k, v in pool.items() if k not in MANAGER_KEYS}
                for pool in got["pools"]] == expected
        assert (got["storage_protocol"], got["shared_targets"],
                got["sparse_copy_volume"]) == ("iSCSI", False, False)  # thick pools too
        assert validate_stats(report) == []


@requires_cinder
def test_cinder_host_manager_takes_the_figures_as_reported(
        cinder_scheduler: dict[str, Any]) -> None:
    reported = {pool["pool_name"]: pool for report in cinder_scheduler["kit_stats"]
                for pool in report["pools"]}
    assert sorted(reported) == sorted(s["pool_name"] for s in cinder_scheduler["pools"])
    for state in cinder_scheduler["pools"]:
        pool = reported[state["pool_name"]]
        for key in ("total_capacity_gb", "free_capacity_gb", "provisioned_capacity_gb",
                    "reserved_percentage", "max_over_subscription_ratio",
                    "thin_provisioning_support", "thick_provisioning_support"):
            assert state[key] == pool[key], (state["pool_name"], key)
    assert cinder_scheduler["listed_pools"] == sorted(
        f"node1@{r['volume_backend_name']}#{p['pool_name']}"
        for r in cinder_scheduler["kit_stats"] for p in r["pools"])


@requires_cinder
def test_capacity_filter_and_weigher_agree_with_driver_kit(
        cinder_scheduler: dict[str, Any]) -> None:
    pools = _pools_as_scheduled(cinder_scheduler)
    outcomes = set()
    for answer in cinder_scheduler["answers"]:
        request = {"size": answer["request"]["size"],
                   "new_size": answer["request"].get("new_size"),
                   "extra_specs": answer["request"]["extra_specs"]}
        passing = [pool for pool in pools if scheduler.backend_passes(pool, request)]
        assert sorted(p["pool_name"] for p in passing) == answer["passed"], request
        ranking = [[name, weight] for name, weight in scheduler.weigh(passing, request)]
        assert ranking == answer["ranking"], request
        outcomes.add(len(passing))
    # the requests exercise every outcome: no pool, some pools, all pools
    assert 0 in outcomes and len(pools) in outcomes and len(outcomes) > 2


# ------------------------------------------------------------ (b) the manager

@pytest.fixture(scope="module")
def cinder_manager(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not CINDER_INSTALLED and not IN_CI:
        pytest.skip(NO_CINDER)
    tmp = tmp_path_factory.mktemp("cinder-manager")
    sim = {"lvm_backend": "simulator"}
    write_cinder_conf(tmp, {
        "kit-lvm": {"volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
                    "driver_kit_driver": "lvm_driver.driver.ThinLVMDriver",
                    "volume_backend_name": "kit-lvm", **sim,
                    "lvm_simulator_state_file": tmp / "kit-lvm.json",
                    "lvm_simulator_vg_size_gb": 12, "volume_group": "kitvg",
                    "lvm_thin_pool_name": "kitpool", "max_over_subscription_ratio": "2.0",
                    "over_provisioning_calculation": "standard"},
        "kit-nopool": {"volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver", **sim,
                       "lvm_simulator_state_file": tmp / "kit-nopool.json",
                       "volume_group": "novg", "lvm_create_thin_pool": False},
        "kit-badconf": {"volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver", **sim,
                        "lvm_simulator_state_file": tmp / "kit-badconf.json",
                        "over_provisioning_calculation": "bogus"},
        "kit-nodriver": {"volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
                         "driver_kit_driver": "no_such_module.Driver"},
    }, backend_defaults={"reserved_percentage": 7})
    answer = run_cinder_side("manager", tmp)
    answer["tmp"] = str(tmp)
    return answer


@requires_cinder
def test_volume_manager_loads_the_adapter_from_cinder_conf(
        cinder_manager: dict[str, Any]) -> None:
    assert cinder_manager["driver_class"] == "contrib.cinder_adapter.DriverKitVolumeDriver"
    assert cinder_manager["kit_class"] == "lvm_driver.driver.ThinLVMDriver"
    assert cinder_manager["initialized"] is True
    # options come from the backend section, with Cinder's [backend_defaults] fallback
    # and Cinder's own lock path and coordination URL when the section names none
    assert cinder_manager["kit_config"] == {
        "backend": "kit-lvm", "volume_backend_name": "kit-lvm",
        "max_over_subscription_ratio": 2.0, "reserved_percentage": 7,
        "over_provisioning_calculation": "standard", "volume_group": "kitvg",
        "lvm_thin_pool_name": "kitpool",
        "lock_path": str(Path(cinder_manager["tmp"]) / "cinder-locks"),
        "coordination_backend_url": f"file://{Path(cinder_manager['tmp']) / 'coordination'}"}
    caps = cinder_manager["capabilities_before"]
    assert caps["volume_backend_name"] == "kit-lvm"
    pool = caps["pools"][0]
    assert (pool["pool_name"], pool["reserved_percentage"],
            pool["max_over_subscription_ratio"]) == ("kitpool", 7, 2.0)


@requires_cinder
def test_create_extend_delete_through_the_volume_manager(
        cinder_manager: dict[str, Any]) -> None:
    steps = cinder_manager["steps"]
    thin = {"pool_name": "kitpool", "thin": True}
    assert steps["create"] == {"error": None, "status": "available", "size": 2,
                               "lv": {"size_gb": 2, **thin}, "get_pool": "kitpool"}
    assert steps["extend"] == {"status": "available", "size": 4,
                               "lv": {"size_gb": 4, **thin}}
    # Cinder's snapshot-<id> is a name LVM reserves: stored as _snapshot-<id>
    assert steps["snapshot"]["status"] == "available" and steps["snapshot"]["found"]
    assert steps["snapshot"]["lv_name"].startswith("_snapshot-")
    assert steps["from_snapshot"] == {"status": "available", "size": 6,
                                      "lv": {"size_gb": 6, **thin}}
    assert steps["clone"] == {"status": "available", "size": 4, "lv": {"size_gb": 4, **thin}}
    assert steps["delete_snapshot"] == {"found": False}
    for name in ("delete", "delete_from_snapshot", "delete_clone"):
        assert steps[name] == {"lv": False}
    assert steps["delete_again_driver"] is None  # deletes are idempotent
    assert steps["stats_copy_isolated"] is True


@requires_cinder
def test_stats_follow_the_operations(cinder_manager: dict[str, Any]) -> None:
    def pool(key: str) -> dict[str, Any]:
        return cinder_manager[key]["pools"][0]

    assert pool("capabilities_before")["provisioned_capacity_gb"] == 0.0
    # first (4) + from snapshot (6) + clone (4); the snapshot is reported apart
    assert pool("capabilities_after_creates")["provisioned_capacity_gb"] == 14.0
    assert pool("capabilities_after_creates")["snapshot_capacity_gb"] == 4.0
    assert pool("capabilities_after_creates")["total_volumes"] == 3
    assert pool("capabilities_end")["provisioned_capacity_gb"] == 0.0
    for key in ("capabilities_before", "capabilities_after_creates", "capabilities_end"):
        report = {k: v for k, v in cinder_manager[key].items()}
        report["pools"] = [{k: v for k, v in p.items() if k not in MANAGER_KEYS}
                           for p in report["pools"]]
        assert validate_stats(report) == [], key


@requires_cinder
def test_refusals_arrive_as_the_exceptions_cinder_expects(
        cinder_manager: dict[str, Any]) -> None:
    steps = cinder_manager["steps"]
    refused = steps["create_refused"]
    assert refused["status"] == "error" and refused["lv"] is None
    assert refused["error"]["type"] == "VolumeBackendAPIException"
    assert "provisioned_cap" in refused["error"]["message"]
    assert steps["create_refused_driver"]["type"] == "VolumeBackendAPIException"
    assert steps["create_refused_driver"]["has_decision"] is True
    # the manager marks a refused extend and leaves the volume as it was
    assert steps["extend_refused"] == {"status": "error_extending", "size": 4,
                                       "lv": {"size_gb": 4, "pool_name": "kitpool",
                                              "thin": True}}
    extend = steps["extend_refused_driver"]
    assert (extend["type"], extend["has_decision"]) == ("ExtendVolumeError", True)
    assert "FAILED by" in extend["message"]


@requires_cinder
def test_other_kit_errors_map_to_cinder_exceptions(cinder_manager: dict[str, Any]) -> None:
    steps = cinder_manager["steps"]
    missing = steps["extend_missing_driver"]
    assert missing["type"] == "VolumeNotFound"
    assert missing["kwargs"]["volume_id"] == steps["missing_volume_id"]
    assert steps["create_zero_driver"]["type"] == "InvalidInput"
    assert steps["shrink_driver"]["type"] == "InvalidInput"
    assert "must exceed the current size" in steps["shrink_driver"]["message"]
    for error in (missing, steps["create_zero_driver"], steps["shrink_driver"]):
        assert error["module"] == "cinder.exception"


@requires_cinder
def test_a_broken_backend_stays_uninitialized_and_says_why(
        cinder_manager: dict[str, Any]) -> None:
    broken = cinder_manager["broken"]
    assert all(b["initialized"] is False for b in broken.values())
    nopool = broken["kit-nopool"]
    assert nopool["check_for_setup_error"]["type"] == "VolumeBackendAPIException"
    assert "lvcreate -T" in nopool["check_for_setup_error"]["message"]
    badconf = broken["kit-badconf"]["do_setup"]
    assert badconf["type"] == "VolumeDriverException"
    assert "over_provisioning_calculation = 'bogus'" in badconf["message"]
    nodriver = broken["kit-nodriver"]["do_setup"]
    assert nodriver["type"] == "VolumeDriverException"
    assert "no_such_module" in nodriver["message"]
    assert broken["kit-nodriver"]["check_for_setup_error"]["type"] == "DriverNotInitialized"


# a vendor module that raises at import (an SDK without its licence file, say)
_RAISES_AT_IMPORT = 'raise RuntimeError("vendor SDK: licence file missing")\n'

# Cinder's side of the test below: a volume service for the section, as cinder-volume
# starts one, and what its adapter says on do_setup and check_for_setup_error
_RAISING_BACKEND_SIDE = """
import json, sys
from pathlib import Path
from tests.ecosystem import cinder_side as side
workdir = Path(sys.argv[1])
side.start(workdir)
driver = side.volume_service("kit-raising", "node1@kit-raising").driver
answer = {"initialized": driver.initialized,
          "do_setup": side.error_of(lambda: driver.do_setup(side.ctxt())),
          "check_for_setup_error": side.error_of(driver.check_for_setup_error)}
(workdir / "answer.json").write_text(json.dumps(answer))
"""


@requires_cinder
def test_a_driver_module_raising_at_import_is_a_config_error_at_do_setup(
        tmp_path: Path) -> None:
    """Whatever the vendor module raises, Cinder still builds the adapter; the backend
    stays uninitialized and do_setup() says why, as for any misconfigured backend."""
    (tmp_path / "vendor_raising_driver.py").write_text(_RAISES_AT_IMPORT)
    write_cinder_conf(tmp_path, {"kit-raising": {
        "volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
        "driver_kit_driver": "vendor_raising_driver.Driver"}})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", _RAISING_BACKEND_SIDE, str(tmp_path)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-6000:]
    answer = json.loads((tmp_path / "answer.json").read_text())
    assert answer["initialized"] is False
    setup = answer["do_setup"]
    assert setup["type"] == "VolumeDriverException"
    assert ("invalid configuration: cannot import 'vendor_raising_driver' for "
            "[kit-raising] driver_kit_driver 'vendor_raising_driver.Driver': RuntimeError: "
            "vendor SDK: licence file missing") in setup["message"]
    assert answer["check_for_setup_error"]["type"] == "DriverNotInitialized"
