"""An LVM command-line emulator: argv in, LVM's output and exit codes out.

It plugs into ``LVMExecutor`` as its runner, so everything above the runner
(environment, retries, error typing, parsing) runs exactly as on a real host.
It emulates the commands the wrapper issues (lvs, vgs, lvcreate in its thin
pool / thin / linear / thin snapshot forms and an operator's COW snapshot
``lvcreate -s -L``, see ``cow``, lvextend, lvremove, lvrename,
lvchange, ``lvconvert --merge`` of a thin snapshot, ``lvm segtypes``, ``lvm
version``, and ``dd`` of zeros for the wipe of a thick LV) plus pvcreate and
vgcreate and vgextend to set up a VG, and pvs, with LVM 2.03's messages,
exit codes (5 failed, 3 bad command line) and rules: unique names, whole extents, thin pools with metadata and a
metadata spare, thin snapshots sharing their origin's data, over-provisioning
allowed with LVM's warnings, linear LVs and pools limited by VG free space.

State lives in memory or in a JSON file shared by processes; each command
holds an exclusive ``fcntl`` lock on ``<state file>.lock`` for its whole run,
as LVM holds its VG lock. Faults (exit codes, hangs, slow commands, malformed
output, a crash after the change was applied) are stored in the state too, so
every process sharing the file sees them; I/O errors on the state file itself
are kept beside it. A state file that cannot be read, written or understood
fails the command as LVM fails on unreadable metadata (exit code 5, one line
naming the file) and is never overwritten.

A VG made by ``create_vg`` lives on a PV file carrying real LVM2 label and
metadata-area headers, rewritten on every metadata commit (``pv_headers``):
the driver reads them, and each thin pool's simulated device-mapper status
(``dm``), through ``LVMSimulator.device_sources()``, as it reads a disk and
the kernel; ``inject_header_error`` makes those header reads fail with EIO.

Operators can act on the same state from a shell::

    python -m lvm_driver.simulator --state /tmp/lvm.json sim-create-vg vg0 10G
    python -m lvm_driver.simulator --state /tmp/lvm.json lvcreate -V 1G -T vg0/pool -n mine
    python -m lvm_driver.simulator --state /tmp/lvm.json sim-write vg0/mine 100M

The package, one job per module: ``runner`` (``LVMSimulator``), ``state``
(the state file and its lock), ``faults``, ``args`` (command lines),
``dispatch`` (the command table), one module per family of commands
(``pv_vg``, ``lv_create``, ``lv_change``, ``reports``, ``dd``), ``report_format``,
``session`` (LVM's arithmetic on the state), ``pv_headers``, ``dm``, ``sizes``,
``names``, ``errors``
and ``cli`` (``python -m lvm_driver.simulator``).
"""

from lvm_driver.simulator.cli import main
from lvm_driver.simulator.errors import SimulatorError, StateFileError
from lvm_driver.simulator.runner import LVMSimulator
from lvm_driver.simulator.sizes import DEFAULT_EXTENT_SIZE

__all__ = ["DEFAULT_EXTENT_SIZE", "LVMSimulator", "SimulatorError", "StateFileError", "main"]
