"""Does the driver take what real Cinder's scheduler sends it? A sweep, and its figures.

Realistic pool states are built on the simulator with the LVM driver (a thin
pool and the VG's thick pool each), every request is put to real Cinder's
filters and weigher (``cinder_filters_side.py``: AvailabilityZone-,
Capacity- and CapabilitiesFilter, CapacityWeigher, on real BackendState and
PoolState objects) and then, on an untouched copy of the same state, to the
driver itself. One decision is one request on one pool a volume type lets it
use: a create of the thin type, of the thick type or of no type, an extend of
a thin or a thick volume, a snapshot of a thin volume.

    .venv/bin/python -m tests.ecosystem.agreement     # prints the figures

With the default calculation no request the scheduler passes is refused by the
driver for capacity; with ``cinder`` some are, unless the scheduler also runs
DriverFilter with ``capacity.CINDER_CALCULATION_FILTER_FUNCTION``.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driver_kit.exceptions import CapacityExceeded
from driver_kit.loading import load_driver
from tests.ecosystem.support import SimBackend, make_backend, run_cinder_side

BASE_SIZES = (1, 2, 3, 5, 8, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
ELIGIBLE = ["AvailabilityZoneFilter", "CapabilitiesFilter"]


def thin_type(backend: str) -> dict[str, str]:
    """The thin volume type a deployment defines, as the DevStack plugin does."""
    return {"volume_backend_name": backend, "provisioning:type": "thin",
            "thin_provisioning_support": "<is> True"}


def thick_type(backend: str) -> dict[str, str]:
    return {"volume_backend_name": backend, "provisioning:type": "thick",
            "thick_provisioning_support": "<is> True"}


# ---------------------------------------------------------------- the states

@dataclass(frozen=True)
class State:
    """One backend: VG and thin pool sizes, its options, and what is on it.

    ``volumes`` are made through the driver as (name, GiB, GiB written, thick);
    ``by_hand`` are LVM commands an operator ran behind its back ({vg}, {pool}).
    """

    name: str
    vg_gb: int
    pool_gb: int
    volumes: tuple[tuple[str, int, float, bool], ...] = ()
    by_hand: tuple[tuple[str, ...], ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


STATES = (
    State("empty", 60, 50),
    State("busy", 60, 50, (("t1", 100, 12, False), ("t2", 200, 8.5, False),
                           ("t3", 150, 0, False))),
    State("data-nearly-full", 60, 50, (("t1", 300, 46.5, False), ("t2", 40, 0, False))),
    State("at-the-cap", 30, 20, (("t1", 390, 4, False), ("t2", 5, 0, False))),
    State("out-of-band", 60, 40, (("t1", 100, 30, False),),
          (("lvcreate", "-T", "-V", "500g", "-n", "made-by-hand", "{vg}/{pool}"),
           ("lvcreate", "-L", "3g", "-n", "thick-by-hand", "{vg}"))),
    State("reserved-auto", 60, 50, (("t1", 30, 20, False), ("t2", 20, 0, False)),
          options={"reserved_percentage": 10, "max_over_subscription_ratio": "auto"}),
    State("reserved-ratio", 60, 50, (("t1", 60, 25.25, False),),
          options={"reserved_percentage": 5, "max_over_subscription_ratio": "1.5"}),
    State("thick-nearly-full", 40, 20, (("k1", 8, 0, True), ("k2", 9, 0, True),
                                        ("t1", 10, 0, False))),
)


def build(tmp: Path, state: State) -> SimBackend:
    """The state on a fresh simulator, plus a 1 GiB thin and thick volume to extend."""
    backend = make_backend(tmp, state.name, vg_gb=state.vg_gb, pool_gb=state.pool_gb,
                           lvm_offer_thick=True, over_provisioning_calculation="standard",
                           **state.options)
    names = {"vg": backend.options["volume_group"],
             "pool": backend.options["lvm_thin_pool_name"]}
    for argv in state.by_hand:
        backend.operator(*(arg.format(**names) for arg in argv))
    volumes = (("ext-thin", 1, 0, False), ("ext-thick", 1, 0, True)) + state.volumes
    for name, size, written, thick in volumes:
        backend.driver.create_volume(name, size, extra_specs={
            "provisioning:type": "thick" if thick else "thin"})
        if written:
            backend.write(name, written)
    return backend


# ---------------------------------------------------------------- requests

def _sizes(stats: dict[str, Any]) -> list[int]:
    """The base sizes and each side of every edge the pools report."""
    sizes = set(BASE_SIZES)
    for pool in stats["pools"]:
        edges = [pool["max_volume_size_gb"]]
        edges += [f["virtual_free_capacity"] for f in pool["capacity_factors"]]
        reserved = math.floor(pool["total_capacity_gb"] * pool["reserved_percentage"] / 100)
        edges.append((pool["free_capacity_gb"] - reserved) * pool["max_over_subscription_ratio"])
        for edge in edges:
            sizes |= {math.floor(edge), math.floor(edge) + 1}
    return sorted(s for s in sizes if s >= 1)


def requests(backend: SimBackend, host: str) -> list[dict[str, Any]]:
    """Creates of each type, extends of each kind, snapshots of every thin volume."""
    stats = backend.driver.get_volume_stats(refresh=True)
    name = stats["volume_backend_name"]
    out: list[dict[str, Any]] = []
    for size in _sizes(stats):
        for kind, specs in (("thin", thin_type(name)), ("thick", thick_type(name)),
                            ("untyped", {})):
            out.append({"host": host, "op": "create", "kind": kind, "size": size,
                        "extra_specs": specs})
        for kind, specs in (("thin", thin_type(name)), ("thick", thick_type(name))):
            volume = backend.driver.backend_find_volume(f"ext-{kind}")
            out.append({"host": host, "op": "extend", "kind": kind, "volume": volume.name,
                        "pool": volume.pool_name, "size": volume.size_gb,
                        "new_size": volume.size_gb + size, "extra_specs": specs})
    for volume_name in ("ext-thin", "t1", "t2", "t3"):
        volume = backend.driver.backend_find_volume(volume_name)
        if volume is not None and volume.thin:
            out.append({"host": host, "op": "snapshot", "kind": "thin", "volume": volume.name,
                        "pool": volume.pool_name, "size": volume.size_gb,
                        "extra_specs": None})
    return out


# ---------------------------------------------------------------- the driver's side

@contextmanager
def restored(path: Path) -> Iterator[None]:
    """Run something against the state file, then put back its exact bytes."""
    saved = path.read_bytes()
    try:
        yield
    finally:
        path.write_bytes(saved)


def driver_admits(driver: Any, request: dict[str, Any], pool: str) -> bool:
    """Whether the driver does ``request`` on ``pool``; False only on a capacity refusal."""
    try:
        if request["op"] == "create":
            specs = {k: v for k, v in request["extra_specs"].items()
                     if k == "provisioning:type"}
            driver.create_volume("decision", request["size"], extra_specs=specs,
                                 pool_name=pool)
        elif request["op"] == "extend":
            driver.extend_volume(request["volume"], request["new_size"])
        else:
            driver.create_snapshot("decision-snap", request["volume"])
    except CapacityExceeded:
        return False
    return True


# ---------------------------------------------------------------- the sweep

@dataclass
class Tally:
    """Decisions of one scheduler set-up against one driver calculation."""

    counts: Counter[str] = field(default_factory=Counter)
    refused_after_scheduling: list[str] = field(default_factory=list)

    def add(self, op: str, scheduler: bool, driver: bool, what: str) -> None:
        self.counts["decisions"] += 1
        self.counts[f"decisions.{op}"] += 1
        if scheduler == driver:
            self.counts["agreements"] += 1
        elif scheduler:
            self.counts["scheduled_then_refused"] += 1
            self.counts[f"scheduled_then_refused.{op}"] += 1
            self.refused_after_scheduling.append(what)
        else:
            self.counts["refused_by_scheduler_only"] += 1

    def summary(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))


FILTER_SETS = ("default", "default+DriverFilter")


def _driver(backend: SimBackend, calculation: str | None) -> Any:
    """Another driver on the same backend, with ``calculation`` or else the default one."""
    options = {k: v for k, v in backend.options.items()
               if k != "over_provisioning_calculation"}
    if calculation is not None:
        options["over_provisioning_calculation"] = calculation
    driver = load_driver(backend=backend.section, overrides=options)
    driver.do_setup()
    return driver


def cinder_decisions(tmp: Path, backends: list[tuple[str, SimBackend]],
                     all_requests: list[dict[str, Any]], filter_function: str,
                     ) -> dict[str, Any]:
    """Real Cinder's answers for every request under each scheduler set-up."""
    workdir = tmp / "cinder"
    workdir.mkdir(exist_ok=True)
    spec = {"backends": [{"host": host,
                          "capabilities": b.driver.get_volume_stats(refresh=True)}
                         for host, b in backends],
            "filter_sets": [{"name": "eligible", "filters": ELIGIBLE},
                            {"name": "default", "filters": None},
                            {"name": "default+DriverFilter", "filters": None,
                             "add": ["DriverFilter"], "filter_function": filter_function}],
            "requests": all_requests}
    (workdir / "requests.json").write_text(json.dumps(spec))
    return run_cinder_side("", workdir, script="cinder_filters_side.py")


def sweep(tmp: Path, calculations: tuple[str | None, ...] = (None, "standard", "cinder"),
          ) -> dict[str, Any]:
    """Every decision of every state, for each driver calculation and scheduler set-up.

    A calculation of None is the configuration's default; results are keyed
    ``"<calculation> / <filter set>"``, the default one as ``"default (<name>)"``.
    """
    from driver_kit import capacity
    filter_function = getattr(capacity, "CINDER_CALCULATION_FILTER_FUNCTION", "True")
    built = [(f"node1@{state.name}", build(tmp, state)) for state in STATES]
    all_requests = [r for host, b in built for r in requests(b, host)]
    answer = cinder_decisions(tmp, built, all_requests, filter_function)
    sets = answer["filter_sets"]
    drivers = {host: {calc: _driver(b, calc) for calc in calculations} for host, b in built}
    states = {host: Path(b.options["lvm_simulator_state_file"]) for host, b in built}
    tallies = {(calc, name): Tally() for calc in calculations for name in FILTER_SETS}
    placements = {(calc, name): Counter() for calc in calculations for name in FILTER_SETS}
    for index, request in enumerate(all_requests):
        host = request["host"]
        eligible = sets["eligible"]["answers"][index]["passed"]
        if request["op"] != "create":
            eligible = [f"{host}#{request['pool']}"]
        for calc in calculations:
            driver = drivers[host][calc]
            admitted = {}
            for backend_id in eligible:
                with restored(states[host]):
                    admitted[backend_id] = driver_admits(driver, request,
                                                         backend_id.split("#", 1)[1])
            for name in FILTER_SETS:
                cinder = sets[name]["answers"][index]
                for backend_id in eligible:
                    what = (f"{request['op']} {request['kind']} {request['size']}"
                            f"{'->' + str(request['new_size']) if 'new_size' in request else ''}"
                            f" GiB on {backend_id}")
                    tallies[calc, name].add(request["op"], backend_id in cinder["passed"],
                                            admitted[backend_id], what)
                if request["op"] == "create" and cinder["chosen"] is not None:
                    placements[calc, name]["placed"] += 1
                    placements[calc, name]["admitted"] += admitted[cinder["chosen"]]
    def label(calc: str | None) -> str:
        if calc is not None:
            return calc
        some_driver = drivers[built[0][0]][None]
        return f"default ({some_driver.configuration.over_provisioning_calculation})"

    return {"states": len(STATES), "requests": len(all_requests),
            "default_filters": answer["default_filters"],
            "default_weighers": answer["default_weighers"],
            "results": {f"{label(calc)} / {name}": {**tallies[calc, name].summary(),
                                             "placements": dict(placements[calc, name]),
                                             "examples": tallies[calc, name]
                                             .refused_after_scheduling}
                        for calc in calculations for name in FILTER_SETS}}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(sweep(Path(tmp)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
