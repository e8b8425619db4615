"""The campaign's coordinator: sets the VG up, runs the workers, injects, kills, checks.

Worker processes run the plan against one shared VG (the simulator's state
file, or real LVM in the VM lane) while, in this process, an operator thread
works out of band and the main loop injects faults, SIGKILLs the holder of
the admission lock at seeded points (then proves the lock comes free and
starts a successor), reads every journal as it grows and checks the
invariants continuously; at the end a fresh process probes the largest
admissible size and the closing report is rendered.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from driver_kit.admission import AdmissionGate
from lvm_driver.driver import SNAPSHOT_TAG
from lvm_driver.run.executor import LVMError, LVMExecutor

from tests.campaign import actors, locks, lvstate, outcomes
from tests.campaign.audit import AuditSimulator, is_driver_tagged, vg_totals
from tests.campaign.checks import OUTSIDE_ROLES, Checker, Limits, Violation
from tests.campaign.journal import Journal, Tail
from tests.campaign.plan import make_plan, ops_by_id, planned_names
from tests.campaign.report import render

GiB = 1024 ** 3
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: seconds the admission lock may stay unavailable after its holder was killed
LOCK_FREE_S = 5.0
#: how long after a failed request the janitor removes an LV it left (the driver
#: finishes an unfinished clean-up at its next create, well within this)
STRAY_AFTER_S = 30.0
#: how far behind "now" mutation records are applied (journals are read one by one)
FEED_LAG_S = 0.5
#: how often the VG is read for the state rules (on real LVM, 60 times less often)
STATE_CHECK_EVERY_S = 0.25
MAX_CRASHES_PER_SLOT = 3


@dataclass
class Settings:
    """One campaign; the seed decides the plan, the faults, the kills and the pool's config."""

    seed: int
    ops: int = 2000
    procs: int = 4
    threads: int = 3
    kills: int | None = None
    mode: str = "sim"
    run_dir: str | None = None
    timeout_s: float | None = None
    fault_rate: float = 0.1
    operator_interval_s: float | None = None
    vg_gb: int = 48
    pool_gb: int | None = None
    real_vg: str | None = None
    max_seconds: float | None = None

    def resolved(self) -> dict[str, Any]:
        rng = random.Random(f"config-{self.seed}")
        sim = self.mode == "sim"
        return {
            "ratio": rng.choice((1.0, 1.5, 2.0, 3.0)),
            "reserved": rng.choice((0, 5, 10, 29)),
            "calculation": rng.choice(("standard", "cinder")),
            "timeout_s": self.timeout_s or (0.25 if sim else 2.0),
            # the VM lane's VG has 4 GiB: a 2 GiB pool leaves room for thick volumes
            "pool_gb": self.pool_gb or (30 if sim else 2),
            "kills": self.kills if self.kills is not None else max(1, self.ops // 2500),
            "operator_interval_s": self.operator_interval_s or (0.1 if sim else 4.0),
            "max_seconds": self.max_seconds or (120 + self.ops * (0.1 if sim else 5.0)),
        }


@dataclass
class Result:
    settings: Settings
    violations: list[Violation]
    report: str
    elapsed_s: float
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def passed(self) -> bool:
        return not self.violations


def replay_command(settings: Settings) -> str:
    return (f"python -m tests.campaign --seed {settings.seed} --ops {settings.ops} "
            f"--procs {settings.procs} --threads {settings.threads}"
            + (f" --kills {settings.kills}" if settings.kills is not None else "")
            + (" --real-lvm" if settings.mode == "real" else ""))


class Campaign:
    def __init__(self, settings: Settings):
        if settings.mode not in ("sim", "real"):
            raise ValueError("mode must be 'sim' or 'real'")
        self.s = settings
        self.conf = settings.resolved()
        self.run_dir = settings.run_dir or tempfile.mkdtemp(prefix="dk-campaign-")
        os.makedirs(self.run_dir, exist_ok=True)
        self.sim = settings.mode == "sim"
        self.vg = "dkcvg" if self.sim else (settings.real_vg or os.environ["DK_REAL_LVM_VG"])
        self.pool = "pool"
        self.state_file = os.path.join(self.run_dir, "lvm.json")
        self.lock_path = os.path.join(self.run_dir, "locks")
        self.lock_file = AdmissionGate(self.lock_path).lock_file("default")
        self.t0 = time.monotonic()
        self.kill_log: list[str] = []
        self.procs: dict[int, subprocess.Popen] = {}
        self.incarnation: Counter[int] = Counter()
        self.crashes: Counter[int] = Counter()
        self.done: set[int] = set()
        self.swept: Counter[str] = Counter()

    # -- set-up -------------------------------------------------------------------------------

    def _set_up_vg(self) -> dict[str, int]:
        """A VG with a thin pool; returns the pool's bytes and the thick pool's total."""
        if self.sim:
            self.tool = AuditSimulator(self.state_file, role="setup", vg_name=self.vg,
                                       pool_name=self.pool, immune=True,
                                       journal=Journal(os.path.join(self.run_dir,
                                                                    "setup.jsonl")))
            self.tool.create_vg(self.vg, self.s.vg_gb * GiB)
            result = self.tool.run(["lvcreate", "-T", "-L", f"{self.conf['pool_gb']}G",
                                    f"{self.vg}/{self.pool}"])
            assert result.exit_code == 0, result.stderr
            with open(self.state_file, encoding="utf-8") as handle:
                state = json.load(handle)
            totals = vg_totals(state, self.vg, self.pool)
            pool = state["vgs"][self.vg]["lvs"][self.pool]
            pool_bytes = pool["extents"] * state["vgs"][self.vg]["extent_size"]
            return {"pool": pool_bytes, "thick": totals["vg_free"] + totals["linear"]}
        self.executor = LVMExecutor(timeout_s=300)
        with contextlib.suppress(LVMError):  # an earlier run's LVs, if any
            self.executor.run(["lvremove", "-f", "-y", self.vg], readonly=False)
        size = self.conf["pool_gb"]
        self.executor.run(["lvcreate", "-T", "-L", f"{size}G", f"{self.vg}/{self.pool}"],
                          readonly=False)
        from lvm_driver.commands.lvm import VolumeGroup
        report = VolumeGroup(self.vg, executor=self.executor).report()
        pool_lv = report.find_lv(self.pool)
        linear = sum(lv.size_bytes for lv in report.thick_volumes())
        return {"pool": pool_lv.size_bytes, "thick": report.vg_free_bytes + linear}

    def _write_config(self) -> dict[str, Any]:
        conf = self.conf
        cfg = {"plan": self.plan_args, "threads": self.s.threads, "mode": self.s.mode,
               "state_file": self.state_file, "vg": self.vg, "pool": self.pool,
               "overrides": {
                   "volume_group": self.vg, "lvm_thin_pool_name": self.pool,
                   "lvm_create_thin_pool": False, "lock_path": self.lock_path,
                   "max_over_subscription_ratio": str(conf["ratio"]),
                   "reserved_percentage": conf["reserved"],
                   "over_provisioning_calculation": conf["calculation"],
                   "lvm_command_timeout": conf["timeout_s"], "stats_timeout": conf["timeout_s"],
                   "lvm_offer_thick": True,
                   "lvm_backend": "simulator" if self.sim else "real",
                   # real LVM runs in the VM lane, its PV a sparse file in guest RAM:
                   # thick deletes wipe their first MiB only (the whole LV would fill it)
                   **({} if self.sim else {"volume_clear_size": 1}),
                   "lvm_simulator_state_file": self.state_file}}
        with open(os.path.join(self.run_dir, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(cfg, handle, indent=1)
        return cfg

    def _spawn(self, slot: int) -> None:
        self.incarnation[slot] += 1
        err = open(os.path.join(self.run_dir, f"worker-p{slot}-{self.incarnation[slot]}.err"),
                   "w", encoding="utf-8")
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with err:
            self.procs[slot] = subprocess.Popen(
                [sys.executable, "-m", "tests.campaign.worker", self.run_dir, str(slot),
                 str(self.incarnation[slot])], cwd=REPO, env=env,
                stdout=subprocess.DEVNULL, stderr=err)

    # -- the run ------------------------------------------------------------------------------

    def _read_lvs(self) -> dict[str, dict[str, Any]]:
        if self.sim:
            return lvstate.read_sim(self.state_file, self.vg, self.pool)[0]
        return lvstate.read_real(self.executor, self.vg)

    def _check_state(self) -> None:
        with self.operator.lock:  # the operator's list and the VG read agree
            lvs = self._read_lvs()
            mine = self.operator.snapshot()
        self.checker.snapshot(lvs, mine, time.monotonic())

    def _kill_holder(self) -> None:
        alive = {p.pid: slot for slot, p in self.procs.items() if p.poll() is None}
        pid = locks.find_holder(self.lock_file, set(alive), within_s=3.0)
        if pid is None:
            self.kill_log.append("no worker held the admission lock within 3 s: no kill")
            return
        slot = alive[pid]
        os.kill(pid, signal.SIGKILL)
        self.procs[slot].wait()
        verdict, seconds = locks.wait_free(self.lock_file, pid, LOCK_FREE_S)
        self.kill_log.append(f"SIGKILL worker p{slot} (pid {pid}) holding the admission lock "
                             f"at {time.monotonic() - self.t0:.1f}s: lock {verdict} after "
                             f"{seconds:.3f}s")
        if verdict == "stuck":
            self.checker.add("lock_stuck", pid, f"the admission lock stayed held by killed "
                             f"pid {pid} (or a dead process) {LOCK_FREE_S}s after the SIGKILL",
                             time.monotonic())
        self._spawn(slot)

    def _sweep(self) -> None:
        """The janitor: an operator removing what failed requests left behind
        STRAY_AFTER_S earlier (a violation: the driver did not remove it by then),
        so that strays do not fill the pool for the rest of a long campaign. Only
        the very LV seen (by uuid) is removed."""
        now = time.monotonic()
        for uuid, history in list(self.checker.history.items()):
            if history.removed_t is not None or history.role in OUTSIDE_ROLES:
                continue
            end = self.checker.ends.get(history.created_by)
            stray = end is not None and end["outcome"] != "ok" and now - end["t"] > STRAY_AFTER_S
            orphan = SNAPSHOT_TAG in history.tags and not history.origin
            if (stray or orphan) and self.janitor.remove_exact(history.name_at(now), uuid):
                self.swept["stray" if stray else "orphaned snapshot"] += 1

    def _reap(self) -> None:
        for slot, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None or slot in self.done:
                continue
            if code == 0:
                self.done.add(slot)
                continue
            self.crashes[slot] += 1
            self.checker.add("worker_crashed", (slot, self.incarnation[slot]),
                             f"worker p{slot} exited with code {code} (see "
                             f"worker-p{slot}-{self.incarnation[slot]}.err in {self.run_dir})",
                             time.monotonic())
            if self.crashes[slot] <= MAX_CRASHES_PER_SLOT:
                self._spawn(slot)
            else:
                self.done.add(slot)

    def run(self) -> Result:
        sizes = self._set_up_vg()
        limits = Limits.compute(sizes["pool"], sizes["thick"], self.conf["ratio"],
                                self.conf["reserved"])
        # the plan keeps about a cap's worth alive: most requests find their volumes,
        # some meet a full pool
        self.plan_args = {"seed": self.s.seed, "ops": self.s.ops, "procs": self.s.procs,
                          "threads": self.s.threads,
                          "thin_budget_gb": float(limits.cap_thin_bytes / GiB),
                          "thick_budget_gb": (sizes["thick"] - limits.thick_reserved_bytes)
                          / GiB}
        cfg = self._write_config()
        plan = make_plan(**self.plan_args)
        self.checker = Checker(ops_by_id(plan), limits, mode=self.s.mode)
        names = planned_names(plan)
        if self.sim:
            op_sim = AuditSimulator(self.state_file, role="operator", vg_name=self.vg,
                                    pool_name=self.pool, immune=True,
                                    journal=Journal(os.path.join(self.run_dir,
                                                                 "operator.jsonl")))
            run_cmd, last_uuid = actors.sim_operator_runner(op_sim)
            self.janitor = AuditSimulator(
                self.state_file, role="janitor", vg_name=self.vg, pool_name=self.pool,
                immune=True, journal=Journal(os.path.join(self.run_dir, "janitor.jsonl")))
            injector = actors.FaultInjector(self.tool, seed=self.s.seed,
                                            timeout_s=self.conf["timeout_s"],
                                            rate=self.s.fault_rate)
        else:
            run_cmd, last_uuid = actors.real_operator_runner(self.executor)
            injector = None
        tail = Tail(self.run_dir)

        def squat_names() -> list[str]:  # names the driver will soon be asked to create
            progress = len(self.checker.starts)
            return [name for op_id, name in names if progress < op_id < progress + 150]

        self.operator = actors.Operator(
            seed=self.s.seed, vg=self.vg, pool=self.pool, run=run_cmd, last_uuid=last_uuid,
            squat_names=squat_names, interval_s=self.conf["operator_interval_s"], linear=True)
        rng = random.Random(f"kills-{self.s.seed}")
        total_ops = len(self.checker.ops)
        kill_points = sorted(int(total_ops * rng.uniform(0.1, 0.9))
                             for _ in range(self.conf["kills"]))
        for slot in range(self.s.procs):
            self._spawn(slot)
        self.operator.start()
        last_state_check = 0.0
        deadline = self.t0 + self.conf["max_seconds"]
        try:
            while len(self.done) < self.s.procs:
                now = time.monotonic()
                self.checker.feed(list(tail.read()), horizon=now - FEED_LAG_S)
                progress = len(self.checker.ends)
                if injector is not None:
                    injector.tick(progress)
                if kill_points and progress >= kill_points[0]:
                    kill_points.pop(0)
                    self._kill_holder()
                if now - last_state_check >= STATE_CHECK_EVERY_S * (1 if self.sim else 60):
                    self._check_state()
                    if self.sim:
                        self._sweep()
                    last_state_check = now
                self._reap()
                if now > deadline:
                    self.checker.add("stuck", "deadline",
                                     f"the campaign did not finish within "
                                     f"{self.conf['max_seconds']:.0f}s", now)
                    break
                time.sleep(0.02)
        finally:
            for proc in self.procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.operator.stop.set()
            self.operator.join()
        return self._finish(tail, injector, cfg)

    # -- the end ------------------------------------------------------------------------------

    def _probe(self, when: str) -> list[str]:
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, "-m", "tests.campaign.probe", self.run_dir],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        now = time.monotonic()
        if proc.returncode != 0:
            self.checker.add("probe", (when, "crash"), f"the fresh-process probe ({when}) "
                             f"failed: {proc.stderr.strip()[-500:]}", now)
            return [f"probe ({when}): failed"]
        lines = []
        for pool in json.loads(proc.stdout.strip().splitlines()[-1]):
            lines.append(f"probe ({when}): pool {pool['pool']}: {pool['state']}, "
                         f"max_volume_size_gb {pool['max_volume_size_gb']}; "
                         f"+1 GiB: {pool.get('one_more')}; exact: {pool.get('exact', 'n/a')}")
            problems = []
            if pool["state"] != "up":
                problems.append("the pool is not up with no fault pending")
            elif pool.get("one_more") != "refused":
                problems.append(f"one GiB more than max_volume_size_gb was "
                                f"{pool.get('one_more')}, not refused")
            if pool.get("exact", "admitted") != "admitted":
                problems.append(f"exactly max_volume_size_gb was {pool['exact']}")
            if problems:
                self.checker.add("probe", (when, pool["pool"]), f"{when}, pool {pool['pool']} "
                                 f"(max_volume_size_gb {pool['max_volume_size_gb']}): "
                                 + "; ".join(problems), now)
        return lines

    def _finish(self, tail: Tail, injector: actors.FaultInjector | None,
                cfg: dict[str, Any]) -> Result:
        if injector is not None:
            self.tool.clear_faults()
        self.checker.feed(list(tail.read()), horizon=None)
        now = time.monotonic()
        final = self._read_lvs()
        mine = self.operator.snapshot()
        self.checker.snapshot(final, mine, now)
        if self.sim:
            outcomes.check_outcomes(self.checker)
            outcomes.check_accounted(self.checker, final, now)
        else:
            outcomes.check_real(self.checker, final, set(mine), now)
        elapsed = now - self.t0
        probe_lines = self._probe("final state")
        if self.sim:  # again with room, next to the operator's odd-sized LVs
            for uuid, rec in sorted(final.items(), key=lambda item: not item[1]["origin"]):
                if is_driver_tagged(rec["tags"]):
                    self.janitor.remove_exact(rec["name"], uuid)
            probe_lines += self._probe("the driver's LVs removed")
        self.checker.feed(list(tail.read()), horizon=None)
        self.checker.flush()
        conf = self.conf
        header = [
            f"campaign seed {self.s.seed}: {len(self.checker.starts)} of "
            f"{len(self.checker.ops)} planned requests run, {self.s.procs} processes x "
            f"{self.s.threads} threads, {'simulator' if self.sim else 'real LVM'}, "
            f"{elapsed:.1f}s",
            f"pool config: ratio {conf['ratio']}, reserved {conf['reserved']}%, "
            f"calculation {conf['calculation']}, lvm_command_timeout {conf['timeout_s']}s; "
            f"thin cap {float(self.checker.limits.cap_thin_bytes / GiB):.3f} GiB, thick reserve "
            f"{self.checker.limits.thick_reserved_bytes / GiB:.0f} GiB",
            f"replay: {replay_command(self.s)}   (run directory {self.run_dir})"]
        extra = [f"operator: {dict(self.operator.counts)}; its LVs at the end: "
                 f"{sorted(mine)}", f"janitor removed: {dict(self.swept) or 'nothing'}",
                 *self.kill_log, *probe_lines,
                 f"LVs at the end: {len(final)}"]
        text = render(self.checker, header=header,
                      injected=injector.injected if injector else Counter(),
                      extra=extra, t0=self.t0)
        with open(os.path.join(self.run_dir, "report.txt"), "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
        return Result(self.s, list(self.checker.violations), text, elapsed,
                      Counter(self.checker.counts))


def run_campaign(settings: Settings) -> Result:
    """Run one campaign and return its violations and closing report."""
    return Campaign(settings).run()
