"""Write tests/unit/data/cinder_cases.json: inputs and what real Cinder answers.

Run it with a Python that has Cinder installed, as a script of its own (Cinder
imports eventlet, which must stay out of the test process): the project venv
with the ``cinder`` extra, or a venv of its own:

    .venv/bin/pip install -e '.[test,cinder]'
    .venv/bin/python tests/cinder_reference/generate_cases.py

Every output comes from Cinder's own code (its scheduler utilities, a real
``PoolState``, the real ``CapacityFilter`` and the real ``CapacityWeigher``
run through Cinder's weight handler). A case whose inputs make Cinder raise
records the exception's type name under ``raises`` instead of ``output``.
The cases are deterministic (fixed seed), so a rerun gives the same file.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import platform
import random
import sys
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "unit" / "data" / "cinder_cases.json"
SEED = 20250229
TIMESTAMP = datetime.datetime(2025, 1, 1, 12, 0, 0)
HOST = "host@backend"

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

from cinder import objects  # noqa: E402

objects.register_all()

from oslo_config import cfg  # noqa: E402

from cinder.scheduler import host_manager, sched_utils, weights  # noqa: E402
from cinder.scheduler.filters.capacity_filter import CapacityFilter  # noqa: E402
from cinder.scheduler.weights.capacity import CapacityWeigher  # noqa: E402

CONF = cfg.CONF
CONF([], project="cinder", default_config_files=[])
WEIGHT_HANDLER = weights.OrderedHostWeightHandler("cinder.scheduler.weights")


def outcome(call: Callable[[], Any]) -> dict[str, Any]:
    """Cinder's answer, or the name of the exception it raised."""
    try:
        return {"output": call()}
    except Exception as exc:  # noqa: BLE001 - any failure is a recorded outcome
        return {"raises": type(exc).__name__}


def set_global_ratio(value: Any) -> None:
    """Set the option Cinder's host manager reads, as a config file would."""
    CONF.set_override("max_over_subscription_ratio", str(value))


def pool_state(pool: dict[str, Any]) -> host_manager.PoolState:
    """A real PoolState updated from one pool report, as the host manager does."""
    capability = dict(pool, timestamp=TIMESTAMP)
    state = host_manager.PoolState(HOST, None, capability, pool["pool_name"])
    state.update_from_volume_capability(capability)
    return state


def filter_properties(request: dict[str, Any]) -> dict[str, Any]:
    return {"size": request["size"], "new_size": request.get("new_size"),
            "volume_type": {"extra_specs": request.get("extra_specs", {})},
            "request_spec": {"volume_id": "x"}}


def cinder_backend_passes(case: dict[str, Any]) -> bool:
    set_global_ratio(case["global_max_over_subscription_ratio"])
    state = pool_state(case["pool"])
    return CapacityFilter().backend_passes(state, filter_properties(case["request"]))


def cinder_weigh(case: dict[str, Any]) -> list[list[Any]]:
    set_global_ratio(case["global_max_over_subscription_ratio"])
    CONF.set_override("capacity_weight_multiplier", case["multiplier"])
    states = [pool_state(pool) for pool in case["pools"]]
    weighed = WEIGHT_HANDLER.get_weighed_objects(
        [CapacityWeigher], states, filter_properties(case["request"]))
    return [[w.obj.pool_name, w.weight] for w in weighed]


# ---------------------------------------------------------------------------
# inputs

def r2(value: float) -> float:
    return round(value, 2)


def reserved_boundaries(limit: int) -> list[tuple[float, int]]:
    """(total, reserved%) where Cinder's float floor differs from exact math."""
    hits = []
    for total in [50, 90, 100, 150, 170, 180, 200, 300, 1000, 1023.99, 2047.5, 5120]:
        for pct in range(1, 100):
            exact = round(total * 100) * pct // 10000
            if math.floor(total * (pct / 100)) != exact:
                hits.append((total, pct))
    return hits[:limit]


def factor_args(rng: random.Random) -> list[list[Any]]:
    totals = [0, 0.5, 1, 2.01, 10, 100, 1023.99, 1024, 5120, 12345.67]
    reserveds = [0, 1, 5, 29, 50, 100]
    ratios = [1.0, 1.5, 2.75, 20.0, 1, 3]
    combos = [(True, True), (True, False), (False, True), (False, False)]
    cases = []
    i = 0
    for total in totals:
        for reserved in reserveds:
            for thin_support, thin in combos:
                free = [total, r2(total / 2), 0, r2(total * 0.9)][i % 4]
                provisioned = [0, r2(total / 2), r2(total * 3), 1.23, total][i % 5]
                ratio = ratios[i % len(ratios)]
                cases.append([total, free, provisioned, thin_support, ratio, reserved, thin])
                i += 1
    for total, pct in reserved_boundaries(24):
        for thin in (True, False):
            cases.append([total, r2(total - total * pct / 100), 0, True, 2.0, pct, thin])
    for _ in range(160):
        cases.append(random_factor_args(rng))
    return cases


# Inputs outside the stats contract that Cinder's functions still take (or fail
# on): strings, a ratio below 1 or of 0, reserved outside 0..100, negative or
# inconsistent capacities, truthy non-bools, 'infinite' and 'unknown'.
OUTSIDE_CONTRACT_FACTOR_ARGS: list[list[Any]] = [
    ["100", 50, 10, True, 2.0, 0, True],
    ["100", "50", 10, True, 2.0, 0, False],
    [100, "50", 10, False, 1.0, 0, True],
    [100, 50, 10, True, 0.5, 0, True],
    [100, 50, 10, True, 0, 0, True],
    [100, 50, 10, True, 2.0, 101, True],
    [100, 50, 10, True, 2.0, -1, False],
    [100, 50, 10, True, 2.0, "10", True],
    [-1, 0, 0, True, 2.0, 0, True],
    [100, 120, 0, True, 2.0, 0, False],
    [100, 50, -5, True, 2.0, 0, True],
    [100, 50, 10, "yes", 2.0, 0, 1],
    [100, 50, 10, 1, 2.0, 0, 0],
    [100, 50, 10, True, "2.0", 0, True],
    [100, 50, 10, True, "2.0", 0, False],
    ["unknown", 50, 0, True, 2.0, 0, True],
    [100, "infinite", 0, True, 2.0, 0, False],
    [100, 50, None, True, 2.0, 0, True],
]


def random_total(rng: random.Random) -> float | int:
    kind = rng.random()
    if kind < 0.4:
        return rng.randint(0, 20000)
    if kind < 0.8:
        return r2(rng.uniform(0, 20000))
    return r2(rng.uniform(0, 5))


def random_factor_args(rng: random.Random) -> list[Any]:
    total = random_total(rng)
    free = r2(rng.uniform(0, total)) if rng.random() < 0.8 else rng.randint(0, int(total))
    provisioned = rng.choice([0, r2(rng.uniform(0, 3 * total + 1)), rng.randint(0, 40000)])
    ratio = rng.choice([1.0, 2.0, 20.0, r2(rng.uniform(1, 40)), rng.randint(1, 10)])
    reserved = rng.choice([0, 0, rng.randint(0, 100)])
    return [total, free, provisioned, rng.random() < 0.6, ratio, reserved, rng.random() < 0.6]


def ratio_cases(rng: random.Random) -> list[dict[str, Any]]:
    caps: list[dict[str, Any]] = []
    for thin in (True, False, None):
        for ratio in ("absent", None, 0, 1.0, 2.5, "2.0", "10", "auto", 0.8):
            for sizes in ({"total_capacity_gb": 1000, "free_capacity_gb": 400,
                           "provisioned_capacity_gb": 900},
                          {"total_capacity_gb": 1023.99, "free_capacity_gb": 1023.99,
                           "provisioned_capacity_gb": 0},
                          {"total_capacity_gb": 500, "free_capacity_gb": 120.5,
                           "allocated_capacity_gb": 300},
                          {"total_capacity_gb": 500, "free_capacity_gb": 500,
                           "allocated_capacity_gb": 300, "provisioned_capacity_gb": 10.5},
                          {"total_capacity_gb": "infinite", "free_capacity_gb": 100},
                          {"total_capacity_gb": 100, "free_capacity_gb": "unknown"},
                          {}):
                cap = dict(sizes)
                if thin is not None:
                    cap["thin_provisioning_support"] = thin
                if ratio != "absent":
                    cap["max_over_subscription_ratio"] = ratio
                caps.append(cap)
    globals_ = [20.0, "20.0", "auto", "1.5", "5", 1.0, "0.5"]
    cases = [{"capability": cap, "global": globals_[i % len(globals_)]}
             for i, cap in enumerate(caps)]
    # 'auto' from the global option, on the pools where it matters most
    for cap in caps:
        if cap.get("thin_provisioning_support") and "max_over_subscription_ratio" not in cap:
            cases.append({"capability": cap, "global": "auto"})
    # inputs Cinder itself fails on: used capacity of -1 under 'auto', and a
    # capitalised 'Auto' (Cinder's config refuses it; a pool can still send it)
    thin_auto = {"total_capacity_gb": 100, "free_capacity_gb": 101,
                 "provisioned_capacity_gb": 10, "thin_provisioning_support": True}
    cases.append({"capability": thin_auto, "global": "auto"})
    cases.append({"capability": dict(thin_auto, free_capacity_gb=50), "global": "Auto"})
    cases.append({"capability": dict(thin_auto, free_capacity_gb=50,
                                     max_over_subscription_ratio="AUTO"), "global": "20.0"})
    # a ratio of 0 on both sides, and a global ratio below 1
    cases.append({"capability": dict(thin_auto, free_capacity_gb=50,
                                     max_over_subscription_ratio=0), "global": "0.0"})
    cases.append({"capability": dict(thin_auto, free_capacity_gb=50), "global": "0.5"})
    for _ in range(60):
        total = random_total(rng)
        cap = {"total_capacity_gb": total, "free_capacity_gb": r2(rng.uniform(0, total)),
               "thin_provisioning_support": rng.random() < 0.8}
        cap[rng.choice(["provisioned_capacity_gb", "allocated_capacity_gb"])] = \
            rng.choice([0, r2(rng.uniform(0, 5 * total + 1))])
        if rng.random() < 0.6:
            cap["max_over_subscription_ratio"] = rng.choice(
                ["auto", r2(rng.uniform(1, 30)), "3.5", 2])
        cases.append({"capability": cap, "global": rng.choice(["20.0", "auto", 2.0])})
    return cases


def pool(name: str, **stats: Any) -> dict[str, Any]:
    return {"pool_name": name, **stats}


POOLS = [
    pool("thin", total_capacity_gb=1000, free_capacity_gb=600, provisioned_capacity_gb=1500,
         reserved_percentage=0, max_over_subscription_ratio=2.0,
         thin_provisioning_support=True, thick_provisioning_support=False),
    pool("thin_nearly_full", total_capacity_gb=1000, free_capacity_gb=10,
         provisioned_capacity_gb=1990, reserved_percentage=0, max_over_subscription_ratio=2.0,
         thin_provisioning_support=True, thick_provisioning_support=False),
    pool("thin_ratio_string", total_capacity_gb=1000, free_capacity_gb=800,
         provisioned_capacity_gb=1000, reserved_percentage=10,
         max_over_subscription_ratio="2.0", thin_provisioning_support=True),
    pool("thin_auto", total_capacity_gb=1000, free_capacity_gb=700,
         provisioned_capacity_gb=900, reserved_percentage=5, max_over_subscription_ratio="auto",
         thin_provisioning_support=True, thick_provisioning_support=False),
    pool("thin_auto_empty", total_capacity_gb=200, free_capacity_gb=200,
         provisioned_capacity_gb=0, reserved_percentage=0, max_over_subscription_ratio="auto",
         thin_provisioning_support=True),
    pool("thin_global_ratio", total_capacity_gb=300, free_capacity_gb=250,
         provisioned_capacity_gb=450, reserved_percentage=0, thin_provisioning_support=True,
         thick_provisioning_support=False),
    pool("thin_ratio_below_one", total_capacity_gb=1000, free_capacity_gb=900,
         provisioned_capacity_gb=100, reserved_percentage=0, max_over_subscription_ratio="0.8",
         thin_provisioning_support=True),
    pool("thin_and_thick", total_capacity_gb=500, free_capacity_gb=100,
         provisioned_capacity_gb=700, reserved_percentage=0, max_over_subscription_ratio=1.5,
         thin_provisioning_support=True, thick_provisioning_support=True),
    pool("thick", total_capacity_gb=500, free_capacity_gb=120, provisioned_capacity_gb=350,
         reserved_percentage=0, thin_provisioning_support=False,
         thick_provisioning_support=True),
    pool("thick_reserved", total_capacity_gb=500, free_capacity_gb=150,
         provisioned_capacity_gb=300, reserved_percentage=20, max_over_subscription_ratio=1.0,
         thin_provisioning_support=False, thick_provisioning_support=True),
    pool("legacy_allocated", total_capacity_gb=800, free_capacity_gb=500,
         allocated_capacity_gb=300, reserved_percentage=0),
    pool("legacy_minimal", total_capacity_gb=800, free_capacity_gb=90),
    pool("free_infinite", total_capacity_gb="infinite", free_capacity_gb="infinite",
         reserved_percentage=0, thin_provisioning_support=True),
    pool("free_unknown", total_capacity_gb=100, free_capacity_gb="unknown",
         reserved_percentage=10),
    pool("total_unknown", total_capacity_gb="unknown", free_capacity_gb=100,
         reserved_percentage=0, thin_provisioning_support=True),
    pool("total_infinite_reserved", total_capacity_gb="infinite", free_capacity_gb=100,
         reserved_percentage=10),
    pool("empty", total_capacity_gb=0, free_capacity_gb=0, provisioned_capacity_gb=0,
         reserved_percentage=0, thin_provisioning_support=True,
         max_over_subscription_ratio=20.0),
    pool("free_none", total_capacity_gb=100, free_capacity_gb=None, reserved_percentage=0),
    pool("free_missing", total_capacity_gb=100, provisioned_capacity_gb=10,
         thin_provisioning_support=True),
    pool("two_decimals", total_capacity_gb=1023.99, free_capacity_gb=511.5,
         provisioned_capacity_gb=1535.99, reserved_percentage=3, max_over_subscription_ratio=1.5,
         thin_provisioning_support=True, thick_provisioning_support=True),
    pool("reserved_float_floor", total_capacity_gb=100, free_capacity_gb=72,
         provisioned_capacity_gb=0, reserved_percentage=29, max_over_subscription_ratio=1.0,
         thin_provisioning_support=True, thick_provisioning_support=True),
    pool("reserved_all", total_capacity_gb=100, free_capacity_gb=100,
         provisioned_capacity_gb=0, reserved_percentage=100, max_over_subscription_ratio=2.0,
         thin_provisioning_support=True, thick_provisioning_support=True),
]

REQUESTS = [
    {"size": 1, "new_size": None, "extra_specs": {}},
    {"size": 10, "new_size": None, "extra_specs": {"provisioning:type": "thin"}},
    {"size": 100, "new_size": None, "extra_specs": {"provisioning:type": "thick"}},
    {"size": 500, "new_size": None, "extra_specs": {}},
    {"size": 1000, "new_size": None, "extra_specs": {"provisioning:type": "thin"}},
    {"size": 2000, "new_size": None, "extra_specs": {}},
    {"size": 72, "new_size": None, "extra_specs": {"provisioning:type": "thick"}},
    {"size": 0, "new_size": None, "extra_specs": {}},
    {"size": 10, "new_size": 110, "extra_specs": {"provisioning:type": "thick"}},
    {"size": 400, "new_size": 510, "extra_specs": {}},
    {"size": 100, "new_size": 100, "extra_specs": {}},
]

# Requests the kit refuses (negative, fractional, shrinking); Cinder's answer is
# recorded to show it does not refuse them itself.
ODD_REQUESTS = [
    {"size": -1, "new_size": None, "extra_specs": {}},
    {"size": 1.5, "new_size": None, "extra_specs": {}},
    {"size": 100, "new_size": 50, "extra_specs": {}},
]


def random_pool(rng: random.Random, name: str) -> dict[str, Any]:
    total = random_total(rng)
    stats: dict[str, Any] = {"total_capacity_gb": total,
                             "free_capacity_gb": r2(rng.uniform(0, total))}
    if rng.random() < 0.85:
        stats["provisioned_capacity_gb"] = rng.choice([0, r2(rng.uniform(0, 3 * total + 1))])
    else:
        stats["allocated_capacity_gb"] = rng.randint(0, int(total) + 1)
    if rng.random() < 0.8:
        stats["reserved_percentage"] = rng.choice([0, 0, 5, 10, 20, rng.randint(0, 99)])
    ratio = rng.choice(["absent", 1.0, 2.0, 20.0, "1.5", "auto", r2(rng.uniform(1, 25))])
    if ratio != "absent":
        stats["max_over_subscription_ratio"] = ratio
    thin = rng.random() < 0.7
    stats["thin_provisioning_support"] = thin
    stats["thick_provisioning_support"] = (not thin) or rng.random() < 0.4
    if rng.random() < 0.07:
        stats[rng.choice(["total_capacity_gb", "free_capacity_gb"])] = \
            rng.choice(["infinite", "unknown"])
    return pool(name, **stats)


def random_request(rng: random.Random) -> dict[str, Any]:
    spec = rng.choice([{}, {"provisioning:type": "thin"}, {"provisioning:type": "thick"}])
    size = rng.choice([0, 1, rng.randint(1, 100), rng.randint(1, 5000)])
    new_size = None
    if rng.random() < 0.25:
        new_size = size + rng.randint(0, 3000)
    return {"size": size, "new_size": new_size, "extra_specs": spec}


def backend_cases(rng: random.Random) -> list[dict[str, Any]]:
    cases = []
    for i, p in enumerate(POOLS):
        for j, request in enumerate(REQUESTS):
            for global_ratio in ("20.0", "auto"):
                cases.append({"pool": p, "global_max_over_subscription_ratio": global_ratio,
                              "request": request})
            if "max_over_subscription_ratio" not in p and (i + j) % 2 == 0:
                cases.append({"pool": p, "global_max_over_subscription_ratio": 1.5,
                              "request": request})
    for p in POOLS[:3]:
        for request in ODD_REQUESTS:
            cases.append({"pool": p, "global_max_over_subscription_ratio": "20.0",
                          "request": request})
    for k in range(150):
        cases.append({"pool": random_pool(rng, f"random{k}"),
                      "global_max_over_subscription_ratio": rng.choice(["20.0", "auto", "3"]),
                      "request": random_request(rng)})
    return cases


def weigh_cases(rng: random.Random) -> list[dict[str, Any]]:
    by_name = {p["pool_name"]: p for p in POOLS}
    groups = [
        ["thin", "thin_nearly_full", "thick"],
        ["thin_and_thick", "two_decimals", "thick_reserved", "legacy_allocated"],
        ["thin", "free_infinite", "thick", "total_unknown"],
        ["free_unknown", "thin_auto", "free_infinite"],
        ["free_infinite", "total_unknown"],
        ["thin_auto_empty"],
        ["thin_global_ratio", "legacy_minimal", "reserved_float_floor", "empty"],
        ["thick", "thick"],
        ["thin", "free_none"],
    ]
    requests = [{"size": 1, "new_size": None, "extra_specs": {}},
                {"size": 50, "new_size": None, "extra_specs": {"provisioning:type": "thick"}}]
    cases = []
    for g, names in enumerate(groups):
        pools = [dict(by_name[n]) for n in names]
        if names == ["thick", "thick"]:
            pools[1]["pool_name"] = "thick_twin"
        for m, multiplier in enumerate([1.0, -1.0, 2.5, 0.0, -0.5]):
            for r, request in enumerate(requests):
                cases.append({"pools": pools, "request": request, "multiplier": multiplier,
                              "global_max_over_subscription_ratio":
                                  ["20.0", "auto"][(g + m + r) % 2]})
    for k in range(70):
        pools = [random_pool(rng, f"p{i}") for i in range(rng.randint(1, 6))]
        if rng.random() < 0.2:
            pools.append(dict(pools[0], pool_name="p0_twin"))
        cases.append({"pools": pools, "request": random_request(rng),
                      "multiplier": rng.choice([1.0, -1.0, 2.0, -3.5, 0.5, 10.0]),
                      "global_max_over_subscription_ratio": rng.choice(["20.0", "auto"])})
    return cases


# ---------------------------------------------------------------------------

def build() -> dict[str, Any]:
    rng = random.Random(SEED)
    sections: dict[str, list[dict[str, Any]]] = {}
    sections["capacity_factors"] = [
        {"input": args, **outcome(lambda a=args: sched_utils.calculate_capacity_factors(*a))}
        for args in factor_args(rng) + OUTSIDE_CONTRACT_FACTOR_ARGS]
    sections["virtual_free"] = [
        {"input": args,
         **outcome(lambda a=args: sched_utils.calculate_virtual_free_capacity(*a))}
        for args in [random_factor_args(rng) for _ in range(200)] + factor_args(rng)[::4]
        + OUTSIDE_CONTRACT_FACTOR_ARGS]
    sections["max_over_subscription_ratio"] = [
        {"input": case, **outcome(lambda c=case: sched_utils.calculate_max_over_subscription_ratio(
            dict(c["capability"]), c["global"]))}
        for case in ratio_cases(rng)]
    sections["backend_passes"] = [
        {"input": case, **outcome(lambda c=case: cinder_backend_passes(c))}
        for case in backend_cases(rng)]
    sections["weigh"] = [
        {"input": case, **outcome(lambda c=case: cinder_weigh(c))}
        for case in weigh_cases(rng)]
    return sections


def dump(sections: dict[str, list[dict[str, Any]]]) -> str:
    """JSON with one case per line, so a diff shows which cases changed."""
    script = Path(__file__).resolve().relative_to(REPO)
    python = Path(sys.executable)
    if python.is_relative_to(REPO):  # the project's own venv: no machine-specific path
        python = python.relative_to(REPO)
    header = {
        "cinder_version": version("cinder"),
        "python": platform.python_version(),
        "seed": SEED,
        "command": f"{python} {script}",
        "note": "inputs and real Cinder outputs; 'raises' names the exception "
                "Cinder raised instead of answering. Do not edit by hand.",
        "counts": {name: len(cases) for name, cases in sections.items()},
    }
    parts = ['{\n"header": ' + json.dumps(header, sort_keys=True)]
    for name, cases in sections.items():
        lines = ",\n".join(json.dumps(c, sort_keys=True, allow_nan=False,
                                      separators=(",", ":")) for c in cases)
        parts.append(f'"{name}": [\n{lines}\n]')
    return ",\n".join(parts) + "\n}\n"


def main() -> None:
    os.chdir(REPO)
    text = dump(build())
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(REPO)} ({len(text)} bytes): "
          + ", ".join(f"{k}={v}" for k, v in json.loads(text)["header"]["counts"].items()))


if __name__ == "__main__":
    main()
