"""Cinder's scheduler filters and weighers on real backend and pool states, apart.

    python tests/ecosystem/cinder_filters_side.py WORKDIR

WORKDIR/requests.json holds the backends (``host`` and the ``capabilities``
their volume managers publish), the filter sets to run and the requests, each
naming the host whose pools it is put to; the answer is written to
WORKDIR/answer.json. Each backend becomes a real
``BackendState`` updated from its capabilities, with a real ``PoolState`` per
pool, exactly as Cinder's HostManager builds them; each request goes through
the named filters with the filter properties Cinder's FilterScheduler builds
for a create, an extend or a snapshot, and the pools that pass are ranked by
the default weighers (``CapacityWeigher``). Run in a process of its own for the
reason given in cinder_side.py (importing Cinder imports eventlet).
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore")  # Cinder's dependencies warn at import: not ours to fix
logging.disable(logging.CRITICAL)

from cinder import objects  # noqa: E402

objects.register_all()

from oslo_config import cfg  # noqa: E402

from cinder.scheduler import filters, host_manager, weights  # noqa: E402

CONF = cfg.CONF
TIMESTAMP = datetime.datetime(2025, 1, 1, 12, 0, 0)
SERVICE = {"availability_zone": "nova", "disabled": False}


def backend_states(backends: list[dict[str, Any]], filter_function: str | None,
                   ) -> list[host_manager.PoolState]:
    """Every pool of every backend, as the HostManager holds them."""
    pools = []
    for backend in backends:
        capabilities = dict(backend["capabilities"], timestamp=TIMESTAMP,
                            pools=[dict(p) for p in backend["capabilities"]["pools"]])
        if filter_function is not None:  # what the volume manager appends from cinder.conf
            capabilities["filter_function"] = filter_function
        state = host_manager.BackendState(backend["host"], None)
        state.update_from_volume_capability(capabilities, service=SERVICE)
        pools += list(state.pools.values())
    return pools


def filter_properties(request: dict[str, Any]) -> dict[str, Any]:
    """What FilterScheduler._get_weighted_candidates hands the filters and weighers."""
    volume_type = {"extra_specs": request["extra_specs"]} \
        if request["extra_specs"] is not None else {}  # a snapshot's request has no type
    properties = {"size": request["size"], "availability_zone": None, "user_id": "user",
                  "metadata": {}, "qos_specs": None, "volume_type": volume_type,
                  "resource_type": volume_type,
                  "request_spec": {"volume_id": "request", "volume_type": volume_type,
                                   "volume_properties": {"size": request["size"]}}}
    if request.get("new_size"):  # the scheduler manager adds it for an extend
        properties["new_size"] = request["new_size"]
    return properties


def answer(spec: dict[str, Any]) -> dict[str, Any]:
    handler = filters.BackendFilterHandler("cinder.scheduler.filters")
    by_name = {cls.__name__: cls for cls in handler.get_all_classes()}
    weigher = weights.OrderedHostWeightHandler("cinder.scheduler.weights")
    weigher_classes = [cls for cls in weigher.get_all_classes()
                       if cls.__name__ in CONF.scheduler_default_weighers]
    out: dict[str, Any] = {"default_filters": list(CONF.scheduler_default_filters),
                           "default_weighers": list(CONF.scheduler_default_weighers),
                           "filter_sets": {}}
    for filter_set in spec["filter_sets"]:
        names = (filter_set.get("filters") or list(CONF.scheduler_default_filters)) \
            + filter_set.get("add", [])
        classes = [by_name[name] for name in names]
        pools = backend_states(spec["backends"], filter_set.get("filter_function"))
        answers = []
        for request in spec["requests"]:
            properties = filter_properties(request)
            candidates = [pool for pool in pools
                          if pool.host.partition("#")[0] == request["host"]]
            passed = list(handler.get_filtered_objects(classes, candidates, properties) or [])
            ranked = weigher.get_weighed_objects(weigher_classes, passed, properties) \
                if passed else []
            answers.append({"passed": sorted(p.backend_id for p in passed),
                            "chosen": ranked[0].obj.backend_id if ranked else None})
        out["filter_sets"][filter_set["name"]] = {"filters": names, "answers": answers}
    return out


def main(argv: list[str]) -> int:
    workdir = Path(argv[1])
    CONF([], project="cinder", default_config_files=[])
    spec = json.loads((workdir / "requests.json").read_text())
    (workdir / "answer.json").write_text(json.dumps(answer(spec)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
