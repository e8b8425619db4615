"""The metadata text's parse on the host: a cold full parse (the driver's first read,
section by section; beside it the whole text by the general parser, as before the
canonical sections' fast path) against the incremental read after a one-LV change,
at 1,000 to 100,000 thin LVs, on generated texts (``vgmeta``, flush left as LVM
writes them into a metadata area). No LVM, no root.

Beside them, what bounds the incremental read at 100,000 LVs: the text's bytes
themselves (decoding them, LVM's checksum over them, one comparison of the whole
text with the last one), which any reader of a changed text pays.

With ``--creates 1000,10000`` (root, as ``--real``), the driver's own work per create
on such a VG: its thin ``lvcreate`` (which needs device-mapper) stood in for by an
``lvcreate`` of an inactive linear LV of the same name and tags (a real commit of
the same VG, which the driver's check after its create finds), timed apart, against
that command alone, alternating; and the admission lock's hold time.

With ``--real 1000,10000`` (root, lvm2, a loop device; no device-mapper needed), the
refresh after an operator's change on a real VG restored from generated metadata
(``realvg``): each round an ``lvchange --addtag`` of one thin LV in its own process,
then this driver's ``get_volume_stats(refresh=True)`` (the text read from the PV,
parsed where it changed), the same again with nothing changed, and os-brick's
refresh as Cinder's LVM driver does it, side by side. The pool is inactive: its
usage is a stand-in on both paths (``refresh.PoolUsageFiller``).

With ``--persisted 1000,10000,100000``, a design measured and not built: a restart
that loads its predecessor's parse instead of parsing (``persisted_parse``).

    python -m tests.benchmarks.incremental [--sizes 1000,10000,100000] [--runs 5]
                                           [--real 1000,10000] [--creates 1000,10000]
                                           [--persisted 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from lvm_driver.read import mda
from lvm_driver.read.vg_incremental import IncrementalReader
from lvm_driver.read.vg_metadata import decode_text, report_from_text
from tests.benchmarks import vgmeta
from tests.benchmarks.run import describe_machine, machine

GiB = 1024 ** 3
VG = "incvg"


def flush_left(text: str) -> str:
    """The text as LVM writes it into a metadata area: no indentation."""
    return "\n".join(line.lstrip("\t") for line in text.split("\n"))


def texts(lv_count: int, changes: int) -> tuple[list[str], list[str]]:
    """The VG's text, then after each of ``changes`` one-LV changes (a thin LV created,
    the next removed, in turn), and the PV UUIDs."""
    layout = vgmeta.plan_vg(vg_name=VG, device="/dev/loop7", dev_size_bytes=64 * 1024 * GiB,
                            lv_count=lv_count, metadata_area_bytes=1024 ** 3)
    rng = random.Random(lv_count)
    out = [flush_left(vgmeta.metadata_text(layout))]
    for step in range(changes):
        lvs = list(layout.thin_lvs)
        if step % 2 == 0:
            lvs.append(vgmeta.ThinLV(name=f"volume-bench-{step}", uuid=vgmeta.lvm_uuid(rng),
                                     extents=256, device_id=lv_count + 1 + step, tags=(),
                                     origin=None))
        else:
            lvs.pop(rng.randrange(len(lvs) // 2))  # never a snapshot's origin: none here
        layout = dataclasses.replace(layout, thin_lvs=tuple(lvs), seqno=layout.seqno + 1)
        out.append(flush_left(vgmeta.metadata_text(layout)))
    return out, [layout.pv_uuid.replace("-", "")]


def _timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure(lv_count: int, runs: int) -> dict[str, Any]:
    """Medians (seconds) of each measurement at ``lv_count`` thin LVs (snapshots none),
    each reader given the text's bytes as read from the PV."""
    decoded, uuids = texts(lv_count, runs)
    all_raw = [text.encode() for text in decoded]
    raw = all_raw[0]
    # the driver's first read (section by section, LVM's thin volumes by the fast path)
    # and the whole text by the general parser, alternating
    full, general = [], []
    for _ in range(max(1, runs // 2)):
        full.append(_timed(lambda: IncrementalReader().report(raw, VG, uuids)))
        general.append(_timed(lambda: report_from_text(decode_text(raw), VG, uuids)))
    reader = IncrementalReader()
    reader.report(raw, VG, uuids)
    incremental = [_timed(lambda changed=changed: reader.report(changed, VG, uuids))
                   for changed in all_raw[1:]]
    assert reader.stats == type(reader.stats)(full=1, incremental=runs), reader.stats
    other, view = bytes(bytearray(raw)), memoryview(raw)  # equal bytes, another object
    return {
        "lv_count": lv_count, "text_bytes": len(raw),
        "full_parse_s": statistics.median(full),
        "general_parse_s": statistics.median(general),
        "incremental_s": statistics.median(incremental),
        "decode_s": statistics.median(_timed(raw.decode) for _ in range(3)),
        "checksum_s": statistics.median(_timed(lambda: mda.calc_crc(mda.INITIAL_CRC, raw))
                                        for _ in range(3)),
        "compare_s": statistics.median(_timed(lambda: other.startswith(view[:-200]))
                                       for _ in range(3)),
    }


def measure_real(lv_count: int, runs: int, profile: int = 0) -> dict[str, Any]:
    """Refresh after an operator's change, unchanged, and os-brick's, on a restored VG;
    then ``profile`` refreshes after a change under cProfile (``refresh_profile``)."""
    from tests.benchmarks import refresh as R
    from tests.benchmarks.realvg import RealVG
    with RealVG("dkincvg", metadata_area_bytes=max(8, lv_count // 200) * 1024 ** 2) as vg:
        layout = vg.restore(lv_count)
        env = vg.env()
        driver = R.make_driver(vg_name=vg.vg_name, conf_dir=str(vg.conf_dir),
                               fill_pool_usage=True, metadata_parse=True)
        driver.do_setup()
        brick = R.make_brick(vg_name=vg.vg_name, lvm_conf=vg.lvm_conf)
        R.driver_refresh(driver)
        R.cinder_refresh(brick)
        series: dict[str, list[float]] = {"change": [], "after_change": [], "unchanged": [],
                                          "brick": []}
        for round_ in range(runs):
            target = layout.thin_lvs[round_ % len(layout.thin_lvs)].name
            started = time.perf_counter()
            _run_checked(["lvchange", "--addtag", f"bench{round_}", f"{vg.vg_name}/{target}"],
                         env)
            series["change"].append(time.perf_counter() - started)
            order = [("after_change", lambda: R.driver_refresh(driver)),
                     ("unchanged", lambda: R.driver_refresh(driver)),
                     ("brick", lambda: R.cinder_refresh(brick))]
            if round_ % 2:  # os-brick first every other round: both see the change first
                order = [order[2], order[0], order[1]]
            for name, fn in order:
                series[name].append(_timed(fn))
        stats = driver.vg.report_cache_stats
        profiled = None
        if profile:
            from tests.benchmarks.refresh_profile import profile_after_change
            profiled = profile_after_change(
                driver,
                lambda round_: _run_checked(
                    ["lvchange", "--addtag", f"profile{round_}",
                     f"{vg.vg_name}/{layout.thin_lvs[round_ % len(layout.thin_lvs)].name}"],
                    env), profile)
    return {"lv_count": lv_count, "series": series, "cache": stats, "profile": profiled,
            **{name: statistics.median(values) for name, values in series.items()}}


#: the create's stand-in on a host without device-mapper, where LVM makes no thin LV:
#: an inactive linear LV of the same name and tags (one commit of the same VG, which
#: the driver's check after its create finds), LVM told to leave the kernel alone
STAND_IN = ["lvcreate", "--config", "global/activation=0", "--type", "linear", "--size", "4m",
            "--activate", "n", "--zero", "n"]


def _stand_in(argv: list[str]) -> list[str]:
    return [*STAND_IN, *argv[argv.index("--name"):]] if argv[0] == "lvcreate" else argv


def measure_creates(lv_count: int, runs: int) -> dict[str, Any]:
    """The driver's own work per create on a restored VG (host, no device-mapper): its
    thin ``lvcreate`` stood in for (``STAND_IN``, timed apart), against the stand-in
    alone, alternating."""
    import uuid

    from driver_kit import GiB, load_backend_config
    from lvm_driver.commands import lvm_argv
    from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
    from lvm_driver.run.executor import LVMExecutor
    from tests.benchmarks import realdm_creates as C
    from tests.benchmarks import refresh as R
    from tests.benchmarks.realvg import RealVG
    with RealVG("dkincvg", metadata_area_bytes=max(8, lv_count // 200) * 1024 ** 2) as vg:
        layout = vg.restore(lv_count)
        env = vg.env()

        timed = C.TimedRunner()
        runner = R.PoolUsageFiller(lambda argv, env, timeout_s: timed(_stand_in(argv), env,
                                                                      timeout_s), "pool")
        conf = load_backend_config(extra_opts=LVM_OPTS, overrides={
            "volume_group": vg.vg_name, "lvm_thin_pool_name": "pool",
            "lvm_create_thin_pool": False, "lock_path": str(vg.workdir / "locks"),
            "lvm_conf_file": vg.lvm_conf, "lvm_command_timeout": 600.0,
            "lvm_metadata_parse": True, "max_over_subscription_ratio": "1000"})
        driver = ThinLVMDriver(conf, executor=LVMExecutor(
            lvm_system_dir=str(vg.conf_dir), timeout_s=600.0, runner=runner))
        driver.do_setup()
        driver.create_volume(f"volume-{uuid.uuid4()}", 1)  # untimed: the PVs learned
        series: dict[str, list[float]] = {"bare": [], "driver": [], "process": [],
                                          "own": [], "lock_held": []}
        held: list[float] = []
        with C.lock_timer(driver, held):
            for round_ in range(runs):
                for path in (("bare", "driver") if round_ % 2 else ("driver", "bare")):
                    name = f"volume-{uuid.uuid4()}"
                    if path == "bare":
                        series["bare"].append(_timed(lambda: _run_checked(
                            _stand_in(lvm_argv.create_thin(vg.vg_name, name, GiB,
                                                            pool="pool")), env)))
                        continue
                    timed.calls.clear()
                    del held[:]
                    wall = _timed(lambda: driver.create_volume(name, 1))
                    process = sum(s for command, s in timed.calls if command == "lvcreate")
                    series["driver"].append(wall)
                    series["process"].append(process)
                    series["own"].append(wall - process)
                    series["lock_held"].append(sum(held))
        stats = driver.vg.report_cache_stats
    return {"lv_count": lv_count, "series": series, "cache": stats,
            **{name: statistics.median(values) for name, values in series.items()}}


def render_creates(creates: list[dict[str, Any]], runs: int) -> str:
    lines = ["\n### The driver's own work per create (host, restored VG, `lvcreate` stood in "
             "for by an inactive linear LV's `lvcreate`)\n",
             f"Median of {runs} creates by each path, alternating.\n",
             "| thin LVs | bare LVM command | driver `create_volume` | its LVM command | "
             "driver's own work | own / LVM command | admission lock held | "
             "creates/s driver / bare |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in creates:
        lines.append(
            f"| {m['lv_count']:,} | {m['bare'] * 1e3:.0f} ms | {m['driver'] * 1e3:.0f} ms | "
            f"{m['process'] * 1e3:.0f} ms | {m['own'] * 1e3:.1f} ms | "
            f"{m['own'] / m['process'] * 100:.1f}% | {m['lock_held'] * 1e3:.0f} ms | "
            f"{m['bare'] / m['driver'] * 100:.0f}% |")
    lines.append("")
    lines.extend(f"- {m['lv_count']:,} LVs: report cache {m['cache']}" for m in creates)
    return "\n".join(lines)


def _run_checked(argv: list[str], env: dict[str, str]) -> None:
    import subprocess
    subprocess.run(argv, env=env, check=True, capture_output=True)


def render_real(real: list[dict[str, Any]], runs: int) -> str:
    lines = ["\n### Refresh after an operator's change on a real VG (host, restored, pool "
             "inactive)\n",
             f"Median of {runs} rounds; each round one `lvchange --addtag` in its own process, "
             "then the three refreshes (os-brick first every other round).\n",
             "| thin LVs | operator's `lvchange` | this driver, after the change | vs os-brick "
             "| this driver, nothing changed | vs os-brick | os-brick refresh |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for m in real:
        lines.append(
            f"| {m['lv_count']:,} | {m['change'] * 1e3:.0f} ms | "
            f"{m['after_change'] * 1e3:.1f} ms | {m['brick'] / m['after_change']:.1f}x | "
            f"{m['unchanged'] * 1e3:.2f} ms | {m['brick'] / m['unchanged']:.0f}x | "
            f"{m['brick'] * 1e3:.0f} ms |")
    lines.append("")
    lines.extend(f"- {m['lv_count']:,} LVs: report cache {m['cache']}" for m in real)
    from tests.benchmarks.refresh_profile import render as render_profile
    lines.extend("\n" + render_profile(m["profile"], f"{m['lv_count']:,} LVs: where the "
                                        "refresh after a change goes")
                 for m in real if m["profile"])
    return "\n".join(lines)


def render(result: dict[str, Any]) -> str:
    lines = ["### The metadata text's parse on the host: cold, and after a one-LV change\n",
             f"- Command: `{result['command']}`",
             f"- Machine: {describe_machine(result['machine'])}; load average before "
             f"{result['load_before']}, after {result['load_after']}",
             f"- Median of {result['runs']} one-LV changes (create and remove in turn) for "
             "the incremental read, of "
             f"{max(1, result['runs'] // 2)} cold parses; took {result['took_s']:.0f} s\n",
             "| thin LVs | text | cold full parse | the whole text by the general parser "
             "| incremental read after a one-LV change "
             "| full / incremental | the text's bytes: decode | LVM's checksum | one "
             "comparison with the last text |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in result["sizes"]:
        lines.append(
            f"| {m['lv_count']:,} | {m['text_bytes'] / 1024 ** 2:.1f} MiB | "
            f"{m['full_parse_s'] * 1e3:.0f} ms | {m['general_parse_s'] * 1e3:.0f} ms | "
            f"{m['incremental_s'] * 1e3:.1f} ms | "
            f"{m['full_parse_s'] / m['incremental_s']:.0f}x | {m['decode_s'] * 1e3:.1f} ms | "
            f"{m['checksum_s'] * 1e3:.1f} ms | {m['compare_s'] * 1e3:.1f} ms |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--real", default="", help="sizes of the real-VG refresh (root)")
    parser.add_argument("--profile", type=int, default=0,
                        help="with --real: this many refreshes after a change under cProfile")
    parser.add_argument("--creates", default="",
                        help="sizes of the driver's own work per create (root)")
    parser.add_argument("--persisted", default="",
                        help="sizes of the restart that loads the last parse")
    args = parser.parse_args(argv)
    started = time.time()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    sizes = [measure(int(size), args.runs) for size in args.sizes.split(",") if size]
    real = [measure_real(int(size), args.runs, args.profile)
            for size in args.real.split(",") if size]
    creates = [measure_creates(int(size), args.runs)
               for size in args.creates.split(",") if size]
    from tests.benchmarks import persisted_parse  # it reads this module's texts

    persisted = [persisted_parse.measure(int(size), args.runs)
                 for size in args.persisted.split(",") if size]
    result = {"command": "python -m tests.benchmarks.incremental "
                         + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(), "runs": args.runs, "sizes": sizes,
              "load_before": load_before,
              "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
              "took_s": time.time() - started}
    print(render(result) + (render_real(real, args.runs) if real else "")
          + (render_creates(creates, args.runs) if creates else "")
          + (persisted_parse.render(persisted, args.runs) if persisted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
