"""``ReadSession``: an executor's reports through ``LVMShell``, one shell per process,
fresh processes whenever the shell cannot answer."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence

from lvm_driver.run.command import CommandResult
from lvm_driver.run.shell import LVMShell, ShellError, ShellStart, passable

__all__ = ["ReadSession"]

LOG = logging.getLogger(__name__)


class ReadSession:
    """An executor's reads through ``LVMShell``: one shell per process (a forked child
    starts its own and never touches its parent's), ``None`` from ``run`` whenever
    a read must be a fresh process instead: no shell could start (one WARNING,
    another try after ``retry_s``), the shell broke on this command, or it stayed
    busy past the command's timeout."""

    def __init__(self, start: ShellStart, system_dir: str, *, max_commands: int,
                 on_start: Callable[[tuple[str, ...], dict[str, str]], None],
                 retry_s: float = 60.0):
        self._start = start
        self._system_dir = system_dir
        self.max_commands = max_commands
        self._on_start = on_start
        self.retry_s = retry_s
        self._lock = threading.Lock()
        self._shell: LVMShell | None = None
        self._retry_at = 0.0
        self._warned = False
        #: reports answered by a shell (no process started for them)
        self.commands_run = 0

    @property
    def shell(self) -> LVMShell | None:
        """This process's shell object (None before the first read)."""
        with self._lock:
            shell = self._shell
        return shell if shell is not None and shell.owner_pid == os.getpid() else None

    def _current(self, env: dict[str, str]) -> LVMShell | None:
        with self._lock:
            if self._shell is not None and self._shell.owner_pid != os.getpid():
                self._shell.abandon()
                self._shell = None
            if self._shell is None:
                if time.monotonic() < self._retry_at:
                    return None
                self._shell = LVMShell(self._start, env, self._system_dir,
                                       max_commands=self.max_commands)
            return self._shell

    def run(self, argv: Sequence[str], env: dict[str, str],
            timeout_s: float) -> CommandResult | None:
        """The report ``argv`` run in the shell, or None: run it as a fresh process."""
        if not passable(argv):
            return None
        shell = self._current(env)
        if shell is None or not shell.lock.acquire(timeout=timeout_s):
            return None
        try:
            starts, fresh = shell.starts, shell.fresh
            try:
                result = shell.run(argv, timeout_s)
            except ShellError as exc:
                if fresh:
                    self._unavailable(shell, exc)
                else:
                    LOG.warning("The lvm shell failed running `%s` (%s): running it as "
                                "a fresh process; a new shell serves the next read",
                                " ".join(argv), exc)
                return None
            finally:
                for _ in range(shell.starts - starts):
                    self._on_start(shell.argv, shell.started_env)
        finally:
            shell.lock.release()
        with self._lock:
            self.commands_run += 1
        return result

    def _unavailable(self, shell: LVMShell, exc: ShellError) -> None:
        with self._lock:
            if self._shell is shell:
                self._shell = None
            self._retry_at = time.monotonic() + self.retry_s
            warned, self._warned = self._warned, True
        (LOG.debug if warned else LOG.warning)(
            "Cannot start an lvm shell for LVM's reports (%s): running them as fresh "
            "processes", exc)

    def close(self) -> None:
        """Stop this process's shell (a parent's is only forgotten)."""
        with self._lock:
            shell, self._shell = self._shell, None
        if shell is None:
            return
        if shell.owner_pid != os.getpid():
            shell.abandon()
            return
        with shell.lock:
            shell.stop()
