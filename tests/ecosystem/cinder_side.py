"""Cinder's side of the ecosystem tests: real Cinder code in a process of its own.

    python tests/ecosystem/cinder_side.py {scheduler|manager} WORKDIR

WORKDIR holds ``cinder.conf`` (and, for ``scheduler``, ``requests.json``);
the answer is written to ``WORKDIR/answer.json``. Cinder runs with a SQLite
database in WORKDIR, the fake messaging transport and its own configuration
file, exactly as ``cinder-volume`` and ``cinder-scheduler`` would build their
objects: ``VolumeManager(service_name=<section>)`` loads the adapter named by
``volume_driver`` and ``init_host()`` sets it up; the scheduler's
``HostManager`` reads the services from the database and the capabilities the
volume managers report.

Why a separate process: importing Cinder imports eventlet, whose fork hook
warns (DeprecationWarning) on every later subprocess started with a
``preexec_fn`` (oslo.concurrency's processutils does) for the rest of the
interpreter's life, which would break unrelated tests that run under
``-W error``. Cinder's own services run in processes of their own too.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

# Warnings are errors here as under pytest, except these, raised by Cinder's
# dependencies at import or start-up and out of this project's hands:
warnings.simplefilter("error")
for _message in (
        r"\s*Eventlet is deprecated",                       # cinder/__init__ imports eventlet
        r"Using fork\(\) is a bad idea",                     # eventlet's at-fork hook
        r".*deprecated without deprecated_reason",          # oslo.policy on Cinder's rules
        r"The 'oslo_service\.\w+' module usage is deprecated",  # Cinder still imports them
        r"eventletutils module is deprecated",              # oslo.utils
        r"'cgi' is deprecated",                             # webob on Python 3.11
        r"Unnamed CHECK constraint on reflected table",     # Cinder's migrations on SQLite
        r"The from_engine\(\) method on Inspector",          # ... through SQLAlchemy 2
        r"Passing item_cls to obj_make_list\(\)",            # Cinder's objects
):
    warnings.filterwarnings("ignore", message=_message)

logging.basicConfig(level=logging.CRITICAL)

from oslo_config import cfg  # noqa: E402

from cinder import objects  # noqa: E402

objects.register_all()

from cinder import context as cinder_context  # noqa: E402
from cinder import coordination  # noqa: E402
from cinder import rpc  # noqa: E402
from cinder.db import migration  # noqa: E402
from cinder.scheduler import host_manager  # noqa: E402
from cinder.volume import manager as volume_manager  # noqa: E402
from cinder.volume import rpcapi as volume_rpcapi  # noqa: E402
from cinder.volume import volume_types  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

CONF = cfg.CONF


def start(workdir: Path) -> None:
    """What every Cinder service does first: config, database, messaging."""
    CONF(["--config-file", str(workdir / "cinder.conf")], project="cinder")
    migration.db_sync()
    rpc.init(CONF)
    coordination.COORDINATOR.start()


def ctxt() -> Any:
    return cinder_context.RequestContext("user", "project", is_admin=True)


def volume_service(backend: str, host: str, cluster: str | None = None) -> Any:
    """A cinder-volume service for one backend section, started as Cinder starts it
    (``cluster``: a member of that active-active cluster)."""
    service = objects.Service(ctxt(), host=host, binary="cinder-volume", cluster_name=cluster,
                              topic="cinder-volume", report_count=0,
                              availability_zone="nova",
                              rpc_current_version=volume_rpcapi.VolumeAPI.RPC_API_VERSION,
                              object_current_version=objects.base.OBJ_VERSIONS.get_current())
    service.create()
    manager = volume_manager.VolumeManager(service_name=backend, host=host, cluster=cluster)
    manager.init_host(service_id=service.id)
    return manager


def reported(manager: Any) -> dict[str, Any]:
    """The capabilities a volume manager publishes, after its periodic stats task."""
    manager._report_driver_status(ctxt())
    # the RPC cast serializes them as JSON on their way to the scheduler
    return json.loads(json.dumps(manager.last_capabilities))


def error_of(call: Any) -> dict[str, Any] | None:
    """None if ``call()`` succeeds, else the Cinder exception's class and message."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - which exception is the answer
        return {"type": type(exc).__name__, "module": type(exc).__module__,
                "message": str(exc), "kwargs": getattr(exc, "kwargs", {}),
                "has_decision": hasattr(exc, "decision")}
    return None


# ---------------------------------------------------------------- scheduler

def filter_properties(request: dict[str, Any]) -> dict[str, Any]:
    """What the scheduler's filter and weigher read for a create or an extend."""
    properties = {"size": request["size"],
                  "volume_type": {"extra_specs": request.get("extra_specs", {})},
                  "request_spec": {"volume_id": "request",
                                   "volume_properties": {"size": request["size"]}}}
    if request.get("new_size"):
        properties["new_size"] = request["new_size"]
    return properties


def run_scheduler(workdir: Path) -> dict[str, Any]:
    """(a) kit stats through Cinder's HostManager, CapacityFilter and CapacityWeigher."""
    spec = json.loads((workdir / "requests.json").read_text())
    managers = [volume_service(b["section"], b["host"]) for b in spec["backends"]]
    hosts = host_manager.HostManager()
    capabilities = {}
    for manager in managers:
        caps = reported(manager)
        capabilities[manager.host] = copy.deepcopy(caps)  # the host manager annotates pools
        hosts.update_service_capabilities("volume", manager.host, caps, None,
                                          timeutils.utcnow())
    states = list(hosts.get_all_backend_states(ctxt()))
    pools = [{"host": s.host, "pool_name": s.pool_name,
              "total_capacity_gb": s.total_capacity_gb,
              "free_capacity_gb": s.free_capacity_gb,
              "provisioned_capacity_gb": s.provisioned_capacity_gb,
              "reserved_percentage": s.reserved_percentage,
              "max_over_subscription_ratio": s.max_over_subscription_ratio,
              "thin_provisioning_support": s.thin_provisioning_support,
              "thick_provisioning_support": s.thick_provisioning_support}
             for s in states]
    answers = []
    for request in spec["requests"]:
        properties = filter_properties(request)
        passed = hosts.get_filtered_backends(states, properties,
                                             filter_class_names=["CapacityFilter"])
        weighed = hosts.get_weighed_backends(passed, properties,
                                             weigher_class_names=["CapacityWeigher"])
        answers.append({"request": request,
                        "passed": sorted(s.pool_name for s in passed),
                        "ranking": [[w.obj.pool_name, w.weight] for w in weighed]})
    return {"capabilities": capabilities, "pools": pools, "answers": answers,
            "listed_pools": sorted(p["name"] for p in hosts.get_pools(ctxt()))}


# ------------------------------------------------------------------ manager

def run_manager(workdir: Path) -> dict[str, Any]:
    """(b) the adapter as Cinder's volume manager runs it, with Cinder's objects."""
    out: dict[str, Any] = {}
    manager = volume_service("kit-lvm", "node1@kit-lvm")
    driver = manager.driver
    kit = driver.kit
    out["driver_class"] = f"{type(driver).__module__}.{type(driver).__name__}"
    out["kit_class"] = f"{type(kit).__module__}.{type(kit).__name__}"
    out["initialized"] = driver.initialized
    conf = kit.configuration
    out["kit_config"] = {name: getattr(conf, name) for name in (
        "backend", "volume_backend_name", "max_over_subscription_ratio",
        "reserved_percentage", "over_provisioning_calculation", "lock_path",
        "coordination_backend_url")}
    out["kit_config"]["volume_group"] = conf.get("volume_group")
    out["kit_config"]["lvm_thin_pool_name"] = conf.get("lvm_thin_pool_name")
    out["capabilities_before"] = reported(manager)

    context = ctxt()
    thin = volume_types.create(context, "kit-thin", {"volume_backend_name": "kit-lvm",
                                                     "provisioning:type": "thin"})

    def new_volume(size: int, **fields: Any) -> Any:
        volume = objects.Volume(context, size=size, host="node1@kit-lvm#kitpool",
                                volume_type_id=thin["id"], status="creating",
                                attach_status="detached", project_id="project",
                                user_id="user", availability_zone="nova", **fields)
        volume.create()
        return objects.Volume.get_by_id(context, volume.id)

    def lv(volume: Any) -> dict[str, Any] | None:
        found = kit.backend_find_volume(volume.name)
        return None if found is None else {"size_gb": found.size_gb,
                                           "pool_name": found.pool_name,
                                           "thin": found.thin}

    def status(volume: Any) -> dict[str, Any]:
        volume.refresh()
        return {"status": volume.status, "size": volume.size, "lv": lv(volume)}

    steps: dict[str, Any] = {}
    first = new_volume(2)
    steps["create"] = {"error": error_of(lambda: manager.create_volume(context, first)),
                       **status(first), "get_pool": driver.get_pool(first)}
    manager.extend_volume(context, first, 4, [])
    steps["extend"] = status(first)
    too_big = new_volume(1000)
    steps["create_refused"] = {"error": error_of(lambda: manager.create_volume(
        context, too_big)), **status(too_big)}
    manager.extend_volume(context, first, 400, [])
    steps["extend_refused"] = status(first)
    steps["extend_refused_driver"] = error_of(lambda: driver.extend_volume(first, 400))
    steps["create_refused_driver"] = error_of(lambda: driver.create_volume(too_big))

    snapshot = objects.Snapshot(context, volume_id=first.id, volume_size=first.size,
                                status="creating", project_id="project", user_id="user",
                                volume_type_id=thin["id"], display_name="snap")
    snapshot.create()
    snapshot = objects.Snapshot.get_by_id(context, snapshot.id)
    manager.create_snapshot(context, snapshot)
    snapshot.refresh()
    snapshot_lv = driver.snapshot_name(snapshot)
    steps["snapshot"] = {"status": snapshot.status, "lv_name": snapshot_lv,
                         "found": kit.backend_find_snapshot(snapshot_lv) is not None}
    from_snapshot = new_volume(6, snapshot_id=snapshot.id)
    manager.create_volume(context, from_snapshot,
                          request_spec=objects.RequestSpec(snapshot_id=snapshot.id))
    steps["from_snapshot"] = status(from_snapshot)
    clone = new_volume(4, source_volid=first.id)
    manager.create_volume(context, clone,
                          request_spec=objects.RequestSpec(source_volid=first.id))
    steps["clone"] = status(clone)
    out["capabilities_after_creates"] = reported(manager)

    missing = new_volume(1)
    steps["extend_missing_driver"] = error_of(lambda: driver.extend_volume(missing, 2))
    steps["missing_volume_id"] = missing.id
    zero = objects.Volume.get_by_id(context, missing.id)
    zero.size = 0
    steps["create_zero_driver"] = error_of(lambda: driver.create_volume(zero))
    steps["shrink_driver"] = error_of(lambda: driver.extend_volume(first, 1))

    manager.delete_snapshot(context, snapshot)
    steps["delete_snapshot"] = {"found": kit.backend_find_snapshot(snapshot_lv) is not None}
    for name, volume in (("delete", first), ("delete_from_snapshot", from_snapshot),
                         ("delete_clone", clone)):
        lv_name = volume.name
        manager.delete_volume(context, volume)
        steps[name] = {"lv": kit.backend_find_volume(lv_name) is not None}
    steps["delete_again_driver"] = error_of(lambda: driver.delete_volume(first))

    stats = driver.get_volume_stats(refresh=True)
    stats["pools"][0]["total_capacity_gb"] = -1.0  # the caller's copy, not the driver's
    steps["stats_copy_isolated"] = \
        driver.get_volume_stats()["pools"][0]["total_capacity_gb"] != -1.0
    out["capabilities_end"] = reported(manager)
    out["steps"] = steps

    broken = {}
    for section in ("kit-nopool", "kit-badconf", "kit-nodriver"):
        other = volume_service(section, f"node1@{section}")
        broken[section] = {
            "initialized": other.driver.initialized,
            "do_setup": error_of(lambda d=other.driver: d.do_setup(ctxt())),
            "check_for_setup_error": error_of(
                lambda d=other.driver: d.check_for_setup_error())}
    out["broken"] = broken
    return out


def main(argv: list[str]) -> int:
    command, workdir = argv[1], Path(argv[2])
    start(workdir)
    answer = {"scheduler": run_scheduler, "manager": run_manager}[command](workdir)
    (workdir / "answer.json").write_text(json.dumps(answer, indent=1, sort_keys=True,
                                                    default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
