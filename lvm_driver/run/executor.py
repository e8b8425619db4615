"""Runs LVM commands as argv lists and turns their failures into typed errors.

The executor owns everything that is the same for every LVM command: the
environment (``LC_ALL=C`` so messages are parseable, fd warnings off, an
optional ``LVM_SYSTEM_DIR``), the per-command timeout, the retry of read-only
reports on LVM's exit code 139, and the mapping of exit code + message to an
error class. Processes are started by a *runner*; the default one starts
them with ``subprocess`` (see ``ProcessRunner`` for why not processutils), the
simulator provides another, so both go through exactly the same logic.

Errors (all rooted in ``driver_kit.exceptions.BackendError``)::

    LVMError (BackendError)
    ├── LVMCommandError                      non-zero exit: argv, exit_code, stdout, stderr
    │   ├── LVMNotFoundError (NotFound)      exit 5 and LVM's "not found" message
    │   │   └── LVMVolumeGroupNotFoundError  the volume group itself is missing
    │   └── LVMAlreadyExistsError (AlreadyExists)
    ├── LVMTimeoutError (BackendTimeout)     the command did not finish in time
    └── LVMOutputError                       output that cannot be parsed (lvm.py)
"""

from __future__ import annotations

import logging
import math
import os
import re
import subprocess
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, TypeAlias

from driver_kit.exceptions import AlreadyExists, NotFound

from lvm_driver.run.command import CommandResult, LVMError, LVMTimeoutError
from lvm_driver.run.command import quote as _quote

__all__ = [
    "CommandResult", "Runner", "ProcessRunner", "LVMExecutor",
    "LVMError", "LVMCommandError", "LVMNotFoundError",
    "LVMVolumeGroupNotFoundError", "LVMAlreadyExistsError", "LVMTimeoutError",
    "LVMOutputError", "error_for", "LVM_ENV_KEYS",
    "REPORT_COMMANDS",
    "EXIT_INVALID_CMD_LINE", "EXIT_FAILED", "EXIT_SEGFAULT",
]

LOG = logging.getLogger(__name__)

#: LVM's exit codes (tools/errors.h): a bad command line, a failed command.
EXIT_INVALID_CMD_LINE: Final = 3
EXIT_FAILED: Final = 5
#: 128 + SIGSEGV: LVM crashing in a report, seen in the wild (LP #1901783, #1932188).
EXIT_SEGFAULT: Final = 139

#: The variables the executor sets (and removes for a tool that is not LVM).
LVM_ENV_KEYS: Final = ("LC_ALL", "LVM_SUPPRESS_FD_WARNINGS", "LVM_SYSTEM_DIR")
#: LVM's reports, the commands a read session runs (``lvm fullreport`` by subcommand).
REPORT_COMMANDS: Final = frozenset({"lvs", "vgs", "pvs", "fullreport"})

_HISTORY_LENGTH: Final = 10_000

# LVM's own phrasings (2.03): lvs/lvremove/lvchange, vgs/lvcreate, lvextend,
# lvrename, lvcreate of a thin volume or snapshot.
_VG_NOT_FOUND = re.compile(r'Volume group "[^"]*" not found')
_NOT_FOUND = re.compile(
    r'Failed to find logical volume|Volume group "[^"]*" not found'
    r'|not found in [Vv]olume group')
_ALREADY_EXISTS = re.compile(r"already exists")


#: Starts one process for ``argv`` with exactly ``env``; returns its result
#: whatever the exit code, raises ``LVMTimeoutError`` past ``timeout_s``.
Runner: TypeAlias = Callable[[list[str], dict[str, str], float], CommandResult]


class LVMCommandError(LVMError):
    """An LVM command exited non-zero; keeps argv, exit code and output."""

    def __init__(self, argv: Sequence[str], exit_code: int, stdout: str,
                 stderr: str):
        self.argv = tuple(argv)
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(self._message())

    def _message(self) -> str:
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        detail = "; ".join(lines) if lines else "no error output"
        return (f"LVM command `{_quote(self.argv)}` failed with exit code "
                f"{self.exit_code}: {detail}")

    def __reduce__(self):  # keeps the error picklable across processes
        return (type(self), (self.argv, self.exit_code, self.stdout, self.stderr))


class LVMNotFoundError(LVMCommandError, NotFound):
    """LVM reported that the named LV, pool, origin or VG does not exist."""


class LVMVolumeGroupNotFoundError(LVMNotFoundError):
    """LVM reported that the volume group itself does not exist."""


class LVMAlreadyExistsError(LVMCommandError, AlreadyExists):
    """LVM refused a create or rename because the name is taken."""


class LVMOutputError(LVMError):
    """An LVM command succeeded but printed something that cannot be parsed."""


def error_for(result: CommandResult) -> LVMCommandError:
    """The typed error for a failed command, chosen by exit code and message."""
    args = (result.argv, result.exit_code, result.stdout, result.stderr)
    if result.exit_code == EXIT_FAILED:
        if _VG_NOT_FOUND.search(result.stderr):
            return LVMVolumeGroupNotFoundError(*args)
        if _NOT_FOUND.search(result.stderr):
            return LVMNotFoundError(*args)
        if _ALREADY_EXISTS.search(result.stderr):
            return LVMAlreadyExistsError(*args)
    return LVMCommandError(*args)


class ProcessRunner:
    """The default runner: one real process per call, argv only, never a shell.

    It runs as this process's user: unprivileged, the driver reaches LVM
    through its privileged daemon instead (``lvm_driver.privsep_runner``),
    never through a per-command root helper. A process killed by signal
    N reports exit code 128 + N, as a shell would (so a crash is 139).
    A missing executable gives exit code 127, an unexecutable one 126.

    Started with ``subprocess`` as ``oslo_concurrency.processutils.execute``
    starts it (pipes, ``close_fds``, SIGPIPE back to default through
    ``restore_signals``), minus processutils' ``preexec_fn``: that one only
    resets SIGPIPE again, and any ``preexec_fn`` makes Python fork the whole
    interpreter instead of using vfork: 6.0 against 1.2 ms per process in
    the benchmark (docs/benchmarks.md), more in a larger process.
    """

    def __init__(self, *, kill_grace_s: float = 2.0):
        self.kill_grace_s = kill_grace_s

    def __call__(self, argv: list[str], env: dict[str, str],
                 timeout_s: float) -> CommandResult:
        command = list(argv)
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug("Running `%s`", _quote(command))
        try:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    close_fds=True, env=env)
        except FileNotFoundError as exc:
            return CommandResult(argv, 127, "", f"{command[0]}: {exc.strerror}\n")
        except OSError as exc:
            return CommandResult(argv, 126, "", f"{command[0]}: {exc.strerror}\n")
        with proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._stop(proc)
                raise LVMTimeoutError(argv, timeout_s) from None
            except BaseException:  # e.g. KeyboardInterrupt: leave no child behind
                self._stop(proc)
                raise
        code = proc.returncode
        if code < 0:
            code = 128 - code
        return CommandResult(argv, code, os.fsdecode(stdout), os.fsdecode(stderr))

    def shell_command(self, env: dict[str, str]) -> tuple[list[str], bool]:
        """How to start an lvm shell (``lvm_driver.run.shell``) with ``env``: its argv, and
        whether an inherited descriptor reaches it (always, started directly)."""
        return ["lvm"], True

    def _stop(self, proc: subprocess.Popen) -> None:
        proc.terminate()
        try:
            proc.communicate(timeout=self.kill_grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


class LVMExecutor:
    """Runs LVM argv lists with LVM's environment, timeout, retries and errors.

    No I/O happens until ``run``. The default runner is a ``ProcessRunner``.
    Thread-safe: ``commands_run`` counts every process started (retries
    included), so tests can assert how many LVM processes an operation costs.

    ``read_session``: LVM's reports (``REPORT_COMMANDS``) run in one long-lived
    lvm shell (``lvm_driver.run.shell``) when the runner offers one
    (``runner.shell_command``), a new one after every ``session_max_commands``;
    its start counts as one process, the reports it answers as
    ``shell_commands_run``. Writes always start their own process.
    """

    def __init__(self, *, lvm_system_dir: str | None = None, timeout_s: float = 120.0,
                 read_retries: int = 2, retry_delay_s: float = 0.5,
                 runner: Runner | None = None,
                 create_missing_vg: Callable[[str], None] | None = None,
                 read_session: bool = False, session_max_commands: int = 10_000):
        if not _positive_finite(timeout_s):
            raise ValueError(f"timeout_s must be a positive number, got {timeout_s!r}")
        if isinstance(read_retries, bool) or not isinstance(read_retries, int) \
                or read_retries < 0:
            raise ValueError(f"read_retries must be an int >= 0, got {read_retries!r}")
        if not (_positive_finite(retry_delay_s) or retry_delay_s == 0):
            raise ValueError(f"retry_delay_s must be >= 0, got {retry_delay_s!r}")
        if lvm_system_dir is not None and (
                not isinstance(lvm_system_dir, str) or not lvm_system_dir
                or "\0" in lvm_system_dir):
            raise ValueError(f"lvm_system_dir must be a path, got {lvm_system_dir!r}")
        self.timeout_s = float(timeout_s)
        self.read_retries = read_retries
        self.retry_delay_s = float(retry_delay_s)
        self.lvm_system_dir = lvm_system_dir
        self._runner: Runner = runner if runner is not None else ProcessRunner()
        #: what stands for the operator's ``vgcreate`` of a missing VG (a simulated
        #: backend's); None on real LVM, where only the operator makes VGs
        self.create_missing_vg = create_missing_vg
        self._lock = threading.Lock()
        self._commands_run = 0
        self._history: deque[tuple[str, ...]] = deque(maxlen=_HISTORY_LENGTH)
        self._session = None
        start = getattr(self._runner, "shell_command", None)
        if read_session and start is not None:
            if isinstance(session_max_commands, bool) or not isinstance(
                    session_max_commands, int) or session_max_commands < 1:
                raise ValueError("session_max_commands must be an int >= 1, got "
                                 f"{session_max_commands!r}")
            from lvm_driver.run.read_session import ReadSession  # loaded only when used
            system_dir = lvm_system_dir or os.environ.get("LVM_SYSTEM_DIR") or "/etc/lvm"
            self._session = ReadSession(start, system_dir, on_start=self._started,
                                        max_commands=session_max_commands)
            weakref.finalize(self, self._session.close)

    @property
    def commands_run(self) -> int:
        """How many processes this executor has started (retries included)."""
        with self._lock:
            return self._commands_run

    @property
    def shell_commands_run(self) -> int:
        """How many reports an lvm shell answered (no process started for them)."""
        return self._session.commands_run if self._session is not None else 0

    @property
    def session(self):  # -> lvm_driver.run.shell.ReadSession | None
        """The read session (None when reports start their own process)."""
        return self._session

    def close(self) -> None:
        """Stop the read session's lvm shell, if one runs; a later read starts another."""
        if self._session is not None:
            self._session.close()

    def _started(self, argv: tuple[str, ...], env: dict[str, str]) -> None:
        """Counts an lvm shell's start (started with ``env``) as one process."""
        with self._lock:
            self._commands_run += 1
            self._history.append(argv)

    @property
    def runner(self) -> Runner:
        """What starts the commands (a ``ProcessRunner``, or a simulator)."""
        return self._runner

    @property
    def history(self) -> tuple[tuple[str, ...], ...]:
        """The argv of each process started, oldest first (the last 10,000)."""
        with self._lock:
            return tuple(self._history)

    def environment(self) -> dict[str, str]:
        """The variables added to the inherited environment of every command."""
        env = {"LC_ALL": "C", "LVM_SUPPRESS_FD_WARNINGS": "1"}
        if self.lvm_system_dir is not None:
            env["LVM_SYSTEM_DIR"] = self.lvm_system_dir
        return env

    def run(self, argv: Sequence[str], *, readonly: bool,
            timeout_s: float | None = None, lvm_env: bool = True) -> CommandResult:
        """Run one LVM command; raise a typed ``LVMError`` unless it exits 0.

        ``readonly`` commands (reports) are retried on exit code 139 up to
        ``read_retries`` times; writes are never retried, since a crashed
        write may have been applied. ``lvm_env=False`` runs a tool that is not
        LVM (``dd``) without LVM's variables, so a root helper gets it as is.
        """
        command = _check_argv(argv)
        timeout = self.timeout_s if timeout_s is None else timeout_s
        if not _positive_finite(timeout):
            raise ValueError(f"timeout_s must be a positive number, got {timeout_s!r}")
        env = dict(os.environ)
        if lvm_env:
            env.update(self.environment())
        else:
            for key in LVM_ENV_KEYS:
                env.pop(key, None)
        if readonly and lvm_env and self._session is not None and _is_report(command):
            result = self._session.run(command, env, timeout)
            if result is not None:
                if result.exit_code == 0:
                    return result
                raise error_for(result)
        attempts = 1 + (self.read_retries if readonly else 0)
        for attempt in range(1, attempts + 1):
            with self._lock:
                self._commands_run += 1
                self._history.append(tuple(command))
            result = self._runner(list(command), dict(env), timeout)
            if result.exit_code == 0:
                return result
            if readonly and result.exit_code == EXIT_SEGFAULT and attempt < attempts:
                LOG.warning("LVM crashed (exit code 139) running `%s`; retrying "
                            "(%d of %d)", _quote(command), attempt, attempts - 1)
                if self.retry_delay_s:
                    time.sleep(self.retry_delay_s)
                continue
            break
        raise error_for(result)


def _is_report(argv: Sequence[str]) -> bool:
    name = os.path.basename(argv[0])
    if name == "lvm" and len(argv) > 1:
        name = argv[1]
    return name in REPORT_COMMANDS


def _positive_finite(value: object) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value > 0)


def _check_argv(argv: Sequence[str]) -> list[str]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv must be a list of strings, never a shell string")
    command = list(argv)
    if not command:
        raise ValueError("argv is empty")
    for arg in command:
        if not isinstance(arg, str):
            raise TypeError(f"every argv item must be a str, got {arg!r}")
        if "\0" in arg:
            raise ValueError(f"argv item contains a NUL byte: {arg!r}")
    return command
