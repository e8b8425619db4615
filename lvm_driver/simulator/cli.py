"""The simulator's command line: act as the operator on a shared state file.

``python -m lvm_driver.simulator --state FILE COMMAND...`` runs an LVM
command, or one of the ``sim-`` helpers, on the state other processes (the
driver, the harness) share, and prints what LVM would.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from lvm_driver.run.executor import LVMTimeoutError
from lvm_driver.simulator.errors import Fail, SimulatorError
from lvm_driver.simulator.runner import LVMSimulator
from lvm_driver.simulator.shell_mode import serve
from lvm_driver.simulator.sizes import DEFAULT_EXTENT_SIZE, parse_size


def _parse_bytes(text: str) -> int:
    """A size argument (10G, 512M, 4096b) in bytes."""
    sign, value = parse_size(text, "size")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lvm_driver.simulator --state FILE <lvm command...>``."""
    args = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m lvm_driver.simulator --state FILE COMMAND [ARGS...]\n"
             "  COMMAND: an LVM command (lvs, vgs, lvcreate, lvextend, lvremove,\n"
             "  lvrename, lvchange, lvconvert --merge, pvcreate, vgcreate, vgextend, pvs,\n"
             "  lvm segtypes|version), dd if=/dev/zero of=/dev/VG/LV ..., or\n"
             "  sim-create-vg NAME SIZE [EXTENT_SIZE] | sim-write VG/LV SIZE |\n"
             "  sim-clear-faults   (sizes like 10G, 512M, 4096b), or lvm alone:\n"
             "  LVM's shell, one command a line (see lvm_driver.simulator.shell_mode)\n")
    if len(args) < 3 or args[0] != "--state":
        sys.stderr.write(usage)
        return 2
    simulator = LVMSimulator(args[1])
    command = args[2:]
    if command == ["lvm"]:
        return serve(simulator)
    try:
        if command[0] == "sim-create-vg" and len(command) in (3, 4):
            extent = _parse_bytes(command[3]) if len(command) == 4 else DEFAULT_EXTENT_SIZE
            simulator.create_vg(command[1], _parse_bytes(command[2]), extent)
            return 0
        if command[0] == "sim-write" and len(command) == 3:
            vg_name, _, lv_name = command[1].partition("/")
            simulator.write_data(vg_name, lv_name, _parse_bytes(command[2]))
            return 0
        if command[0] == "sim-clear-faults" and len(command) == 1:
            simulator.clear_faults()
            return 0
        if command[0].startswith("sim-"):
            sys.stderr.write(usage)
            return 2
        result = simulator.run(command)
    except Fail as exc:
        sys.stderr.write("".join(f"  {line}\n" for line in exc.lines))
        return exc.exit_code
    except (SimulatorError, LVMTimeoutError) as exc:
        sys.stderr.write(f"lvm_driver.simulator: {exc}\n")
        return 1
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.exit_code
