"""The campaign's other actors: the operator working out of band, and the fault injector.

The operator runs plain LVM commands on the same VG (odd sizes, its own
names, sometimes a name the driver is about to use) and keeps the list of
LVs it made and has not removed: those must survive. The injector keeps the
simulator supplied with every kind of fault it can inject, one pending fault
per command at a time, at a rate tied to the requests' progress.
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections import Counter
from typing import Any, Callable

from lvm_driver.run.executor import LVMError, LVMExecutor

from tests.campaign.audit import AuditSimulator
from tests.campaign.plan import operator_name

#: LVM's exit 0 with a well-formed report that lists nothing
EMPTY_REPORT = '  {\n      "report": [\n          {\n              "lv": [\n              ]\n' \
               '          }\n      ]\n  }\n'
WRITES = ("lvcreate", "lvremove", "lvextend", "lvchange", "lvrename")
READS = ("lvs", "vgs", "pvs")
#: fault kind -> the commands it is injected into
FAULT_COMMANDS: dict[str, tuple[str, ...]] = {
    "exit_5": READS + WRITES, "exit_3": ("lvcreate", "lvremove", "lvextend"),
    "exit_139": READS, "hang": READS + WRITES, "malformed_output": READS + ("lvcreate",),
    "fail_after_apply": WRITES, "hang_after_apply": WRITES, "slow_ok": READS + WRITES,
    "slow_timeout": READS + WRITES, "empty_report": ("lvs",), "io_read": READS + WRITES,
    "io_write": WRITES, "io_header": ("lvs",),
    # an lvcreate exiting 0 without applying: the driver must find its marker missing
    "masked_ok": ("lvcreate",),
}
#: how often each command is chosen (the driver's mix: reports first)
COMMAND_WEIGHTS = {"lvs": 10, "vgs": 1, "pvs": 1, "lvcreate": 8, "lvremove": 4, "lvextend": 3,
                   "lvchange": 1, "lvrename": 1}
THIN_SIZES = ("300M", "500M", "700M", "1500M", "2500M")
LINEAR_SIZES = ("300M", "500M", "900M")
MAX_OPERATOR_LVS = 6


class Operator(threading.Thread):
    """An operator's shell on the VG: lvcreate/lvremove of its own LVs, untagged."""

    def __init__(self, *, seed: int, vg: str, pool: str, run: Callable[[list[str]], bool],
                 last_uuid: Callable[[], str | None], squat_names: Callable[[], list[str]],
                 interval_s: float, linear: bool):
        super().__init__(name="operator", daemon=True)
        self.rng = random.Random(f"operator-{seed}")
        self.vg, self.pool = vg, pool
        self._run, self._last_uuid, self._squat_names = run, last_uuid, squat_names
        self.interval_s = interval_s
        self.linear = linear
        self.lock = threading.Lock()
        #: the LVs the operator made and did not remove (name -> uuid): they must survive
        self.mine: dict[str, str | None] = {}
        #: those of them the operator found gone when it went to remove them
        self.gone: set[str] = set()
        self.counts: Counter[str] = Counter()
        self.next_index = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.rng.uniform(0.3, 1.7) * self.interval_s):
            self.step()

    def step(self) -> None:
        with self.lock:
            present = sorted(set(self.mine) - self.gone)
            if present and (len(present) >= MAX_OPERATOR_LVS or self.rng.random() < 0.35):
                name = self.rng.choice(present)
                if self._run(["lvremove", "-f", f"{self.vg}/{name}"]):
                    del self.mine[name]
                    self.counts["lvremove"] += 1
                else:  # someone else removed it: the checks report it, the operator moves on
                    self.gone.add(name)
                    self.counts["lvremove failed"] += 1
                return
            squat = self._squat_names() if self.rng.random() < 0.15 else []
            if squat:
                name, what = self.rng.choice(squat), "squat"
            else:
                name, what = operator_name(self.next_index), "thin"
                self.next_index += 1
            if what == "thin" and self.linear and self.rng.random() < 0.35:
                argv, what = ["lvcreate", "-L", self.rng.choice(LINEAR_SIZES), "-n", name,
                              self.vg], "linear"
            else:
                argv = ["lvcreate", "-V", self.rng.choice(THIN_SIZES), "-T",
                        f"{self.vg}/{self.pool}", "-n", name]
            if self._run(argv):
                self.mine[name] = self._last_uuid()
                self.counts[f"lvcreate {what}"] += 1
            else:
                self.counts[f"lvcreate {what} failed"] += 1

    def snapshot(self) -> dict[str, str | None]:
        return dict(self.mine)


def sim_operator_runner(sim: AuditSimulator) -> tuple[Callable[[list[str]], bool],
                                                      Callable[[], str | None]]:
    """Run operator commands on the (fault-immune) simulator; the uuid of what it made."""
    def run(argv: list[str]) -> bool:
        sim.last_mutation = None
        return sim.run(argv).exit_code == 0

    def last_uuid() -> str | None:
        created = (sim.last_mutation or {}).get("created") or []
        return created[0]["uuid"] if created else None

    return run, last_uuid


def real_operator_runner(executor: LVMExecutor) -> tuple[Callable[[list[str]], bool],
                                                         Callable[[], str | None]]:
    def run(argv: list[str]) -> bool:
        try:
            executor.run(argv, readonly=False)
        except LVMError:
            return False
        return True

    return run, lambda: None


class FaultInjector:
    """Injects one fault at a time per command, cycling through every kind."""

    def __init__(self, sim: AuditSimulator, *, seed: int, timeout_s: float, rate: float):
        self.sim = sim
        self.rng = random.Random(f"faults-{seed}")
        self.timeout_s = timeout_s
        self.rate = rate
        self.injected: Counter[str] = Counter()
        self._cycle: list[str] = []

    def pending_commands(self) -> set[str | None]:
        """Commands that already have a fault waiting (from the simulator's own files)."""
        with open(self.sim.state_file, encoding="utf-8") as handle:
            pending = {f["command"] for f in json.load(handle)["faults"]}
        path = self.sim.state_file + ".io-faults"
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                pending |= {f["command"] for f in json.load(handle)}
        return pending

    def tick(self, progress: int) -> None:
        """Inject what the progress calls for, if a command is free to take it."""
        if sum(self.injected.values()) >= progress * self.rate:
            return
        if not self._cycle:  # every kind once per cycle, in a seeded order
            self._cycle = list(FAULT_COMMANDS)
            self.rng.shuffle(self._cycle)
        kind = self._cycle[-1]
        commands = FAULT_COMMANDS[kind]
        command = self.rng.choices(commands, [COMMAND_WEIGHTS[c] for c in commands])[0]
        if command in self.pending_commands():
            return
        self._cycle.pop()
        self.inject(kind, command)
        self.injected[kind] += 1

    def inject(self, kind: str, command: str) -> None:
        times = self.rng.choice((1, 1, 1, 2, 3))
        if kind == "io_header":  # a PV's LVM headers unreadable (EIO): the driver's read
            self.sim.inject_header_error(times=times)
            return
        if kind in ("io_read", "io_write"):
            self.sim.inject_state_error(kind[3:], command=command, times=times)
            return
        options: dict[str, Any] = {
            "exit_5": {"exit_code": 5}, "exit_3": {"exit_code": 3},
            "exit_139": {"exit_code": 139}, "hang": {"hang": True},
            "malformed_output": {"malformed_output": True},
            "fail_after_apply": {"fail_after_apply": True},
            "hang_after_apply": {"fail_after_apply": True, "hang": True},
            "slow_ok": {"delay_s": self.timeout_s * 0.3},
            "slow_timeout": {"delay_s": self.timeout_s * 1.5},
            "empty_report": {"exit_code": 0, "stdout": EMPTY_REPORT, "stderr": ""},
            "masked_ok": {"exit_code": 0, "stderr": ""},
        }[kind]
        self.sim.inject(command, times=times, **options)
