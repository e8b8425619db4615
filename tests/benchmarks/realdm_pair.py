"""Root and unprivileged side by side on one VG, in one run: the ratio of the two measured.

Runs INSIDE the VM, as root (``sudo bash tests/benchmarks/run_realdm.sh --pair``
boots it). Builds the VG of ``realdm`` (a thin pool, up to 1,000 active thin LVs),
makes the guest a Cinder host (``realdm_unprivileged.cinder_host``) and then,
interleaved, median of N rounds, each round after an operator's ``lvcreate``:

- the root path: this driver in this process (``lvm_privilege = direct``, the
  read session and the metadata parse on, as ``realdm``), its first refresh
  after the change and one with nothing changed, against os-brick in-process as
  root (Cinder's ``_update_volume_stats`` calls);
- the unprivileged path: this driver as user ``cinder`` through its privileged
  daemon (``lvm_privilege = privsep``), the same two refreshes, against os-brick as
  ``cinder`` through ``sudo cinder-rootwrap``;

which path's first refresh after the change comes first alternates by round.
Then where a refresh after a change goes on the root path
(``refresh_profile``: cProfile split into headers, text read, parse, pool status
and the rest). Prints one Markdown report. Nothing asserts a time.

    python -m tests.benchmarks.realdm_pair [--lvs 1000] [--runs 5] [--profile 5]
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from typing import Any, Callable

from tests.benchmarks import refresh as R
from tests.benchmarks import vm_guest, vm_report
from tests.benchmarks.realdm import POOL, VG_NAME, _lvcreate_line, _run, _s
from tests.benchmarks.realdm_unprivileged import CINDER_HELPER, Side, cinder_host_vg
from tests.benchmarks.realvg import RealVG
from tests.benchmarks.refresh_profile import profile_after_change
from tests.benchmarks.refresh_profile import render as render_profile
from tests.benchmarks.run import machine
#: each measured path: (label, the os-brick path it is compared with)
PATHS: dict[str, tuple[str, str]] = {
    "root_after_change": ("this driver as root, first refresh after the `lvcreate`",
                          "brick_root"),
    "root_steady": ("this driver as root, nothing changed", "brick_root"),
    "brick_root": ("os-brick `LVM` as root in-process", "brick_root"),
    "cinder_after_change": ("this driver as `cinder` (privsep daemon), first refresh "
                            "after the `lvcreate`", "brick_cinder"),
    "cinder_steady": ("this driver as `cinder` (privsep daemon), nothing changed",
                      "brick_cinder"),
    "brick_cinder": ("os-brick `LVM` as `cinder`, each command through `sudo "
                     "cinder-rootwrap`", "brick_cinder"),
}


def _timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure(vg: RealVG, runs: int, first_change: int = 80000) -> dict[str, Any]:
    """The six paths, interleaved; a round starts with an operator's ``lvcreate``."""
    env = vg.env()
    driver = R.make_driver(vg_name=VG_NAME, conf_dir=str(vg.conf_dir), fill_pool_usage=False,
                           read_session=True, metadata_parse=True)
    driver.do_setup()
    brick = R.make_brick(vg_name=VG_NAME, lvm_conf=vg.lvm_conf)
    side = Side()
    side.ask("setup")
    brick_request = {"root_helper": CINDER_HELPER, "vg": VG_NAME, "pool": POOL,
                     "lvm_conf": vg.lvm_conf}
    steps: dict[str, Callable[[], float]] = {
        "root_after_change": lambda: _timed(lambda: R.driver_refresh(driver)),
        "cinder_after_change": lambda: side.refresh("refresh")[1],
        "root_steady": lambda: _timed(lambda: R.driver_refresh(driver)),
        "cinder_steady": lambda: side.refresh("refresh")[1],
        "brick_root": lambda: _timed(lambda: R.cinder_refresh(brick)),
        "brick_cinder": lambda: side.refresh("brick_refresh", **brick_request)[1],
    }
    for step in steps.values():  # warm-up, untimed
        step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    change_s = []
    others = ["root_steady", "cinder_steady", "brick_root", "brick_cinder"]
    for round_ in range(runs):
        t0 = time.perf_counter()
        _run(_lvcreate_line(first_change + round_, 1).split(), env)
        change_s.append(time.perf_counter() - t0)
        first = ["root_after_change", "cinder_after_change"]
        order = (first if round_ % 2 == 0 else first[::-1]) + (
            others[round_ % 4:] + others[:round_ % 4])
        for name in order:
            times[name].append(steps[name]())
    reports = {"root": R.driver_refresh(driver), "cinder": side.refresh("refresh")[0],
               "brick_root": R.cinder_refresh(brick)}
    side.close()
    return {"times": times, "change_s": change_s, "reports": reports,
            "cache": driver.vg.report_cache_stats, "driver": driver}


def render(result: dict[str, Any]) -> str:
    b, r = result["build"], result["measure"]
    t = r["times"]
    median = {name: statistics.median(values) for name, values in t.items()}
    out = vm_report.header("Real device-mapper, root and unprivileged in one run (VM lane)",
                           result, "qemu TCG (no KVM)")
    w = out.append
    w(f"- Median of {result['runs']} rounds (min in brackets), one untimed warm-up; each "
      "round: an operator's `lvcreate` as root, the two drivers' first refresh after it "
      "(which first alternates), then the other paths in rotating order; each refresh "
      f"timed alone in its process. Took {result['took_s']:.0f} s. "
      f"{b['thin_lvs']:,} thin LVs ({b['active']:,} active) built in "
      f"{sum(x['seconds'] for x in b['batches']):.0f} s; an operator's `lvcreate` "
      f"{_s(statistics.median(r['change_s']))}.\n")
    w("| path | wall | vs its os-brick |")
    w("|---|---:|---:|")
    for name, (label, peer) in PATHS.items():
        vs = "1" if name == peer else f"{median[peer] / median[name]:.1f}x faster"
        w(f"| {label} | {_s(median[name])} ({_s(min(t[name]))}) | {vs} |")
    w("")
    w("The unprivileged ratio against the root one (item 5 of issue 25: within 20%):\n")
    w("| refresh | root: vs os-brick as root | `cinder`: vs os-brick through "
      "cinder-rootwrap | `cinder` / root |")
    w("|---|---:|---:|---:|")
    for label, kind in (("after an operator's change", "after_change"),
                        ("nothing changed", "steady")):
        root = median["brick_root"] / median[f"root_{kind}"]
        cinder = median["brick_cinder"] / median[f"cinder_{kind}"]
        w(f"| {label} | {root:.1f}x | {cinder:.1f}x | {cinder / root:.2f} |")
    w("")
    w(f"Root driver's report cache after the rounds: {r['cache']}; the `cinder` "
      f"process's: {r['reports']['cinder']['cache']}.\n")
    root_pool = r["reports"]["root"]["pools"][0]
    cinder_pool = r["reports"]["cinder"]["stats"]["pools"][0]
    brick_pool = r["reports"]["brick_root"]["pools"][0]
    w("| path | total GiB | free GiB | provisioned GiB | total_volumes |")
    w("|---|---:|---:|---:|---:|")
    for label, pool in (("this driver as root", root_pool),
                        ("this driver as `cinder`", cinder_pool),
                        ("os-brick as root", brick_pool)):
        w(f"| {label} | {pool.get('total_capacity_gb')} | {pool.get('free_capacity_gb')} | "
          f"{pool.get('provisioned_capacity_gb')} | {pool.get('total_volumes')} |")
    w("")
    if result.get("profile"):
        w(render_profile(result["profile"], "Where the root driver's refresh after an "
                                            "operator's change goes"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = vm_guest.vg_options(__doc__)
    parser.add_argument("--profile", type=int, default=5,
                        help="refreshes after a change profiled on the root path")
    args = parser.parse_args(argv)
    if vm_guest.outside_the_vm("realdm_pair", " --pair"):
        return 2
    started = time.time()
    with cinder_host_vg(args, started, measure=measure) as (vg, built):
        measured = measure(vg, args.runs)
        profile = None
        if args.profile:
            env = vg.env()
            print(f"# profiling {args.profile} refreshes after a change", file=sys.stderr)
            profile = profile_after_change(
                measured["driver"],
                lambda round_: _run(_lvcreate_line(60000 + round_, 1).split(), env),
                args.profile)
    result = {"command": vm_report.command("realdm_pair"),
              "machine": machine(), "runs": args.runs, "build": built,
              "measure": measured, "profile": profile, "took_s": time.time() - started}
    # the figures first, so a fault in the rendering loses no run
    print(repr({k: v for k, v in result.items() if k != "measure"}
               | {"times": measured["times"]}), file=sys.stderr)
    vm_report.publish(render(result), args.markdown_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
