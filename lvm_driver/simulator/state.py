"""The simulated state and where it lives: in memory, or in a JSON file shared by
processes under an exclusive ``fcntl`` lock.

Each command holds the lock on ``<state file>.lock`` for its whole run, as LVM
holds its VG lock. A state file that cannot be read, written or understood
fails the command as LVM fails on unreadable metadata (``StateFileError``) and
is never overwritten; writes replace the file at once or not at all. The
state file's own injected I/O errors live beside it, in ``<state file>.io-faults``.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import Any, Final

from lvm_driver.simulator.errors import StateFileError
from lvm_driver.simulator.faults import take_matching
from lvm_driver.simulator.pv_headers import vg_seqnos, write_changed_headers
from lvm_driver.simulator.state_shape import shape_problem

STATE_VERSION: Final = 1


def empty_state() -> dict[str, Any]:
    """A state with no PV, no VG and no fault."""
    return {"version": STATE_VERSION, "pvs": {}, "vgs": {}, "faults": []}


class StateStore:
    """The state, under its locks: ``_transaction`` hands it out and saves changes.

    ``state_file=None`` keeps the state in memory (one process). The private
    methods are the seams a subclass may wrap (the campaign's audit does).
    """

    def __init__(self, state_file: str | os.PathLike[str] | None = None):
        self.state_file = os.fspath(state_file) if state_file is not None else None
        self._memory = empty_state()
        self._thread_lock = threading.RLock()
        #: a memory state's I/O faults (a file state keeps them beside the file)
        self._memory_io_faults: list[dict[str, Any]] = []

    def state(self) -> dict[str, Any]:
        """A copy of the whole simulated state (for assertions and debugging)."""
        with self._transaction() as state:
            return copy.deepcopy(state)

    @contextlib.contextmanager
    def _peek(self) -> Iterator[dict[str, Any]]:
        """The state as last saved, to read only, without waiting for the file lock (a
        file is replaced whole, never written in place): what the kernel knows does
        not wait for an LVM command."""
        if self.state_file is None:
            with self._thread_lock:
                yield self._memory
            return
        yield self._load()

    # -- internals ----------------------------------------------------------------------

    def _io_fault(self, operation: str, argv: list[str] | None) -> bool:
        """Whether this ``operation`` on the state file fails for the command ``argv``."""
        if argv is None:
            return False
        faults = self._load_io_faults()
        if take_matching(faults, argv, operation=operation) is None:
            return False
        self._save_io_faults(faults)  # counted down, or removed once used up
        return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """This process holds the exclusive lock on ``<state file>.lock``."""
        assert self.state_file is not None
        lock_path = self.state_file + ".lock"
        try:
            lock_file = open(lock_path, "a+")
        except OSError as exc:
            raise StateFileError(f"Error locking simulator state {lock_path}: "
                                 f"{exc.strerror}.") from None
        with lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _transaction(self, argv: list[str] | None = None) -> Iterator[dict[str, Any]]:
        """The state, under the lock; written back if it changed, even on an error.

        ``argv``: the LVM command this is for, to which the state file's I/O
        faults apply (helpers pass none).
        """
        with self._thread_lock:
            if self.state_file is None:
                commits = vg_seqnos(self._memory)
                try:
                    yield self._memory
                finally:
                    write_changed_headers(self._memory, commits)
                return
            with self._locked():
                state = self._load(fail=self._io_fault("read", argv))
                before = json.dumps(state, sort_keys=True)
                commits = vg_seqnos(state)
                try:
                    yield state
                finally:
                    # Saved even when the command then raises (a hang
                    # after applying, a full pool): LVM commits as it goes.
                    # The PVs' headers follow only a state that was saved.
                    if json.dumps(state, sort_keys=True) != before:
                        self._save(state, fail=self._io_fault("write", argv))
                        write_changed_headers(state, commits)

    def _load(self, *, fail: bool = False) -> dict[str, Any]:
        assert self.state_file is not None
        try:
            if fail:
                raise OSError(errno.EIO, os.strerror(errno.EIO), self.state_file)
            with open(self.state_file, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            return empty_state()
        except OSError as exc:
            raise StateFileError(f"Error reading simulator state {self.state_file}: "
                                 f"{exc.strerror}.") from None
        except UnicodeDecodeError as exc:
            raise StateFileError(f"state file {self.state_file} is not JSON: {exc}") from None
        if not text.strip():  # never written so: saves replace the file whole
            raise StateFileError(f"state file {self.state_file} is empty: restore it, or "
                                 f"remove it and its PV files ({self.state_file}.pv-*) "
                                 f"to start anew")
        try:
            state = json.loads(text)
        except ValueError as exc:
            raise StateFileError(f"state file {self.state_file} is not JSON: {exc}") from None
        if not (isinstance(state, dict) and state.get("version") == STATE_VERSION
                and isinstance(state.get("pvs"), dict) and isinstance(state.get("vgs"), dict)
                and isinstance(state.get("faults"), list)):
            raise StateFileError(f"state file {self.state_file} is not a simulator state "
                                 f"(version {STATE_VERSION})")
        problem = shape_problem(state)
        if problem is not None:
            raise StateFileError(f"state file {self.state_file} is damaged: {problem}: "
                                 f"restore it, or remove it and its PV files "
                                 f"({self.state_file}.pv-*) to start anew")
        return state

    def _save(self, state: dict[str, Any], *, fail: bool = False) -> None:
        assert self.state_file is not None
        _write_json(self.state_file, state, fail=fail)

    def _load_io_faults(self) -> list[dict[str, Any]]:
        if self.state_file is None:
            return list(self._memory_io_faults)
        path = self.state_file + ".io-faults"
        try:
            with open(path, encoding="utf-8") as handle:
                faults = json.load(handle)
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise StateFileError(f"Error reading simulator faults {path}: {exc}") from None
        if not isinstance(faults, list):
            raise StateFileError(f"Error reading simulator faults {path}: not a list")
        return faults

    def _save_io_faults(self, faults: list[dict[str, Any]]) -> None:
        if self.state_file is None:
            self._memory_io_faults = list(faults)
            return
        path = self.state_file + ".io-faults"
        if faults:
            _write_json(path, faults)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _write_json(path: str, document: Any, *, fail: bool = False) -> None:
    """Replace ``path`` with ``document`` at once, or leave it as it was (StateFileError)."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".lvmsim-", dir=os.path.dirname(os.path.abspath(path)))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1)
            handle.write("\n")
            if fail:
                raise OSError(errno.EIO, os.strerror(errno.EIO), path)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise StateFileError(f"Error writing simulator state {path}: {exc.strerror}.") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
