"""Stats refresh on real device-mapper with the driver running unprivileged, as Cinder runs it.

Runs INSIDE the VM, as root (``sudo bash tests/benchmarks/run_realdm.sh --unprivileged``
boots it). Builds the same VG as ``realdm`` (a thin pool and up to 1,000 active thin
LVs, ``realdm.build``), makes the guest a Cinder host (``tests/realvm/
unprivileged_setup.sh``: user ``cinder``, sudo to the root helper), and then, from
processes of user ``cinder`` (``tests/functional/unprivileged_side.py``), interleaved,
median of N rounds, each round after an operator's ``lvcreate``:

- this driver, ``lvm_privilege = privsep``: every LVM command and device read through
  ``sudo oslo-rootwrap ... privsep-helper`` and the driver's daemon; the first
  refresh after the change and one with nothing changed;
- os-brick's ``LVM`` as Cinder's LVM driver runs it: each LVM command through
  ``sudo cinder-rootwrap /etc/cinder/rootwrap.conf`` with Cinder's own filters;
- and, as root in this process, os-brick in-process (``refresh.make_brick``, the
  root path's comparison in ``realdm``) for reference;
- the daemon's round trip: a thin create + delete through it against the same as
  root in-process, and the pool's device-mapper status through it against an ioctl.

Prints one Markdown report. Nothing asserts a time.

    python -m tests.benchmarks.realdm_unprivileged [--lvs 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from tests.benchmarks import refresh as R
from tests.benchmarks import vm_guest, vm_report
from tests.benchmarks.realdm import (BATCH, POOL, VG_NAME, _lvcreate_line, _run, _s,
                                     _thin_lv_count, build, guest_vg)
from tests.benchmarks.realvg import RealVG
from tests.benchmarks.run import machine
from tests.functional.unprivileged_host import write_privsep_config

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = str(Path(sys.executable).parent)
SECTION = "bench"
CONFIG = "/etc/driver-kit/bench.conf"
DRIVER_HELPER = f"sudo {VENV_BIN}/oslo-rootwrap /etc/driver-kit/rootwrap.conf"
CINDER_HELPER = f"sudo {VENV_BIN}/cinder-rootwrap /etc/cinder/rootwrap.conf"


def cinder_host(lvm_conf: str) -> None:
    """The guest as a Cinder host: the driver's root helper (unprivileged_setup.sh),
    Cinder's own (cinder-rootwrap with Cinder's volume.filters, sudo as Cinder's
    packages allow it), and the driver's root-owned backend config."""
    _run(["bash", str(REPO / "tests/realvm/unprivileged_setup.sh"), sys.executable],
         dict(os.environ))
    filters = Path(VENV_BIN).parent / "etc" / "cinder" / "rootwrap.d"
    assert (filters / "volume.filters").is_file(), f"no Cinder filters in {filters}"
    os.makedirs("/etc/cinder", exist_ok=True)
    Path("/etc/cinder/rootwrap.conf").write_text(
        f"[DEFAULT]\nfilters_path={filters}\nexec_dirs=/sbin,/usr/sbin,/bin,/usr/bin,"
        f"{VENV_BIN}\nuse_syslog=False\n")
    sudoers = Path("/etc/sudoers.d/cinder-rootwrap")
    sudoers.write_text(f"cinder ALL = (root) NOPASSWD: {VENV_BIN}/cinder-rootwrap "
                       "/etc/cinder/rootwrap.conf *\n")
    sudoers.chmod(0o440)
    write_privsep_config(CONFIG, SECTION, vg=VG_NAME, pool=POOL, root_helper=DRIVER_HELPER,
                         more=f"""\
lvm_conf_file = {lvm_conf}
lvm_metadata_parse = true
lvm_command_timeout = 600
max_over_subscription_ratio = 1000
""")
    os.makedirs("/var/lib/cinder/locks", mode=0o700, exist_ok=True)
    cinder = subprocess.run(["id", "-u", "cinder"], capture_output=True, text=True)
    os.chown("/var/lib/cinder/locks", int(cinder.stdout), int(cinder.stdout))


class Side:
    """A process of user ``cinder`` answering JSON requests (unprivileged_side.py)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            ["runuser", "-u", "cinder", "--", sys.executable,
             str(REPO / "tests/functional/unprivileged_side.py"), CONFIG, SECTION,
             "/var/lib/cinder/locks"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(REPO))

    def ask(self, op: str, **request: Any) -> tuple[Any, float]:
        """The reply and the wall time of the request in the cinder process."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if "error" in reply:
            raise RuntimeError(f"{op}: {reply['error']}: {reply['message']}\n"
                               f"{reply.get('trace', '')}")
        return reply["ok"], reply["seconds"]

    def refresh(self, op: str, **request: Any) -> tuple[Any, float]:
        """A refresh request, timed by the refresh alone (the reply's
        ``refresh_seconds``: not the reply's listing of every LV nor its JSON)."""
        reply, _ = self.ask(op, **request)
        return reply, reply["refresh_seconds"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


SMOKE_LVS = 20


def grow(vg: RealVG, built: dict[str, Any], lv_count: int, deadline: float) -> None:
    """More thin LVs, as ``realdm.build`` makes them (``lvm`` shell batches), up to
    ``lv_count`` or the deadline; ``built`` updated."""
    env = dict(vg.env(), HOME=str(vg.workdir))
    index = 1000000  # names apart from build's and the rounds'
    while built["thin_lvs"] < lv_count and time.time() < deadline:
        todo = min(BATCH, lv_count - built["thin_lvs"])
        script = "".join(_lvcreate_line(index + i, 1) + "\n" for i in range(todo))
        index += todo
        t0 = time.perf_counter()
        subprocess.run(["lvm"], input=script, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, check=False)
        seconds = time.perf_counter() - t0
        built["thin_lvs"], built["active"] = _thin_lv_count(env)
        built["batches"].append({"lvs": built["thin_lvs"], "seconds": seconds,
                                 "per_lv_s": seconds / todo})
        print(f"# {built['thin_lvs']} thin LVs, last {todo} in {seconds:.1f} s",
              file=sys.stderr)


@contextlib.contextmanager
def cinder_host_vg(args: argparse.Namespace, started: float, *,
                   measure: Callable[..., Any]) -> Iterator[tuple[RealVG, dict[str, Any]]]:
    """``realdm``'s VG (sized by ``vm_guest.vg_options``' ``args``) with a few thin LVs,
    the guest made a Cinder host, one round of ``measure(vg, runs, first_change=...)`` on
    it so a mistake shows before the long build, then the VG grown to ``args.lvs`` thin
    LVs or until the creation budget from ``started`` runs out: the VG and what it cost."""
    with guest_vg(args.pool_gb) as vg:
        built = build(vg, lv_count=SMOKE_LVS, pool_gb=args.pool_gb, lv_gb=1,
                      budget_s=args.create_budget_s)
        cinder_host(vg.lvm_conf)
        print("# smoke round", file=sys.stderr)
        measure(vg, 1, first_change=70000)
        grow(vg, built, args.lvs, started + args.create_budget_s)
        print(f"# measuring {args.runs} rounds", file=sys.stderr)
        yield vg, built


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure(vg: RealVG, runs: int, first_change: int = 80000) -> dict[str, Any]:
    env = vg.env()
    side = Side()
    side.ask("setup")
    brick_request = {"root_helper": CINDER_HELPER, "vg": VG_NAME, "pool": POOL,
                     "lvm_conf": vg.lvm_conf}
    root_brick = R.make_brick(vg_name=VG_NAME, lvm_conf=vg.lvm_conf)
    times: dict[str, list[float]] = {k: [] for k in (
        "after_change", "steady", "brick_cinder", "brick_root")}
    commands: dict[str, list[int]] = {k: [] for k in times}
    reports: dict[str, Any] = {}
    # warm-up, untimed: the daemon started, the report read once, os-brick built
    reports["steady"], _ = side.refresh("refresh")
    reports["brick_cinder"], _ = side.refresh("brick_refresh", **brick_request)
    reports["brick_root"] = R.cinder_refresh(root_brick)
    change_s = []
    for round_ in range(runs):
        t0 = time.perf_counter()
        _run(_lvcreate_line(first_change + round_, 1).split(), env)
        change_s.append(time.perf_counter() - t0)
        reply, seconds = side.refresh("refresh")
        times["after_change"].append(seconds)
        commands["after_change"].append(reply["commands"])
        reports["after_change"] = reply
        order: list[tuple[str, Callable[[], tuple[Any, float]]]] = [
            ("steady", lambda: side.refresh("refresh")),
            ("brick_cinder", lambda: side.refresh("brick_refresh", **brick_request)),
            ("brick_root", lambda: _timed(lambda: R.cinder_refresh(root_brick))),
        ]
        order = order[round_ % 3:] + order[:round_ % 3]
        for name, fn in order:
            reply, seconds = fn()
            times[name].append(seconds)
            if isinstance(reply, dict) and "commands" in reply:
                commands[name].append(reply["commands"])
    trips = round_trips(side, vg, runs)
    profile, _ = side.ask("profile", refreshes=PROFILED_REFRESHES)
    side.close()
    return {"times": times, "commands": commands, "change_s": change_s,
            "reports": reports, "trips": trips, "profile": profile}


#: refreshes with nothing changed run under cProfile after the rounds
PROFILED_REFRESHES = 20


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def round_trips(side: Side, vg: RealVG, runs: int) -> dict[str, list[float]]:
    """A thin create and delete through the daemon (as cinder) and in-process as root,
    and the pool's device-mapper status through the daemon and by ioctl."""
    import tempfile

    from driver_kit import load_backend_config
    from lvm_driver.read.dm_status import thin_pool_status
    from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
    direct = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides={
        "volume_group": VG_NAME, "lvm_thin_pool_name": POOL, "lvm_create_thin_pool": False,
        "lock_path": tempfile.mkdtemp(prefix="dk-bench-locks-"), "lvm_privilege": "direct",
        "lvm_conf_file": vg.lvm_conf, "lvm_command_timeout": 600.0,
        "lvm_metadata_parse": True, "max_over_subscription_ratio": "1000"}))
    direct.do_setup()
    out: dict[str, list[float]] = {k: [] for k in (
        "create_daemon", "delete_daemon", "create_root", "delete_root", "status_daemon",
        "status_root")}
    for i in range(runs):
        name = f"trip-{i:03d}"
        out["create_daemon"].append(side.ask("driver", method="create_volume",
                                             args=[name, 1])[1])
        out["delete_daemon"].append(side.ask("driver", method="delete_volume",
                                             args=[name])[1])
        out["create_root"].append(_timed(lambda: direct.create_volume(name + "r", 1))[1])
        out["delete_root"].append(_timed(lambda: direct.delete_volume(name + "r"))[1])
        out["status_daemon"].append(side.ask("entry", module="devices",
                                             name="thin_pool_status", args=[SECTION],
                                             kwargs={"pool": POOL})[1])
        out["status_root"].append(_timed(lambda: thin_pool_status(VG_NAME, POOL))[1])
    return out


def render(result: dict[str, Any]) -> str:
    b, r = result["build"], result["measure"]
    t, c = r["times"], r["commands"]
    brick = _median(t["brick_cinder"])
    out = vm_report.header("Real device-mapper, the driver unprivileged (VM lane)", result,
                           "qemu TCG (no KVM)")
    w = out.append
    w(f"- Median of {result['runs']} rounds (min in brackets), one untimed warm-up; each "
      "round: an operator's `lvcreate` as root, this driver's first refresh after it, "
      "then the other paths in rotating order; each refresh timed alone in its "
      "process (`get_volume_stats(refresh=True)`, os-brick's calls of Cinder's "
      "`_update_volume_stats`). Took "
      f"{result['took_s']:.0f} s. {b['thin_lvs']:,} thin LVs "
      f"({b['active']:,} active) built in "
      f"{sum(x['seconds'] for x in b['batches']):.0f} s.\n")
    labels = {
        "steady": "**this driver as `cinder`**, through its privsep daemon, nothing changed",
        "after_change": "**this driver as `cinder`**, first refresh after the `lvcreate`",
        "brick_cinder": "os-brick `LVM` as `cinder`, each command through "
                        "`sudo cinder-rootwrap` (Cinder's path)",
        "brick_root": "os-brick `LVM` as root in-process (the root path's comparison)",
    }
    w("| path | LVM commands per refresh | wall | vs os-brick as Cinder runs it |")
    w("|---|---:|---:|---:|")
    for name in ("steady", "after_change", "brick_cinder", "brick_root"):
        values = t[name]
        counts = "/".join(str(x) for x in sorted(set(c.get(name, [])))) or "-"
        vs = "1" if name == "brick_cinder" else f"{brick / _median(values):.2f}x faster"
        w(f"| {labels[name]} | {counts} | {_s(_median(values))} ({_s(min(values))}) | {vs} |")
    w("")
    trips = r["trips"]
    w("The daemon's round trip (median, min in brackets):\n")
    w("| operation | as `cinder` through the daemon | as root in-process | difference |")
    w("|---|---:|---:|---:|")
    for label, key in (("thin volume create (`create_volume`, 1 GiB)", "create"),
                       ("thin volume delete (`delete_volume`)", "delete"),
                       ("thin pool device-mapper status", "status")):
        d, root_ = trips[f"{key}_daemon"], trips[f"{key}_root"]
        w(f"| {label} | {_s(_median(d))} ({_s(min(d))}) | {_s(_median(root_))} "
          f"({_s(min(root_))}) | {_s(_median(d) - _median(root_))} |")
    w("")
    profile = r["profile"]
    w(f"Where an unchanged refresh's time goes as `cinder` (cProfile over "
      f"{profile['refreshes']} refreshes, the stats read in the calling thread; "
      f"{profile['ms_per_refresh']:.1f} ms each under the profiler):\n")
    w("| function | calls per refresh | own ms | cumulative ms |")
    w("|---|---:|---:|---:|")
    for row in profile["top"]:
        w(f"| `{row['function']}` | {row['calls']:g} | {row['own_ms']:.2f} | "
          f"{row['cumulative_ms']:.2f} |")
    w("")
    after = r["reports"]["after_change"]
    w(f"Report cache after the rounds (the cinder process): {after['cache']}. "
      f"Operator `lvcreate`: {_s(_median(r['change_s']))}.\n")
    pool = after["stats"]["pools"][0]
    w(f"This driver's pool: {pool.get('total_capacity_gb')} GiB total, "
      f"{pool.get('free_capacity_gb')} free, {pool.get('provisioned_capacity_gb')} "
      f"provisioned; os-brick (as cinder): {r['reports']['brick_cinder']['stats']}.\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = vm_guest.vg_options(__doc__).parse_args(argv)
    if vm_guest.outside_the_vm("realdm_unprivileged", " --unprivileged"):
        return 2
    started = time.time()
    with cinder_host_vg(args, started, measure=measure) as (vg, built):
        measured = measure(vg, args.runs)
    result = {"command": vm_report.command("realdm_unprivileged"),
              "machine": machine(), "runs": args.runs, "build": built,
              "measure": measured, "took_s": time.time() - started}
    vm_report.publish(render(result), args.markdown_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
