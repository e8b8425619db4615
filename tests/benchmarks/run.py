"""The benchmark: this project's LVM driver side by side with Cinder's LVM path (os-brick).

Run it through ``tests/benchmarks/run.sh`` (as root; it makes the venv with
os-brick). It prints one Markdown report: the machine, then every measurement
with its median, its minimum and the ratios the targets ask for, all measured
in this one run on the same volume group. Nothing here asserts a time.

    python -m tests.benchmarks.run [--runs 5] [--sizes 100,1000,10000]
                                   [--markdown-out FILE] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import psutil

#: the targets of issue 7, checked against ratios measured in the same run
#: every refresh (nothing changed, and right after a change) vs os-brick's path
TARGET_VS_BRICK = {1_000: 8.0}
#: a refresh with nothing changed / right after a change vs os-brick's path
TARGET_UNCHANGED_VS_BRICK = {10_000: 100.0}
TARGET_CHANGED_VS_BRICK = {10_000: 3.5}
TARGET_VS_BARE = 1.15
TARGET_PARSE_S = 0.5
TARGET_CREATE_COMMANDS = 2.0
TARGET_BURST_COMMANDS = 1.5

LOG = logging.getLogger("driver_kit.benchmark")


# ---------------------------------------------------------------------------
# measuring

def _cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _shell_cpu(executor: Any) -> float:
    """CPU seconds of ``executor``'s lvm shell so far (0 without one): a long-lived
    process that ``RUSAGE_CHILDREN`` never counts."""
    session = getattr(executor, "session", None)
    shell = session.shell if session is not None else None
    pid = shell.pid if shell is not None else None
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


@dataclass
class Series:
    """Repeated measurements of one thing: wall seconds, CPU seconds, processes."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    processes: list[int] = field(default_factory=list)

    def add(self, wall: float, cpu: float, processes: int) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.processes.append(processes)

    @property
    def median(self) -> float:
        return statistics.median(self.wall)

    @property
    def best(self) -> float:
        return min(self.wall)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def procs(self) -> str:
        low, high = min(self.processes), max(self.processes)
        return str(low) if low == high else f"{low}-{high}"


def machine() -> dict[str, Any]:
    import psutil
    cpu_model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        lvm = subprocess.run(["lvm", "version"], capture_output=True, text=True,
                             check=False).stdout.splitlines()[0].split(":", 1)[1].strip()
    except Exception:  # reported, not fatal
        lvm = "unknown"
    try:
        from importlib.metadata import version
        brick = version("os-brick")
    except Exception:
        brick = "not installed"
    return {"cpu_model": cpu_model, "nproc": len(os.sched_getaffinity(0)),
            "memory_gib": round(psutil.virtual_memory().total / 1024 ** 3, 1),
            "kernel": platform.release(), "lvm": lvm, "python": platform.python_version(),
            "os_brick": brick, "hostname": platform.node()}


# ---------------------------------------------------------------------------
# stats refresh on the real VG

def refresh_benchmark(sizes: list[int], runs: int) -> dict[str, Any]:
    from lvm_driver.commands.lvm import parse_lvs_report
    from tests.benchmarks import refresh as R
    from tests.benchmarks.realvg import RealVG

    R.COUNTER.install()
    results: dict[str, Any] = {"sizes": {}, "memory": {}}
    with RealVG() as vg:
        for size in sizes:
            print(f"# stats refresh: restoring a VG with {size} thin LVs", file=sys.stderr)
            vg.restore(size)
            env = vg.env()
            full = R.make_driver(vg_name=vg.vg_name, conf_dir=str(vg.conf_dir),
                                 fill_pool_usage=True)
            full.do_setup()
            full.check_for_setup_error()
            as_is = R.make_driver(vg_name=vg.vg_name, conf_dir=str(vg.conf_dir),
                                  fill_pool_usage=False)
            brick = R.make_brick(vg_name=vg.vg_name, lvm_conf=vg.lvm_conf)
            # both paths again, on an lvm.conf with use_aio = 0 (RealVG.lvm_conf_without_aio)
            full_sync = R.make_driver(vg_name=vg.vg_name,
                                      conf_dir=str(vg.conf_dir_without_aio),
                                      fill_pool_usage=True)
            full_sync.do_setup()
            # the same, its reports through one lvm shell (lvm_read_session)
            full_shell = R.make_driver(vg_name=vg.vg_name, conf_dir=str(vg.conf_dir),
                                       fill_pool_usage=True, read_session=True)
            full_shell.do_setup()
            brick_sync = R.make_brick(vg_name=vg.vg_name, lvm_conf=vg.lvm_conf_without_aio)
            argv = full.vg.report_argv()
            cheapest = ["vgs", "--readonly", "--noheadings", "-o", "vg_name", vg.vg_name]
            changed = R.make_driver(vg_name=vg.vg_name, conf_dir=str(vg.conf_dir),
                                    fill_pool_usage=True)
            changed.do_setup()
            # after a change, the report read from the VG's metadata text (no process)
            parsed = R.make_driver(vg_name=vg.vg_name, conf_dir=str(vg.conf_dir),
                                   fill_pool_usage=True, metadata_parse=True)
            parsed.do_setup()
            paths: dict[str, Callable[[], Any]] = {
                "bare": lambda: R.bare_lvs(argv, env),
                "cheapest": lambda: R.bare_lvs(cheapest, env),
                "driver": lambda: R.driver_refresh(full),
                "driver_changed": lambda: R.driver_refresh_after_change(changed),
                "driver_shell": lambda: R.driver_refresh_after_change(full_shell),
                "driver_parsed": lambda: R.driver_refresh_after_change(parsed),
                "driver_as_is": lambda: R.driver_refresh_after_change(as_is),
                "brick": lambda: R.cinder_refresh(brick),
                "driver_sync": lambda: R.driver_refresh_after_change(full_sync),
                "brick_sync": lambda: R.cinder_refresh(brick_sync),
            }
            executors = {"driver": full.executor, "driver_changed": changed.executor,
                         "driver_as_is": as_is.executor,
                         "driver_sync": full_sync.executor,
                         "driver_shell": full_shell.executor,
                         "driver_parsed": parsed.executor}
            drivers = {"driver": full, "driver_changed": changed, "driver_shell": full_shell,
                       "driver_parsed": parsed}
            series = {name: Series() for name in paths}
            reports: dict[str, Any] = {}
            for name, fn in paths.items():  # warm-up, untimed
                reports[name] = fn()
            if parsed.vg.report() != changed.vg.report():
                raise RuntimeError("the report read from the metadata text is not lvs's")
            names = list(paths)
            for round_ in range(runs):
                order = names[round_ % len(names):] + names[:round_ % len(names)]
                for name in order:
                    gc.collect()
                    R.COUNTER.reset()
                    before_cmds = executors[name].commands_run if name in executors else 0
                    cpu0 = _cpu_now() + _shell_cpu(executors.get(name))
                    t0 = time.perf_counter()
                    paths[name]()
                    wall = time.perf_counter() - t0
                    cpu = _cpu_now() + _shell_cpu(executors.get(name)) - cpu0
                    count = R.COUNTER.count
                    if name in executors:
                        own = executors[name].commands_run - before_cmds
                        if own != count:
                            raise RuntimeError(f"{name}: executor counted {own} LVM "
                                               f"processes, subprocess.Popen {count}")
                    series[name].add(wall, cpu, count)
            # where the driver's time goes: the report's parse alone, in process
            stdout = R.bare_lvs(argv, env)
            parse = []
            for _ in range(runs):
                gc.collect()
                t0 = time.perf_counter()
                parse_lvs_report(stdout, vg.vg_name)
                parse.append(time.perf_counter() - t0)
            pool = reports["driver"]["pools"][0]
            bpool = reports["brick"]["pools"][0]
            results["sizes"][size] = {
                "series": {k: asdict(v) for k, v in series.items()},
                # reports reused / read anew / read for a doubt, over warm-up and runs
                "cache": {k: asdict(d.vg.report_cache_stats) for k, d in drivers.items()},
                "parse_s": parse,
                "driver_pool": {k: pool[k] for k in (
                    "backend_state", "total_capacity_gb", "free_capacity_gb",
                    "provisioned_capacity_gb", "total_volumes")},
                "driver_as_is_pool": {
                    "backend_state": reports["driver_as_is"]["pools"][0]["backend_state"],
                    "down_reason": reports["driver_as_is"]["pools"][0].get("down_reason")},
                "brick_pool": {k: bpool[k] for k in (
                    "total_capacity_gb", "free_capacity_gb", "provisioned_capacity_gb",
                    "total_volumes")},
            }
            # the commands each path ran, once, for the report
            for name in ("driver", "driver_changed", "brick"):
                R.COUNTER.reset()
                paths[name]()
                results["sizes"][size][f"{name}_commands"] = [
                    _short_argv(a) for a in R.COUNTER.argv]
            full_shell.executor.close()
        results["spawn"] = spawn_benchmark(runs)
        biggest = max(sizes)
        if biggest >= 1000:
            vg.restore(biggest)
            for side in ("driver", "brick"):
                results["memory"][side] = _memory_in_child(side, vg)
            results["memory"]["lv_count"] = biggest
    return results


def _short_argv(argv: tuple[str, ...]) -> str:
    words = [a for a in argv if not (a.startswith("LVM_SYSTEM_DIR=") or a in (
        "env", "LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1"))]
    return " ".join(words)


def _memory_in_child(side: str, vg: Any) -> dict[str, Any]:
    """Peak memory of one stats refresh, measured in a fresh process."""
    cmd = [sys.executable, "-m", "tests.benchmarks.run", "--memory-child", side,
           "--vg-name", vg.vg_name, "--conf-dir", str(vg.conf_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                              os.path.abspath(__file__)))))
    if proc.returncode != 0:
        raise RuntimeError(f"memory child {side} failed: {proc.stderr[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory_child(side: str, vg_name: str, conf_dir: str) -> None:
    """One refresh in this fresh process: RSS growth to its peak, and Python's peak."""
    import tracemalloc

    import psutil

    from tests.benchmarks import refresh as R

    logging.basicConfig(level=logging.CRITICAL)
    if side == "driver":
        # as restored: the same lvs and parse, without the filler's copy of the output
        driver = R.make_driver(vg_name=vg_name, conf_dir=conf_dir, fill_pool_usage=False)
        refresh = lambda: R.driver_refresh(driver)  # noqa: E731
    else:
        brick = R.make_brick(vg_name=vg_name, lvm_conf=os.path.join(conf_dir, "lvm.conf"))
        refresh = lambda: R.cinder_refresh(brick)  # noqa: E731
    gc.collect()
    me = psutil.Process()
    reset = True
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the peak RSS (VmHWM) to the current RSS
    except OSError:
        reset = False
    rss0 = me.memory_info().rss
    refresh()
    peak = _vm_hwm()
    gc.collect()
    tracemalloc.start()
    refresh()
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({"rss_before_mib": rss0 / 2 ** 20, "rss_peak_mib": peak / 2 ** 20,
                      "rss_growth_mib": (peak - rss0) / 2 ** 20, "peak_reset": reset,
                      "python_peak_mib": traced_peak / 2 ** 20}))


def _vm_hwm() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def spawn_benchmark(runs: int) -> dict[str, Any]:
    """Starting one process (`true`): the driver's runner against processutils.execute.

    Run in the refresh benchmark's process (os-brick loaded, as in a service),
    because the cost of a fork grows with the parent's memory.
    """
    import psutil
    from oslo_concurrency import processutils

    from lvm_driver.run.executor import ProcessRunner

    runner, env = ProcessRunner(), dict(os.environ)
    paths: dict[str, Callable[[], Any]] = {
        "runner": lambda: runner(["true"], env, 10.0),
        "processutils": lambda: processutils.execute("true"),
    }
    timings: dict[str, list[float]] = {name: [] for name in paths}
    for fn in paths.values():
        fn()
    for _ in range(runs * 4):
        for name, fn in paths.items():
            t0 = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - t0)
    return {"rss_mib": psutil.Process().memory_info().rss / 2 ** 20, **timings}


# ---------------------------------------------------------------------------
# parse and scheduler, in process

def parse_benchmark(lv_count: int, runs: int) -> dict[str, Any]:
    from lvm_driver.commands.lvm import REPORT_FIELDS, parse_lvs_report
    from tests.benchmarks.vgmeta import lvs_report_json

    text = lvs_report_json(lv_count, fields=tuple(REPORT_FIELDS))
    full, loads = [], []
    report = None
    for _ in range(runs):
        report = None  # free the previous run's records here, not inside the timed parse
        gc.collect()
        t0 = time.perf_counter()
        report = parse_lvs_report(text, "benchvg")
        full.append(time.perf_counter() - t0)
        gc.collect()
        t0 = time.perf_counter()
        json.loads(text)
        loads.append(time.perf_counter() - t0)
    assert len(report.lvs) == lv_count + 1
    return {"lv_count": lv_count, "bytes": len(text), "parse_s": full, "json_loads_s": loads}


def scheduler_benchmark(pool_count: int, runs: int) -> dict[str, Any]:
    import random

    from driver_kit import scheduler

    rng = random.Random(3)
    pools = []
    for i in range(pool_count):
        total = rng.randint(100, 100_000)
        free = round(total * rng.random(), 2)
        pools.append({
            "pool_name": f"pool-{i}", "total_capacity_gb": float(total),
            "free_capacity_gb": free,
            "provisioned_capacity_gb": round(total * rng.uniform(0, 30), 2),
            "reserved_percentage": rng.choice((0, 5, 10)),
            "max_over_subscription_ratio": rng.choice((1.0, 2.0, 20.0, "auto")),
            "thin_provisioning_support": rng.random() < 0.8,
            "thick_provisioning_support": rng.random() < 0.5,
            "total_volumes": rng.randint(0, 10_000), "QoS_support": False,
            "multiattach": False, "location_info": f"bench:{i}"})
    stats = {"volume_backend_name": "bench", "vendor_name": "Open Source",
             "driver_version": "1.0.0", "storage_protocol": "iSCSI", "pools": pools}
    request = {"size": 100, "extra_specs": {"provisioning:type": "thin"}}
    timings: dict[str, list[float]] = {"filter": [], "weigh": [], "get_pools": []}
    passing: list[dict[str, Any]] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        passing = [p for p in pools if scheduler.backend_passes(p, request)]
        timings["filter"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        scheduler.weigh(passing, request)
        timings["weigh"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        scheduler.get_pools(stats)
        timings["get_pools"].append(time.perf_counter() - t0)
    return {"pool_count": pool_count, "passing": len(passing), **timings}


# ---------------------------------------------------------------------------
# the report

def _s(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 0.01:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds * 1000:.1f} ms"


def _ok(good: bool) -> str:
    return "met" if good else "**missed**"


def _render_without_aio(refresh: dict[str, Any], w: Callable[[str], None]) -> None:
    """Both paths once more with ``use_aio = 0`` in their lvm.conf (an operator's choice)."""
    rows = [(int(n), {k: Series(**v) for k, v in d["series"].items()})
            for n, d in sorted(refresh["sizes"].items(), key=lambda kv: int(kv[0]))
            if "driver_sync" in d["series"]]
    if not rows:
        return
    w("With `global/use_aio = 0` in the lvm.conf both paths use (LVM then reads "
      "synchronously and has no AIO context to destroy at exit; each LVM process "
      "otherwise waits 28 to 35 ms in `io_destroy` on this kernel):\n")
    w("| thin LVs | this driver, after a change | os-brick | vs os-brick | the same with AIO on "
      "(table above) |")
    w("|---:|---:|---:|---:|---:|")
    for size, s in rows:
        d, b = s["driver_sync"], s["brick_sync"]
        w(f"| {size:,} | {_s(d.median)} ({_s(d.best)}) | {_s(b.median)} ({_s(b.best)}) | "
          f"{b.median / d.median:.2f}x faster | {_s(s['driver_changed'].median)} |")
    w("")


def describe_machine(m: dict[str, Any], *, kernel_note: str = "") -> str:
    """One line of the machine facts ``machine()`` collected."""
    return (f"{m['cpu_model']}, {m['nproc']} CPUs (nproc), {m['memory_gib']} GiB RAM, "
            f"kernel {m['kernel']}{kernel_note}, LVM {m['lvm']}, Python {m['python']}, "
            f"os-brick {m['os_brick']}")


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    out: list[str] = []
    w = out.append
    w("# driver-kit benchmark: stats refresh and creates vs Cinder's LVM path (os-brick)\n")
    w(f"- Command: `{result['command']}`")
    w(f"- Machine: {describe_machine(m, kernel_note=' (no device-mapper)')}")
    w(f"- Load average (1/5/15 min) at start {result['load_start']}, at end "
      f"{result['load_end']}; started {result['started']}, took {result['took_s']:.0f} s")
    w(f"- Every timed figure: median of {result['runs']} runs (min in brackets), paths "
      "interleaved in rotating order, after one untimed warm-up each\n")
    targets: list[tuple[str, str, bool]] = []

    refresh = result.get("refresh")
    if refresh:
        w("## Stats refresh on one real volume group (loop device, restored metadata)\n")
        w("| thin LVs | path | LVM processes | wall | CPU (all processes) | "
          "vs os-brick | vs bare lvs |")
        w("|---:|---|---:|---:|---:|---:|---:|")
        labels = {
            "bare": "one bare `lvs` of the same report (floor)",
            "driver": "**this driver**, `get_volume_stats(refresh=True)`, nothing "
                      "changed (report reused: PV headers read, pool status)",
            "driver_changed": "**this driver**, right after a change (one `lvs`)",
            "driver_as_is": "this driver, right after a change, pool inactive as "
                            "restored (reported down)",
            "brick": "os-brick `LVM`: `update_volume_group_info()` + `get_volumes()`",
            "cheapest": "cheapest LVM command on this VG: `vgs --readonly -o vg_name`",
            "driver_shell": "**this driver**, right after a change, its `lvs` through "
                            "the `lvm` shell (`lvm_read_session`)",
            "driver_parsed": "**this driver**, right after a change, the VG's metadata "
                             "text read from its PV (`lvm_metadata_parse`, the default)",
        }
        reuse: list[str] = []
        for size, data in sorted(refresh["sizes"].items(), key=lambda kv: int(kv[0])):
            size = int(size)
            s = {k: Series(**v) for k, v in data["series"].items()}
            brick, bare = s["brick"].median, s["bare"].median
            for name in [n for n in ("driver", "driver_changed", "driver_shell",
                                     "driver_parsed", "driver_as_is", "brick", "bare",
                                     "cheapest") if n in s]:
                x = s[name]
                vs_brick = (f"{brick / x.median:.2f}x faster (CPU "
                            f"{s['brick'].cpu_median / x.cpu_median:.2f}x)"
                            if name != "brick" else "1")
                vs_bare = f"{x.median / bare:.3f}x" if name != "bare" else "1"
                w(f"| {size:,} | {labels[name]} | {x.procs} | {_s(x.median)} ({_s(x.best)}) "
                  f"| {_s(x.cpu_median)} | {vs_brick} | {vs_bare} |")
            unchanged = brick / s["driver"].median
            after = brick / min(s[name].median for name in (
                "driver_changed", "driver_shell", "driver_parsed") if name in s)
            over = s["driver_changed"].median / bare
            if size in TARGET_VS_BRICK:
                want = TARGET_VS_BRICK[size]
                worst = min(unchanged, after)
                targets.append((f"every refresh >= {want:g}x faster than os-brick at "
                                f"{size:,} LVs", f"{worst:.2f}x", worst >= want))
            if size in TARGET_UNCHANGED_VS_BRICK:
                want = TARGET_UNCHANGED_VS_BRICK[size]
                targets.append((f"nothing changed: >= {want:g}x faster than os-brick at "
                                f"{size:,} LVs", f"{unchanged:.1f}x", unchanged >= want))
            if size in TARGET_CHANGED_VS_BRICK:
                want = TARGET_CHANGED_VS_BRICK[size]
                targets.append((f"right after a change: >= {want:g}x faster than os-brick "
                                f"at {size:,} LVs", f"{after:.2f}x", after >= want))
            if size >= 1000:
                targets.append((f"after a change, within {TARGET_VS_BARE}x of bare lvs at "
                                f"{size:,} LVs", f"{over:.3f}x", over <= TARGET_VS_BARE))
            targets.append((f"0 LVM process starts per steady-state refresh at {size:,} LVs",
                            s["driver"].procs, s["driver"].procs == "0"))
            cache = data.get("cache", {})
            if cache:
                reuse.append(f"- {size:,} LVs: " + "; ".join(
                    f"{k} {c['hits']} / {c['misses']} / {c['doubts']}"
                    + (f" ({c['parsed']} of the misses read from the metadata text, "
                       f"{c['unparsed']} not understood)" if c.get("parsed")
                       or c.get("unparsed") else "")
                    for k, c in cache.items()))
        w("")
        if reuse:
            w("Reports reused (hits) / read anew after a change (misses) / read anew for a "
              "doubt about the headers, per driver instance, warm-up and timed runs:\n")
            w("\n".join(reuse) + "\n")
        w("Ceiling of a refresh that reads the VG with one LVM process (every LVM "
          "command reads and parses the whole VG metadata), os-brick / cheapest LVM "
          "command: " + ", ".join(
              f"{statistics.median(d['series']['brick']['wall']) / statistics.median(d['series']['cheapest']['wall']):.2f}x at {int(n):,} LVs"
              for n, d in sorted(refresh["sizes"].items(), key=lambda kv: int(kv[0]))) + ".\n")
        _render_without_aio(refresh, w)
        spawn = refresh.get("spawn")
        if spawn:
            w(f"Starting one process (`true`) from this benchmark's process "
              f"(RSS {spawn['rss_mib']:.0f} MiB): the driver's runner (`subprocess`, vfork) "
              f"{_s(statistics.median(spawn['runner']))} ({_s(min(spawn['runner']))}), "
              f"`oslo_concurrency.processutils.execute` (its `preexec_fn` makes Python "
              f"fork) {_s(statistics.median(spawn['processutils']))} "
              f"({_s(min(spawn['processutils']))}).\n")
        big = max(refresh["sizes"], key=int)
        d = refresh["sizes"][big]
        w(f"Where the driver's time goes at {int(big):,} LVs right after a change: parsing "
          f"the `lvs` output (JSON + typed records) takes "
          f"{_s(statistics.median(d['parse_s']))} of "
          f"{_s(statistics.median(d['series']['driver_changed']['wall']))}; the rest is "
          "the `lvs` process itself.\n")
        w(f"What each path reports for the same pool at {int(big):,} LVs "
          "(pool usage filled in as an active pool prints it):\n")
        w("| path | state | total GiB | free GiB | provisioned GiB | total_volumes |")
        w("|---|---|---:|---:|---:|---:|")
        p, b = d["driver_pool"], d["brick_pool"]
        w(f"| this driver | {p['backend_state']} | {p['total_capacity_gb']} | "
          f"{p['free_capacity_gb']} | {p['provisioned_capacity_gb']} | {p['total_volumes']} |")
        w(f"| os-brick / Cinder | up | {b['total_capacity_gb']} | {b['free_capacity_gb']} | "
          f"{b['provisioned_capacity_gb']} | {b['total_volumes']} |")
        w(f"| this driver, pool as restored | {d['driver_as_is_pool']['backend_state']} | "
          f"0 | 0 | 0 | 0 |")
        w("")
        def listed(commands: list[str]) -> str:
            return "`" + "`, `".join(commands) + "`" if commands else "none"
        w(f"Commands per refresh: this driver, nothing changed: "
          f"{listed(d['driver_commands'])}; right after a change: "
          f"{listed(d.get('driver_changed_commands', []))}; "
          f"os-brick: {listed(d['brick_commands'])}.\n")
        mem = refresh.get("memory")
        if mem and "driver" in mem:
            w(f"## Peak memory of one stats refresh at {mem['lv_count']:,} LVs "
              "(fresh process each, psutil/VmHWM)\n")
            w("| path | RSS before | RSS peak | growth to peak | Python allocations peak "
              "(tracemalloc) |")
            w("|---|---:|---:|---:|---:|")
            for side, label in (("driver", "this driver (pool as restored: same lvs, same "
                                           "parse)"),
                                ("brick", "os-brick / Cinder")):
                x = mem[side]
                w(f"| {label} | {x['rss_before_mib']:.1f} MiB | {x['rss_peak_mib']:.1f} MiB | "
                  f"{x['rss_growth_mib']:.1f} MiB | {x['python_peak_mib']:.1f} MiB |")
            w("")

    creates = result.get("creates")
    if creates:
        w("## Creates with enforcement (LVM simulator, state file: "
          "the restored real pool is inactive and cannot take thin LVs)\n")
        from tests.benchmarks import creates as C
        w(f"Thin pool {C.POOL_GB} GiB, ratio {C.RATIO:g} (cap {C.CAP_GB:g} GiB), "
          f"{sum(C.PREFILL)} GiB already provisioned by an operator: a burst of "
          f"{C.BURST} x {C.SIZE_GB} GiB creates, of which {C.ROOM} fit. LVM commands are "
          "counted by `executor.commands_run` (one process each on a real host); "
          "over-commits are volumes admitted beyond the cap, from the final state.\n")
        w("| workload | requests | created | refused | LVM commands per create | "
          "per request | creates/s | over-commits |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        labels = {"sequential": "one at a time (8 creates, room for all)",
                  "threads": "burst: 32 threads, one process",
                  "processes": "burst: 4 processes x 8 threads",
                  "no-check": "burst, no admission (a bare lvcreate, as Cinder's driver)"}
        for key in ("sequential", "threads", "processes", "no-check"):
            rows = creates[key]
            med = lambda f: statistics.median(f(r) for r in rows)  # noqa: E731
            per_create = med(lambda r: r["commands"] / r["created"])
            per_request = med(lambda r: r["commands"] / r["requests"])
            rate = med(lambda r: r["created"] / r["wall_s"])
            overs = max(r["over_commits"] for r in rows)
            errors = sum(r["errors"] for r in rows)
            w(f"| {labels[key]} | {rows[0]['requests']} | {med(lambda r: r['created']):.0f} | "
              f"{med(lambda r: r['refused']):.0f} | {per_create:.2f} | {per_request:.2f} | "
              f"{rate:.0f} | {overs}{' (errors: %d)' % errors if errors else ''} |")
            if key == "sequential":
                targets.append(("at most 2 LVM processes per create with enforcement",
                                f"{per_create:.2f}", per_create <= TARGET_CREATE_COMMANDS))
            if key == "threads":
                worst = max(r["commands"] / r["created"] for r in rows)
                targets.append(("< 1.5 LVM processes per create, burst in one process",
                                f"{per_create:.2f} (worst run {worst:.2f})",
                                worst < TARGET_BURST_COMMANDS))
            if key != "no-check":
                targets.append((f"zero over-commits ({labels[key]})", str(overs), overs == 0))
        w("")

    parse = result.get("parse")
    sched = result.get("scheduler")
    if parse or sched:
        w("## In-process costs\n")
        w("| what | median | min |")
        w("|---|---:|---:|")
    if parse:
        med = statistics.median(parse["parse_s"])
        w(f"| parse a {parse['lv_count']:,}-LV `lvs` JSON report "
          f"({parse['bytes'] / 2 ** 20:.1f} MiB) into typed records | {_s(med)} | "
          f"{_s(min(parse['parse_s']))} |")
        w(f"| of which `json.loads` alone | {_s(statistics.median(parse['json_loads_s']))} | "
          f"{_s(min(parse['json_loads_s']))} |")
        targets.append((f"parse of {parse['lv_count']:,} LVs < {TARGET_PARSE_S} s",
                        _s(med), med < TARGET_PARSE_S))
    if sched:
        n = sched["pool_count"]
        w(f"| `driver_kit.scheduler`: capacity filter over {n:,} pools "
          f"({sched['passing']:,} pass) | {_s(statistics.median(sched['filter']))} | "
          f"{_s(min(sched['filter']))} |")
        w(f"| `driver_kit.scheduler.weigh` of the passing pools | "
          f"{_s(statistics.median(sched['weigh']))} | {_s(min(sched['weigh']))} |")
        w(f"| `driver_kit.scheduler.get_pools` of a {n:,}-pool report | "
          f"{_s(statistics.median(sched['get_pools']))} | {_s(min(sched['get_pools']))} |")
    if parse or sched:
        w("")

    if targets:
        w("## Targets, each from this run\n")
        w("| target | measured | |")
        w("|---|---:|---|")
        for name, value, good in targets:
            w(f"| {name} | {value} | {_ok(good)} |")
        w("")
    return "\n".join(out)


# ---------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each measurement")
    parser.add_argument("--sizes", default="100,1000,10000",
                        help="thin LV counts of the real VG (comma separated)")
    parser.add_argument("--parse-lvs", type=int, default=100_000)
    parser.add_argument("--pools", type=int, default=10_000)
    parser.add_argument("--skip", default="",
                        help="comma separated parts to skip: refresh,creates,parse,scheduler")
    parser.add_argument("--markdown-out", help="also write the report to this file")
    parser.add_argument("--json-out", help="write every raw measurement to this file")
    parser.add_argument("--memory-child", choices=("driver", "brick"), help=argparse.SUPPRESS)
    parser.add_argument("--vg-name", help=argparse.SUPPRESS)
    parser.add_argument("--conf-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.memory_child:
        memory_child(args.memory_child, args.vg_name, args.conf_dir)
        return 0

    # SIGTERM unwinds like ^C, so the volume group and loop device are taken down
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    skip = {part for part in args.skip.split(",") if part}
    sizes = [int(x) for x in args.sizes.split(",") if x]
    workdir = tempfile.mkdtemp(prefix="dk-bench-")
    logging.basicConfig(filename=os.path.join(workdir, "benchmark.log"),
                        level=logging.WARNING)
    if "refresh" not in skip and os.geteuid() != 0:
        print("benchmark: the stats-refresh part builds a real LVM volume group on a loop "
              "device and needs root: run `sudo bash tests/benchmarks/run.sh` "
              "(or pass --skip refresh)", file=sys.stderr)
        return 2
    started = time.time()
    result: dict[str, Any] = {
        "command": os.environ.get("DK_BENCH_COMMAND", "python -m tests.benchmarks.run "
                                  + " ".join(argv if argv is not None else sys.argv[1:])),
        "machine": machine(), "runs": args.runs,
        "load_start": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started))}
    if "refresh" not in skip:
        result["refresh"] = refresh_benchmark(sizes, args.runs)
    if "creates" not in skip:
        print("# creates: simulator bursts", file=sys.stderr)
        from tests.benchmarks import creates
        result["creates"] = {k: [asdict(r) for r in v]
                             for k, v in creates.run_all(args.runs).items()}
    if "parse" not in skip:
        print(f"# parse: {args.parse_lvs} LVs", file=sys.stderr)
        result["parse"] = parse_benchmark(args.parse_lvs, args.runs)
    if "scheduler" not in skip:
        print(f"# scheduler: {args.pools} pools", file=sys.stderr)
        result["scheduler"] = scheduler_benchmark(args.pools, args.runs)
    result["load_end"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    result["took_s"] = time.time() - started
    text = render(result)
    print(text)
    if args.markdown_out:
        with open(args.markdown_out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
