"""Stats refresh on real device-mapper: this driver against os-brick's path, in the VM lane.

Runs INSIDE the VM (``sudo bash tests/benchmarks/run_realdm.sh`` boots it): builds
its own VG on a sparse loop file in guest RAM with its own lvm.conf
(``realvg.RealVG``), a thin pool, and as many *active* thin LVs as asked
(created through ``lvm`` shell processes reading ``lvcreate`` lines on stdin,
a batch per process, within a time budget). Then, interleaved, median of N
runs: ``get_volume_stats(refresh=True)`` in steady state and right after an
out-of-band ``lvcreate`` by another process, os-brick's path as Cinder calls
it, one bare ``lvs`` of the driver's report, and the pool's device-mapper
status by ioctl alone. Prints one Markdown report. Nothing asserts a time.

    python -m tests.benchmarks.realdm [--lvs 1000] [--runs 5] [--create-budget-s 1500]
"""

from __future__ import annotations

import dataclasses
import gc
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

from lvm_driver.policy.tags import VOLUME_TAG
from lvm_driver.read.dm_status import dm_name, thin_pool_status
from tests.benchmarks import refresh as R
from tests.benchmarks import vm_guest, vm_report
from tests.benchmarks.realvg import GiB, RealVG
from tests.benchmarks.run import Series, _cpu_now, machine
from tests.benchmarks.run import _s as _seconds

MiB = 1024 ** 2
VG_NAME = "dkrealdm"
POOL = "pool"
BATCH = 100  # lvcreate lines per `lvm` shell process


def _s(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs" if seconds < 0.001 else _seconds(seconds)


def _run(argv: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed ({proc.returncode}): "
                           f"{proc.stderr.strip()[-600:]}")
    return proc.stdout


def _thin_lv_count(env: dict[str, str]) -> tuple[int, int]:
    """(thin LVs, of which active) in the benchmark VG."""
    rows = _run(["lvs", "--noheadings", "-o", "lv_name,lv_attr,pool_lv", VG_NAME], env)
    thin = [r.split() for r in rows.splitlines() if len(r.split()) == 3]
    return len(thin), sum(1 for _, attr, _ in thin if attr[4] == "a")


def _lvcreate_line(index: int, size_gb: int) -> str:
    return (f"lvcreate -q -T -V {size_gb}g -n volume-{index:05d} --addtag {VOLUME_TAG} "
            f"{VG_NAME}/{POOL}")


def guest_vg(pool_gb: int) -> RealVG:
    """The benchmark VG's PV: a sparse file in guest RAM, room for a ``pool_gb`` GiB pool;
    16 MiB of metadata area holds thousands of thin LVs."""
    return RealVG(VG_NAME, dev_size_bytes=(pool_gb + 8) * GiB, metadata_area_bytes=16 * MiB)


def build(vg: RealVG, *, lv_count: int, pool_gb: int, lv_gb: int,
          budget_s: float) -> dict[str, Any]:
    """The VG, its pool and up to ``lv_count`` active thin LVs; what it cost."""
    env = vg.env()
    env["HOME"] = str(vg.workdir)  # the lvm shell's history file lands there
    assert vg.device is not None
    _run(["pvcreate", "-q", "--metadatasize", f"{vg.metadata_area_bytes // MiB}m",
          vg.device], env)
    _run(["vgcreate", "-q", VG_NAME, vg.device], env)
    t0 = time.perf_counter()
    _run(["lvcreate", "-q", "-T", "-L", f"{pool_gb}g", f"{VG_NAME}/{POOL}"], env)
    pool_s = time.perf_counter() - t0
    batches: list[dict[str, float]] = []
    problem = ""
    created, started = 0, time.perf_counter()
    while created < lv_count and time.perf_counter() - started < budget_s:
        todo = min(BATCH, lv_count - created)
        script = "".join(_lvcreate_line(created + i, lv_gb) + "\n" for i in range(todo))
        t0 = time.perf_counter()
        proc = subprocess.run(["lvm"], input=script, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False)
        seconds = time.perf_counter() - t0
        now, active = _thin_lv_count(env)
        batches.append({"lvs": now, "seconds": seconds, "per_lv_s": seconds / todo})
        print(f"# {now} thin LVs ({active} active), last {todo} in {seconds:.1f} s",
              file=sys.stderr)
        if now != created + todo:  # measure what there is, and say why it stopped
            problem = (f"an lvm shell of {todo} lvcreates left {now} thin LVs, expected "
                       f"{created + todo}: {proc.stderr.strip()[-300:]}")
            print(f"# {problem}", file=sys.stderr)
            created = now
            break
        created = now
    # one lvcreate process per LV at that size, for comparison (kept: they count)
    single: list[float] = []
    for index in range(created, created + 3):
        t0 = time.perf_counter()
        _run(_lvcreate_line(index, lv_gb).split(), env)
        single.append(time.perf_counter() - t0)
    created += len(single)
    # some data in the pool, so its usage is not zero
    for index in range(4):
        path = f"/dev/mapper/{dm_name(VG_NAME, f'volume-{index:05d}')}"
        with open(path, "r+b", buffering=0) as device:
            for _ in range(16):
                device.write(bytes(MiB))
            os.fsync(device.fileno())
    total, active = _thin_lv_count(env)
    return {"pool_create_s": pool_s, "batches": batches, "single_lvcreate_s": single,
            "thin_lvs": total, "active": active, "created_in_budget": created - len(single),
            "problem": problem}


def _cache_stats(driver: Any) -> Any:
    stats = getattr(driver.vg, "report_cache_stats", None)
    if callable(stats):
        stats = stats()
    if stats is None:
        return None
    if isinstance(stats, dict):
        return dict(stats)
    return dataclasses.asdict(stats) if dataclasses.is_dataclass(stats) else repr(stats)


def _shell_commands(executor: Any) -> int | None:
    value = getattr(executor, "shell_commands_run", None)
    return value if isinstance(value, int) else None


def _brick_pool_line(env: dict[str, str]) -> str:
    """What os-brick's pool query (``lvs --readonly``) prints for the active pool.

    ``--readonly`` turns activation off in LVM, so it never asks device-mapper:
    an empty data% here means os-brick's figure came from refresh.DATA_PERCENT.
    """
    try:
        return _run(["lvs", "--noheadings", "--unit=g", "-o", "size,data_percent",
                     "--separator", ":", "--nosuffix", "--readonly",
                     f"/dev/{VG_NAME}/{POOL}"], env).strip()
    except RuntimeError as exc:
        return f"failed: {exc}"


def measure(vg: RealVG, runs: int) -> dict[str, Any]:
    """Every path, interleaved: a round is one out-of-band lvcreate, then the paths."""
    env = vg.env()
    R.COUNTER.install()
    driver = R.make_driver(vg_name=VG_NAME, conf_dir=str(vg.conf_dir), fill_pool_usage=False,
                           read_session=True, metadata_parse=True)  # a real host's defaults
    driver.do_setup()
    driver.check_for_setup_error()
    brick = R.make_brick(vg_name=VG_NAME, lvm_conf=vg.lvm_conf)
    report_argv = getattr(driver.vg, "report_argv", None)
    paths: dict[str, Callable[[], Any]] = {
        "driver_after_change": lambda: R.driver_refresh(driver),
        "driver": lambda: R.driver_refresh(driver),
        "brick": lambda: R.cinder_refresh(brick),
        "dm_ioctl": lambda: thin_pool_status(VG_NAME, POOL),
    }
    if callable(report_argv):
        argv = report_argv()
        paths["bare"] = lambda: R.bare_lvs(argv, env)
    series = {name: Series() for name in paths}
    shell = {name: [] for name in paths}  # type: dict[str, list[int]]
    cache_before = _cache_stats(driver)
    reports = {name: fn() for name, fn in paths.items()}  # warm-up, untimed
    change_s: list[float] = []
    others = [n for n in paths if n != "driver_after_change"]
    for round_ in range(runs):
        t0 = time.perf_counter()  # an operator's lvcreate, in its own process
        _run(_lvcreate_line(90000 + round_, 1).split(), env)
        change_s.append(time.perf_counter() - t0)
        rest = others[round_ % len(others):] + others[:round_ % len(others)]
        # the first driver refresh after the change, then the rest in rotating order
        for name in ["driver_after_change"] + rest:
            gc.collect()
            R.COUNTER.reset()
            commands0 = driver.executor.commands_run
            shell0 = _shell_commands(driver.executor)
            cpu0 = _cpu_now()
            t0 = time.perf_counter()
            paths[name]()
            wall = time.perf_counter() - t0
            cpu = _cpu_now() - cpu0
            series[name].add(wall, cpu, R.COUNTER.count)
            if name.startswith("driver"):
                shell[name].append((driver.executor.commands_run - commands0,
                                    None if shell0 is None
                                    else _shell_commands(driver.executor) - shell0))
    cache_after = _cache_stats(driver)
    total, active = _thin_lv_count(env)
    pool = reports["driver"]["pools"][0]
    bpool = reports["brick"]["pools"][0]
    status = thin_pool_status(VG_NAME, POOL)
    return {"brick_readonly_lvs": _brick_pool_line(env),
            "series": series, "executor_counts": shell, "cache": (cache_before, cache_after),
            "change_s": change_s, "thin_lvs_end": total, "active_end": active,
            "driver_pool": pool, "brick_pool": bpool, "dm_status": status}


def render(result: dict[str, Any]) -> str:
    b, r = result["build"], result["measure"]
    s: dict[str, Series] = r["series"]
    out = vm_report.header("Real device-mapper (VM lane)", result,
                           "qemu TCG (no KVM), PV a sparse file in guest RAM")
    w = out.append
    w(f"- Every timed figure: median of {result['runs']} runs (min in brackets), after one "
      "untimed warm-up; each round starts with an operator's `lvcreate` in another "
      "process, then this driver's first refresh after it, then the other paths in "
      f"rotating order. Took {result['took_s']:.0f} s.\n")
    batches = b["batches"]
    made = b["created_in_budget"]
    build_s = sum(x["seconds"] for x in batches)
    w(f"Thin pool: {result['pool_gb']} GiB, created in {_s(b['pool_create_s'])}. "
      f"{made:,} thin LVs of {result['lv_gb']} GiB created through {len(batches)} `lvm` shell "
      f"processes ({BATCH} `lvcreate` lines each on stdin) in {build_s:.0f} s "
      f"({_s(build_s / max(made, 1))} per LV; first batch "
      f"{_s(batches[0]['per_lv_s']) if batches else '-'} per LV, last "
      f"{_s(batches[-1]['per_lv_s']) if batches else '-'}); one `lvcreate` process per LV "
      f"at that size: {_s(statistics.median(b['single_lvcreate_s']))}. "
      f"Measured with {b['thin_lvs']:,} to {r['thin_lvs_end']:,} thin "
      f"LVs, {r['active_end']:,} active at the end; an operator's `lvcreate` took "
      f"{_s(statistics.median(r['change_s']))}.\n")
    if b.get("problem"):
        w(f"(Creation stopped early: {b['problem']})\n")
    elif made < result["lv_count"]:
        w(f"(Asked for {result['lv_count']:,} thin LVs; the creation budget of "
          f"{result['budget_s']:.0f} s stopped at {made:,}.)\n")
    labels = {
        "driver": "**this driver**, `get_volume_stats(refresh=True)`, steady state",
        "driver_after_change": "this driver, first refresh after an operator's `lvcreate`",
        "brick": "os-brick `LVM`: `update_volume_group_info()` + `get_volumes()`",
        "bare": "one bare `lvs` of the driver's report (floor of a one-`lvs` refresh)",
        "dm_ioctl": "the pool's device-mapper status alone (`dm_status.thin_pool_status`)",
    }
    brick = s["brick"]
    w("| path | processes per refresh | LVM commands (executor) | wall | CPU (all processes) "
      "| vs os-brick |")
    w("|---|---:|---:|---:|---:|---:|")
    counts = r["executor_counts"]
    for name in ("driver", "driver_after_change", "brick", "bare", "dm_ioctl"):
        if name not in s:
            continue
        x = s[name]
        executor = "-"
        if counts.get(name):
            runs = counts[name]
            fresh = sorted({c for c, _ in runs})
            executor = "/".join(str(c) for c in fresh)
            shells = sorted({sh for _, sh in runs if sh is not None})
            if shells:
                executor += " (shell: " + "/".join(str(c) for c in shells) + ")"
        vs = (f"{brick.median / x.median:.2f}x faster" if name != "brick" else "1")
        w(f"| {labels[name]} | {x.procs} | {executor} | {_s(x.median)} ({_s(x.best)}) | "
          f"{_s(x.cpu_median)} | {vs} |")
    w("")
    before, after = r["cache"]
    if before is None and after is None:
        w("Report cache: the driver has no `report_cache_stats` (every refresh runs a "
          "full report).\n")
    else:
        w(f"Report cache (`VolumeGroup.report_cache_stats`): before the timed runs "
          f"{before}, after {after}.\n")
    p, bp, st = r["driver_pool"], r["brick_pool"], r["dm_status"]
    w("What each path reported for the pool:\n")
    w("| path | state | total GiB | free GiB | provisioned GiB | total_volumes |")
    w("|---|---|---:|---:|---:|---:|")
    w(f"| this driver | {p.get('backend_state')} | {p.get('total_capacity_gb')} | "
      f"{p.get('free_capacity_gb')} | {p.get('provisioned_capacity_gb')} | "
      f"{p.get('total_volumes')} |")
    w(f"| os-brick / Cinder | up | {bp['total_capacity_gb']} | {bp['free_capacity_gb']} | "
      f"{bp['provisioned_capacity_gb']} | {bp['total_volumes']} |")
    w("")
    line = r.get("brick_readonly_lvs", "")
    if line.endswith(":"):
        w(f"os-brick's pool query (`lvs --readonly ... -o size,data_percent`) printed "
          f"`{line}`: no data%, as `--readonly` turns activation off in LVM; its free "
          f"space above comes from the stand-in {R.DATA_PERCENT}% that refresh.make_brick "
          "puts in (os-brick as shipped raises ValueError on the empty field).\n")
    elif line:
        w(f"os-brick's pool query (`lvs --readonly ... -o size,data_percent`) printed "
          f"`{line}`.\n")
    if st is not None:
        w(f"Pool status by ioctl: data {st.data_percent:.2f}% "
          f"({st.used_data_blocks}/{st.total_data_blocks} blocks of "
          f"{st.data_block_bytes // 1024} KiB), metadata {st.metadata_percent:.2f}%, "
          f"transaction {st.transaction_id}, {st.mode}.\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = vm_guest.vg_options(__doc__)
    parser.add_argument("--lv-gb", type=int, default=1)
    args = parser.parse_args(argv)
    if vm_guest.outside_the_vm("realdm"):
        return 2
    started = time.time()
    with guest_vg(args.pool_gb) as vg:
        # (no vgremove at the end: the VM and its RAM-backed PV are thrown away)
        built = build(vg, lv_count=args.lvs, pool_gb=args.pool_gb, lv_gb=args.lv_gb,
                      budget_s=args.create_budget_s)
        print(f"# measuring {args.runs} rounds", file=sys.stderr)
        measured = measure(vg, args.runs)
    result = {
        "command": vm_report.command("realdm"),
        "machine": machine(), "runs": args.runs, "lv_count": args.lvs,
        "budget_s": args.create_budget_s, "pool_gb": args.pool_gb, "lv_gb": args.lv_gb,
        "build": built, "measure": measured, "took_s": time.time() - started}
    vm_report.publish(render(result), args.markdown_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
