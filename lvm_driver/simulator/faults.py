"""Injected faults: how they are recorded, which run they hit, what they do to it.

A fault is a plain record kept in the state (or, for the state file's own
I/O errors, beside it), so every process sharing the file sees it: an exit
code, a hang, a slow command, output cut in half, a crash after the
change was applied, or a success that dropped the tags it was asked to add.
``run_with_fault`` applies one to a command's run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from lvm_driver.run.executor import CommandResult, LVMTimeoutError
from lvm_driver.simulator.args import command_name
from lvm_driver.simulator.errors import SimulatorError


def new_fault(command: str, *, exit_code: int, stderr: str | None, stdout: str,
              times: int | None, hang: bool, malformed_output: bool,
              fail_after_apply: bool, argv_contains: str | None,
              delay_s: float | None, drop_tags: bool = False) -> dict[str, Any]:
    """The record of a fault of ``command`` (see ``LVMSimulator.inject``), checked."""
    check_times(times)
    if delay_s is not None and (
            isinstance(delay_s, bool) or not isinstance(delay_s, (int, float))
            or not math.isfinite(delay_s) or delay_s < 0
            or hang or malformed_output or fail_after_apply):
        raise SimulatorError(f"delay_s must be a finite number of seconds >= 0, with "
                             f"no other fault; got {delay_s!r}")
    if drop_tags and (exit_code != 0 or hang or malformed_output or fail_after_apply
                      or delay_s is not None):
        raise SimulatorError("drop_tags is a success (exit code 0) with no other fault")
    if stderr is None:
        stderr = (f"  Internal error: injected failure of {command} "
                  f"(exit code {exit_code}).\n")
    return {"command": command, "exit_code": exit_code, "stderr": stderr,
            "stdout": stdout, "times": times, "hang": hang,
            "malformed_output": malformed_output,
            "fail_after_apply": fail_after_apply, "argv_contains": argv_contains,
            "delay_s": delay_s, "drop_tags": drop_tags}


def new_state_fault(operation: str, *, command: str | None, times: int | None,
                    argv_contains: str | None) -> dict[str, Any]:
    """The record of an I/O error on the state file (see ``inject_state_error``), checked."""
    if operation not in ("read", "write", "header"):
        raise SimulatorError(f"operation must be 'read', 'write' (the state file) or "
                             f"'header' (a PV's LVM headers), got {operation!r}")
    check_times(times)
    return {"operation": operation, "command": command, "times": times,
            "argv_contains": argv_contains}


def check_times(times: int | None) -> None:
    if times is not None and (isinstance(times, bool) or not isinstance(times, int)
                              or times < 1):
        raise SimulatorError("times must be None or >= 1")


def take_matching(faults: list[dict[str, Any]], argv: list[str],
                  **wanted: Any) -> dict[str, Any] | None:
    """The first of ``faults`` for this command (and ``wanted`` values), counted as
    used in place: its ``times`` goes down, and it is removed once used up."""
    name = command_name(argv)
    for index, fault in enumerate(faults):
        if fault["command"] not in (name, None) or \
                any(fault.get(key) != value for key, value in wanted.items()):
            continue
        if fault["argv_contains"] is not None and fault["argv_contains"] not in argv:
            continue
        if fault["times"] is not None:
            fault["times"] -= 1
            if fault["times"] <= 0:
                del faults[index]
        return dict(fault)
    return None


def run_with_fault(fault: dict[str, Any] | None, argv: list[str], timeout_s: float,
                   run: Callable[[list[str]], CommandResult]) -> CommandResult:
    """``run(argv)`` the command ``argv`` as ``fault`` (None: no fault) makes it behave.

    A slow command sleeps, then runs, unless the runner's timeout stops it
    first; ``drop_tags`` runs it without its ``--addtag`` options and exits 0; a
    failure without ``fail_after_apply`` or ``malformed_output`` never runs; the
    others run and then fail, hang or lose half their output.
    """
    if fault is not None and fault.get("drop_tags"):
        return run(_without_added_tags(argv))
    if fault is not None and fault.get("delay_s") is not None:
        # slow, then run as usual, unless the runner stops it first
        time.sleep(min(fault["delay_s"], timeout_s))
        if fault["delay_s"] >= timeout_s:
            raise LVMTimeoutError(argv, timeout_s)
        fault = None
    if fault is not None and not (fault["fail_after_apply"] or
                                  fault["malformed_output"]):
        if fault["hang"]:
            time.sleep(timeout_s)
            raise LVMTimeoutError(argv, timeout_s)
        return CommandResult(argv, fault["exit_code"], fault["stdout"],
                             fault["stderr"])
    result = run(argv)
    if fault is None:
        return result
    if fault["malformed_output"]:
        text = result.stdout
        cut = text[: len(text) // 2] if text.strip() else '  {\n      "report": [\n'
        return CommandResult(argv, result.exit_code, cut, result.stderr)
    if fault["hang"]:
        time.sleep(timeout_s)
        raise LVMTimeoutError(argv, timeout_s)
    return CommandResult(argv, fault["exit_code"], result.stdout,
                         result.stderr + fault["stderr"])


def _without_added_tags(argv: list[str]) -> list[str]:
    """``argv`` with every ``--addtag TAG`` pair left out."""
    kept: list[str] = []
    skip = False
    for item in argv:
        if skip:
            skip = False
        elif item == "--addtag":
            skip = True
        else:
            kept.append(item)
    return kept
