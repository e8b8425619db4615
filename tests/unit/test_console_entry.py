"""Ctrl-C or SIGTERM while ``driver-kit`` is still importing: one line, exit 128 + the
signal's number, never a traceback (the console script handles signals first)."""

from __future__ import annotations

import ast
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import driver_kit

REPO = Path(__file__).resolve().parents[2]


def console_script() -> list[str]:
    """The ``driver-kit`` command as the setup.py entry point makes it, run from this tree."""
    entry = re.search(r'"driver-kit = ([\w.]+):(\w+)"', (REPO / "setup.py").read_text())
    assert entry, "setup.py declares no driver-kit console script"
    module, function = entry.groups()
    return [sys.executable, "-c", f"import sys; from {module} import {function}; "
                                  f"sys.exit({function}())"]


#: installed before the console script runs: the command's own module takes 30 s to
#: import, and says on stdout when it starts to
SLOW_IMPORT = """
import sys, time
class SlowImport:
    def find_spec(self, name, path=None, target=None):
        if name == "driver_kit.cli":
            print("importing", flush=True)
            time.sleep(30)
        return None
sys.meta_path.insert(0, SlowImport())
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_command_imports_is_one_line(signum):
    python, flag, script = console_script()
    process = subprocess.Popen([python, flag, SLOW_IMPORT + script, "stats"], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "importing\n"
    process.send_signal(signum)
    out, err = process.communicate(timeout=20)
    name = signal.Signals(signum).name
    assert (process.returncode, out, err) == (
        128 + signum, "", f"interrupted ({name}): stopped before any change\n")


def test_the_console_script_still_runs_the_command():
    result = subprocess.run([*console_script(), "--version"], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("driver-kit ")


def test_signals_are_handled_before_the_heavy_imports():
    """What the console script imports before its handlers are in place: nothing of
    oslo.config or the drivers, so the window without them is a few milliseconds."""
    probe = ("import sys; from driver_kit import console; "
             "print(sorted(m for m in sys.modules if m.startswith(('oslo', 'driver_kit', "
             "'lvm_driver'))))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.stdout.strip() == "['driver_kit', 'driver_kit.console', 'driver_kit.interrupts']"


def test_the_package_face_serves_what_a_type_checker_sees():
    """``driver_kit/__init__.py`` imports its names on first use; its TYPE_CHECKING
    imports (what a vendor's type checker reads) name the same, from the same modules."""
    tree = ast.parse((REPO / "driver_kit" / "__init__.py").read_text(encoding="utf-8"))
    seen = {alias.name: node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module.startswith("driver_kit.")
            for alias in node.names}
    assert seen == driver_kit._HOMES
    assert sorted(seen) == driver_kit.__all__
    assert all(getattr(driver_kit, name) is not None for name in driver_kit.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        driver_kit.nosuch
