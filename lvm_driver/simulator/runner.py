"""``LVMSimulator``: an LVM command line on simulated state, the runner an
``LVMExecutor`` calls instead of real LVM.

It takes the state under its lock, applies the injected fault a command
meets, and hands the command line to the command table (``dispatch``); its
helpers (``create_vg``, ``write_data``, ``inject``...) let tests, demos and
operators set up a VG, stand for a guest writing data, and inject faults.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import os
import shutil
import sys
import tempfile
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from lvm_driver.read import mda
from lvm_driver.read.dm_status import ThinPoolStatus
from lvm_driver.read.report_cache import DeviceSources
from lvm_driver.run.executor import CommandResult, LVMExecutor
from lvm_driver.simulator import dm
from lvm_driver.simulator.dispatch import COMMANDS, OTHER_TOOLS, execute
from lvm_driver.simulator.errors import EXIT_FAILED, SimulatorError, StateFileError
from lvm_driver.simulator.faults import new_fault, new_state_fault, run_with_fault, take_matching
from lvm_driver.simulator.pv_headers import holds_pv_label
from lvm_driver.simulator.session import Output, Session, ranges_without
from lvm_driver.simulator.sizes import DEFAULT_EXTENT_SIZE, PV_METADATA_BYTES, SECTOR
from lvm_driver.simulator.state import StateStore


class LVMSimulator(StateStore):
    """An LVM CLI on simulated state; call it as an ``LVMExecutor`` runner.

    ``state_file=None`` keeps the state in memory (one process); a path keeps
    it in a JSON file that several processes may share, each command holding
    an exclusive lock on ``<state_file>.lock``.
    """

    def __init__(self, state_file: str | os.PathLike[str] | None = None):
        super().__init__(state_file)
        self._count_lock = threading.Lock()
        self.commands_run = 0
        self.last_env: dict[str, str] | None = None
        self._pv_dir: str | None = None

    # -- the runner seam -------------------------------------------------------

    def __call__(self, argv: list[str], env: dict[str, str],
                 timeout_s: float) -> CommandResult:
        """Run one emulated LVM command (the executor's ``Runner`` signature)."""
        argv = list(argv)
        with self._count_lock:
            self.commands_run += 1
            self.last_env = dict(env)
        name = os.path.basename(argv[0]) if argv else ""
        if name != "lvm" and name not in COMMANDS and name not in OTHER_TOOLS:
            return CommandResult(argv, 127, "", f"{argv[0] if argv else ''}: command not found\n")
        try:
            with self._transaction(argv) as state:
                return self._run(state, argv, timeout_s)
        except StateFileError as exc:  # LVM's way: the command fails, nothing changes
            return CommandResult(argv, EXIT_FAILED, "", f"  {exc}\n")

    def _run(self, state: dict[str, Any], argv: list[str], timeout_s: float) -> CommandResult:
        """One command on ``state`` (held under the lock), its fault applied if any."""
        fault = self._take_fault(state, argv)
        if fault is not None and self.state_file is not None and (
                fault["hang"] or fault["delay_s"] is not None):
            self._save(state)  # used up now, even if this process is killed meanwhile
        return run_with_fault(fault, argv, timeout_s, lambda args: execute(state, args))

    def run(self, argv: Sequence[str], *, timeout_s: float = 3600.0) -> CommandResult:
        """Run one command as an operator would; never raises on failure."""
        if isinstance(argv, str):
            raise TypeError("argv must be a list of strings")
        return self(list(argv), dict(os.environ), timeout_s)

    def shell_command(self, env: dict[str, str]) -> tuple[list[str], bool] | None:
        """How to start this simulator as LVM's shell (``shell_mode``), for an executor's
        read session: a process of its own on the same state file (None without one)."""
        if self.state_file is None:
            return None
        return [sys.executable, "-m", "lvm_driver.simulator", "--state",
                os.fspath(self.state_file), "lvm"], True

    def device_sources(self) -> DeviceSources:
        """What the driver's read path reads besides LVM on this simulator: the PV files'
        headers (with the injected EIO faults) and the simulated pools' status."""
        return DeviceSources(read_block=self.read_pv_block,
                             thin_pool_status=self.thin_pool_status)

    def read_pv_block(self, path: str, offset: int, length: int) -> tuple[int, bytes]:
        """``mda.read_block`` of a PV file, unless an injected header fault fails it (EIO)."""
        if self.state_file is None or os.path.exists(self.state_file + ".io-faults"):
            with self._thread_lock, (self._locked() if self.state_file
                                     else contextlib.nullcontext()):
                failed = self._io_fault("header", ["pv-header-read", path])
            if failed:
                raise OSError(errno.EIO, os.strerror(errno.EIO), path)
        return mda.read_block(path, offset, length)

    def thin_pool_status(self, vg_name: str, pool_name: str) -> ThinPoolStatus | None:
        """The simulated device-mapper status of a thin pool (None: not active), as last
        saved: like the kernel's, it does not wait for a command holding the VG lock."""
        try:
            with self._peek() as state:
                return dm.thin_pool_status(state, vg_name, pool_name)
        except StateFileError as exc:
            raise OSError(errno.EIO, str(exc)) from None

    def inject_header_error(self, *, times: int | None = 1,
                            device: str | None = None) -> None:
        """Make the next ``times`` reads of a PV's LVM headers (of ``device``, default
        any) fail with EIO, as a failing disk would (None: every read)."""
        fault = new_state_fault("header", command=None, times=times, argv_contains=device)
        with self._thread_lock, (self._locked() if self.state_file
                                 else contextlib.nullcontext()):
            self._save_io_faults(self._load_io_faults() + [fault])

    def executor(self, **kwargs: Any) -> LVMExecutor:
        """An ``LVMExecutor`` that runs its commands on this simulator."""
        return LVMExecutor(runner=self, **kwargs)

    # -- helpers for tests and demos ------------------------------------------------

    def create_vg(self, name: str, size_bytes: int,
                  extent_size_bytes: int = DEFAULT_EXTENT_SIZE) -> None:
        """Create VG ``name`` of ``size_bytes`` (rounded down to whole extents).

        Done through pvcreate/vgcreate on a PV file (``pv_path``) that carries real
        LVM2 headers, rewritten on every commit.
        """
        if size_bytes < extent_size_bytes:
            raise SimulatorError("a VG needs at least one extent")
        device = self.pv_path(name)
        made = not os.path.exists(device)
        if not made and device not in self.state()["pvs"] and holds_pv_label(device):
            raise StateFileError(
                f"PV file {device} holds VG {name}'s data but the state file "
                f"{self.state_file} does not list it (missing or replaced): restore the "
                f"state file, or remove {device} to start anew")
        with open(device, "ab"):
            pass
        pv_bytes = size_bytes // SECTOR * SECTOR + PV_METADATA_BYTES
        for argv in (["pvcreate", "--setphysicalvolumesize", f"{pv_bytes}b", device],
                     ["vgcreate", "--physicalextentsize", f"{extent_size_bytes}b",
                      name, device]):
            result = self.run(argv)
            if result.exit_code:
                if made:
                    os.unlink(device)
                raise SimulatorError(f"{' '.join(argv)} failed: {result.stderr.strip()}")

    def pv_path(self, name: str) -> str:
        """The file standing for VG ``name``'s PV: beside the state file, or in a
        directory of this simulator's own (removed with it) for a state in memory."""
        if self.state_file is not None:
            return f"{self.state_file}.pv-{name}"
        if self._pv_dir is None:
            self._pv_dir = tempfile.mkdtemp(prefix="lvmsim-pvs-")
            weakref.finalize(self, shutil.rmtree, self._pv_dir, ignore_errors=True)
        return os.path.join(self._pv_dir, name)

    def write_data(self, vg: str, lv: str, nbytes: int) -> None:
        """Write ``nbytes`` of new data to thin LV ``vg/lv``: pool usage grows.

        Rounded up to the pool's chunk size and capped at the LV's size. An
        inactive LV cannot be written; a full pool raises after filling up.
        """
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise SimulatorError(f"nbytes must be an int >= 0, got {nbytes!r}")
        with self._transaction() as state:
            vg_rec = state["vgs"].get(vg)
            if vg_rec is None or lv not in vg_rec["lvs"]:
                raise SimulatorError(f"no logical volume {vg}/{lv}")
            rec = vg_rec["lvs"][lv]
            if not rec["active"]:
                raise SimulatorError(f"{vg}/{lv} is not active; it cannot be written")
            if rec["kind"] != "thin":  # a thick LV owns its extents: only its data changes
                size = rec["extents"] * vg_rec["extent_size"]
                end = max([0] + [b for _, b in rec.get("data", [])])
                rec["data"] = ranges_without(rec.get("data", []), end, size) + \
                    ([[end, min(size, end + nbytes)]] if nbytes and end < size else [])
                return
            if Session(state, Output()).map_thin(vg_rec, rec, nbytes):
                raise SimulatorError(f"thin pool {vg}/{rec['pool']} is out of data space")

    def wipes(self) -> list[dict[str, Any]]:
        """Every ``dd`` of zeros run so far: ``{"device": "/dev/vg/lv", "bytes": n}``."""
        with self._transaction() as state:
            return copy.deepcopy(state.get("wipes", []))

    def data_bytes(self, vg: str, lv: str) -> int:
        """Bytes of thick LV ``vg/lv`` holding data written by ``write_data`` and not
        zeroed since."""
        with self._transaction() as state:
            rec = state["vgs"].get(vg, {}).get("lvs", {}).get(lv)
            if rec is None:
                raise SimulatorError(f"no logical volume {vg}/{lv}")
            return sum(b - a for a, b in rec.get("data", []))

    def set_open(self, vg: str, lv: str, is_open: bool = True) -> None:
        """Mark LV ``vg/lv`` open (held by a process, e.g. a target exporting it): its
        ``lv_attr`` shows ``o`` and ``lvchange -an`` refuses, as LVM does."""
        with self._transaction() as state:
            rec = state["vgs"].get(vg, {}).get("lvs", {}).get(lv)
            if rec is None:
                raise SimulatorError(f"no logical volume {vg}/{lv}")
            rec["open"] = bool(is_open)

    def inject(self, command: str, *, exit_code: int = EXIT_FAILED,
               stderr: str | None = None, stdout: str = "", times: int | None = 1,
               hang: bool = False, malformed_output: bool = False,
               fail_after_apply: bool = False, argv_contains: str | None = None,
               delay_s: float | None = None, drop_tags: bool = False) -> None:
        """Make the next ``times`` runs of ``command`` fail (None: every run).

        ``command`` is the LVM command (``lvcreate``, ``lvs``; ``segtypes`` for
        ``lvm segtypes``). Default: exit code 5 with an LVM-style message and
        nothing applied. ``hang``: sleeps the runner's timeout, then raises
        LVMTimeoutError. ``malformed_output``: the command runs, its stdout is
        cut in half. ``fail_after_apply``: the change is applied, then the
        command exits ``exit_code`` (a crash after lvcreate succeeded).
        ``delay_s``: a slow command, not a failing one: it waits that many
        seconds (holding the lock, as LVM holds its VG lock), then runs as
        usual; one slower than the runner's timeout is stopped unapplied, as
        with ``hang``. ``drop_tags`` (with ``exit_code=0``): the command runs
        without its ``--addtag`` options and exits 0, a success that masks a lost
        request marker. ``argv_contains``: only runs whose argv has this item.
        """
        fault = new_fault(command, exit_code=exit_code, stderr=stderr, stdout=stdout,
                          times=times, hang=hang, malformed_output=malformed_output,
                          fail_after_apply=fail_after_apply, argv_contains=argv_contains,
                          delay_s=delay_s, drop_tags=drop_tags)
        with self._transaction() as state:
            state["faults"].append(fault)

    def inject_state_error(self, operation: str, *, command: str | None = None,
                           times: int | None = 1, argv_contains: str | None = None) -> None:
        """Make reading or writing the state file fail with EIO for the next ``times``
        runs of ``command`` (None: any command; ``times`` None: every run).

        ``operation`` is ``"read"`` (the command cannot load the state) or
        ``"write"`` (it cannot save what it changed; a command that changes
        nothing writes nothing and is not failed). The command fails as LVM
        does when its metadata cannot be read or written: exit code 5, a line
        naming the file, nothing applied, the file's bytes unchanged. These
        faults live beside the state, in ``<state file>.io-faults`` (a file
        that cannot be written cannot record its own faults either), and apply
        to LVM commands only, never to the helpers (``state()``, ``inject``).
        """
        fault = new_state_fault(operation, command=command, times=times,
                                argv_contains=argv_contains)
        if self.state_file is None:
            raise SimulatorError("a simulator without a state file has no file to fail")
        with self._thread_lock, self._locked():
            self._save_io_faults(self._load_io_faults() + [fault])

    def clear_faults(self) -> None:
        """Remove every injected fault, state file I/O errors included."""
        with self._transaction() as state:
            state["faults"] = []
            if self.state_file is not None:
                self._save_io_faults([])

    @staticmethod
    def _take_fault(state: dict[str, Any], argv: list[str]) -> dict[str, Any] | None:
        """The injected fault this run of ``argv`` meets, counted as used (None: none)."""
        return take_matching(state["faults"], argv)
