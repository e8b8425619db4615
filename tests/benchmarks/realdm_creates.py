"""Creates and refreshes on real LVM at 1,000 and 10,000 thin LVs, in the VM lane.

Runs INSIDE the VM (``sudo bash tests/benchmarks/run_realdm.sh --creates`` boots it)
with the project's venv (Cinder and os-brick). Each size's VG is restored from
generated metadata (``vgmeta``: ``vgcfgrestore``, seconds instead of hours of
``lvcreate`` under TCG) with the pool's transaction id 0 and an all-zero
metadata LV, so the pool activates with empty kernel metadata (``thin_check``
skipped for that one activation) and takes new thin LVs: the restored ones are
never activated. Then rounds, paths in rotating order, each creating one 1 GiB
thin LV:

- **bare**: one ``lvcreate`` process with exactly the driver's argv, and this
  driver's first ``get_volume_stats(refresh=True)`` after it (an operator's change),
  next to os-brick's refresh as Cinder's LVM driver does it;
- **driver**: ``ThinLVMDriver.create_volume``: the admission lock, the admission read
  (after the previous create: only what changed is parsed), the ``lvcreate``; the
  ``lvcreate`` process's own time and the lock's hold time measured apart;
- **cinder**: Cinder's ``LVMVolumeDriver.create_volume`` through os-brick (its
  commands in this process, no rootwrap: that favours it).

Prints one Markdown report. Nothing asserts a time.

    python -m tests.benchmarks.realdm_creates [--sizes 1000,10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
import uuid
import warnings
from typing import Any, Iterator

from lvm_driver.commands import lvm_argv
from lvm_driver.policy.tags import VOLUME_TAG
from lvm_driver.run.command import CommandResult
from lvm_driver.run.executor import ProcessRunner
from tests.benchmarks import refresh as R
from tests.benchmarks import vgmeta, vm_guest, vm_report
from tests.benchmarks.realvg import GiB, RealVG, _run
from tests.benchmarks.run import machine

MiB = 1024 ** 2
VG_NAME = "dkcreates"
POOL = f"{VG_NAME}-pool"  # the name Cinder's LVM driver gives its pool


def restore_active(vg: RealVG, lv_count: int) -> None:
    """The VG with a thin pool of ``lv_count`` thin LVs, the pool active and empty in
    the kernel (transaction 0), so new thin LVs can be made in it."""
    assert vg.device is not None
    layout = vgmeta.plan_vg(vg_name=vg.vg_name, device=vg.device,
                            dev_size_bytes=vg.dev_size_bytes, lv_count=lv_count,
                            pool_name=POOL, metadata_area_bytes=vg.metadata_area_bytes,
                            snapshot_every=0, max_size_gib=1)
    meta = vg.workdir / f"{vg.vg_name}-{lv_count}.vg"
    meta.write_text(vgmeta.metadata_text(layout, pool_transaction_id=0))
    env = vg.env()
    _run(["pvcreate", "--yes", "--uuid", layout.pv_uuid, "--restorefile", str(meta),
          "--metadatasize", f"{layout.metadata_area_bytes // 1024}k", vg.device], env)
    _run(["vgcfgrestore", "--force", "--file", str(meta), vg.vg_name], env)
    # the restored metadata LV is zeros: the kernel formats it, thin_check would refuse
    _run(["lvchange", "-ay", "--config", 'global/thin_check_executable=""',
          f"{vg.vg_name}/{POOL}"], env)


class TimedRunner:
    """The driver's process runner, keeping each command's wall time."""

    def __init__(self) -> None:
        self._runner = ProcessRunner()
        self.calls: list[tuple[str, float]] = []

    def __call__(self, argv: list[str], env: dict[str, str], timeout_s: float) -> CommandResult:
        started = time.perf_counter()
        try:
            return self._runner(argv, env, timeout_s)
        finally:
            self.calls.append((argv[0], time.perf_counter() - started))


def make_driver(vg: RealVG, runner: TimedRunner) -> Any:
    from driver_kit import load_backend_config
    from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
    from lvm_driver.run.executor import LVMExecutor
    overrides = {"volume_group": vg.vg_name, "lvm_thin_pool_name": POOL,
                 "lvm_create_thin_pool": False, "lock_path": str(vg.workdir / "locks"),
                 "lvm_conf_file": vg.lvm_conf, "lvm_command_timeout": 600.0,
                 "lvm_read_session": True, "lvm_metadata_parse": True,
                 "max_over_subscription_ratio": "1000"}
    conf = load_backend_config(extra_opts=LVM_OPTS, overrides=overrides)
    executor = LVMExecutor(lvm_system_dir=str(vg.conf_dir), timeout_s=600.0, runner=runner,
                           read_session=True)
    driver = ThinLVMDriver(conf, executor=executor)
    driver.do_setup()
    driver.check_for_setup_error()
    return driver


def make_cinder(vg: RealVG, brick: Any) -> Any:
    """Cinder's LVM driver on the same VG and pool, given os-brick's LVM."""
    with warnings.catch_warnings():  # eventlet's deprecation notice, on import
        warnings.simplefilter("ignore")
        from cinder import objects
        objects.register_all()
        from cinder.volume import configuration
        from cinder.volume.drivers import lvm as cinder_lvm
    from oslo_config import cfg
    conf = configuration.Configuration(cinder_lvm.volume_opts, config_group="dk_creates")
    for name, value in (("volume_group", vg.vg_name), ("lvm_type", "thin"),
                        ("lvm_conf_file", vg.lvm_conf)):
        cfg.CONF.set_override(name, value, group="dk_creates")
    return cinder_lvm.LVMVolumeDriver(vg_obj=brick, configuration=conf)


@contextlib.contextmanager
def lock_timer(driver: Any, held: list[float]) -> Iterator[None]:
    """Each admission lock's hold time (acquire to release) appended to ``held``."""
    gate = driver._gate
    make = gate._external_lock

    def timed(key: str) -> Any:
        lock = make(key)
        acquire, release = lock.acquire, lock.release
        started: list[float] = []

        def on_acquire(*args: Any, **kwargs: Any) -> Any:
            result = acquire(*args, **kwargs)
            started.append(time.perf_counter())
            return result

        def on_release(*args: Any, **kwargs: Any) -> Any:
            result = release(*args, **kwargs)
            if started:
                held.append(time.perf_counter() - started.pop())
            return result

        lock.acquire, lock.release = on_acquire, on_release
        return lock

    gate._external_lock = timed
    try:
        yield
    finally:
        del gate._external_lock


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure(vg: RealVG, lv_count: int, runs: int) -> dict[str, Any]:
    restore_active(vg, lv_count)
    env = vg.env()
    runner = TimedRunner()
    driver = make_driver(vg, runner)
    brick = R.make_brick(vg_name=vg.vg_name, lvm_conf=vg.lvm_conf, pool_name=POOL)
    cinder = make_cinder(vg, brick)
    driver.create_volume(f"volume-warm-{uuid.uuid4()}", 1)  # untimed: reads learned
    R.driver_refresh(driver)
    R.cinder_refresh(brick)
    out: dict[str, list[float]] = {key: [] for key in (
        "bare", "driver", "driver_lvcreate", "driver_own", "lock_held", "cinder",
        "refresh_after_change", "brick_refresh", "refresh_unchanged")}
    held: list[float] = []
    paths = ["bare", "driver", "cinder"]
    with lock_timer(driver, held):
        for round_ in range(runs):
            for name in paths[round_ % 3:] + paths[:round_ % 3]:
                volume = f"volume-{uuid.uuid4()}"
                if name == "bare":
                    argv = lvm_argv.create_thin(vg.vg_name, volume, GiB, pool=POOL,
                                                tags=(VOLUME_TAG,))
                    started = time.perf_counter()
                    subprocess.run(argv, env=env, check=True, capture_output=True)
                    out["bare"].append(time.perf_counter() - started)
                    started = time.perf_counter()  # an operator's change, then a refresh
                    R.driver_refresh(driver)
                    out["refresh_after_change"].append(time.perf_counter() - started)
                    started = time.perf_counter()
                    R.driver_refresh(driver)
                    out["refresh_unchanged"].append(time.perf_counter() - started)
                    R.cinder_refresh(brick)  # os-brick's once untimed: the same change seen
                    started = time.perf_counter()
                    R.cinder_refresh(brick)
                    out["brick_refresh"].append(time.perf_counter() - started)
                elif name == "driver":
                    runner.calls.clear()
                    del held[:]
                    started = time.perf_counter()
                    driver.create_volume(volume, 1)
                    wall = time.perf_counter() - started
                    process = sum(s for command, s in runner.calls if command == "lvcreate")
                    out["driver"].append(wall)
                    out["driver_lvcreate"].append(process)
                    out["driver_own"].append(wall - process)
                    out["lock_held"].append(sum(held))
                else:
                    started = time.perf_counter()
                    cinder.create_volume({"name": volume, "size": 1})
                    out["cinder"].append(time.perf_counter() - started)
    stats = driver.vg.report_cache_stats
    return {"lv_count": lv_count, "series": out, "cache": stats}


def measure_size(lv_count: int, runs: int) -> dict[str, Any]:
    """``measure`` on a VG of its own, deactivated after (its loop device then goes)."""
    with RealVG(VG_NAME, dev_size_bytes=64 * GiB,
                metadata_area_bytes=max(8, lv_count // 200) * MiB) as vg:
        try:
            return measure(vg, lv_count, runs)
        finally:
            subprocess.run(["vgchange", "-an", VG_NAME], env=vg.env(), check=False,
                           capture_output=True)


def render(result: dict[str, Any]) -> str:
    lines = vm_report.header(
        "Creates and refreshes on real LVM (VM lane)", result,
        "qemu TCG, PV a sparse file in guest RAM; VG restored from generated metadata, "
        "pool active; new thin LVs of 1 GiB")
    lines += [f"- Median of {result['runs']} rounds (paths in rotating order), "
             f"took {result['took_s']:.0f} s; load before: {result['load']}\n",
             "| thin LVs | bare `lvcreate` | driver `create_volume` | its `lvcreate` | "
             "driver's own work | own / `lvcreate` | lock held | creates/s driver vs bare "
             "| Cinder `create_volume` | refresh after change | os-brick refresh | "
             "vs os-brick | refresh unchanged | vs os-brick |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size in result["sizes"]:
        s = {key: _median(values) for key, values in size["series"].items()}
        lines.append(
            f"| {size['lv_count']:,} | {s['bare'] * 1e3:.0f} ms | {s['driver'] * 1e3:.0f} ms "
            f"| {s['driver_lvcreate'] * 1e3:.0f} ms | {s['driver_own'] * 1e3:.1f} ms | "
            f"{s['driver_own'] / s['driver_lvcreate'] * 100:.1f}% | "
            f"{s['lock_held'] * 1e3:.0f} ms | {s['bare'] / s['driver'] * 100:.0f}% | "
            f"{s['cinder'] * 1e3:.0f} ms | {s['refresh_after_change'] * 1e3:.1f} ms | "
            f"{s['brick_refresh'] * 1e3:.0f} ms | "
            f"{s['brick_refresh'] / s['refresh_after_change']:.0f}x | "
            f"{s['refresh_unchanged'] * 1e3:.2f} ms | "
            f"{s['brick_refresh'] / s['refresh_unchanged']:.0f}x |")
    lines.append("")
    lines.extend(f"- Not measured: {failure}" for failure in result.get("failed", ()))
    for size in result["sizes"]:
        raw = {key: [round(v * 1e3, 1) for v in values]
               for key, values in size["series"].items()}
        lines.append(f"- {size['lv_count']:,} LVs, every timing in ms: {raw}; report cache "
                     f"{size['cache']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markdown-out")
    args = parser.parse_args(argv)
    if vm_guest.outside_the_vm("realdm_creates", " --creates"):
        return 2
    started = time.time()
    with open("/proc/loadavg", encoding="ascii") as f:
        load = f.read().strip()
    sizes: list[dict[str, Any]] = []
    failed: list[str] = []
    text = ""
    for count in (int(size) for size in args.sizes.split(",")):
        try:
            sizes.append(measure_size(count, args.runs))
            print(f"# {count} LVs measured", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001 - the other sizes are still measured
            print(f"# {count} LVs failed: {exc!r}", file=sys.stderr)
            failed.append(f"{count:,} LVs: {exc!r}"[:600])
        text = _report(args, sizes, failed, started, load)  # kept as each size ends
    print(text)
    return 0


def _report(args: argparse.Namespace, sizes: list[dict[str, Any]], failed: list[str],
            started: float, load: str) -> str:
    """The report of the sizes measured so far, written to ``--markdown-out`` too."""
    text = render({"command": vm_report.command("realdm_creates"),
                   "machine": machine(), "runs": args.runs, "sizes": sizes,
                   "took_s": time.time() - started, "load": load, "failed": failed})
    vm_report.save(text, args.markdown_out)
    return text


if __name__ == "__main__":
    sys.exit(main())
