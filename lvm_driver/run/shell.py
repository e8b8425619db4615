"""``LVMShell``: one long-lived ``lvm`` shell that runs LVM's reports, so a read
starts no process (the technique of lvm2's lvmdbusd).

LVM reads its commands from the shell's stdin, one line each; with
``report/output_format = json`` and the command log on, each command ends with
one JSON document on LVM's report channel: the report (exactly the text a
fresh ``lvs --reportformat json`` prints) and the log, whose ``shell`` status
entry holds the command's return code and whose error lines are what a fresh
process prints on stderr. The channel is a pipe passed as ``LVM_REPORT_FD``;
when the runner says no inherited descriptor reaches the shell, it is stdout.

Those settings, and ``use_aio = 0`` (each command would otherwise wait ~30 ms
for its AIO context to be torn down), live in a private LVM configuration
directory (``shell_config_dir``) that mirrors the operator's: every entry a
symlink to the original, ``lvmlocal.conf`` their text plus ours. ``HOME`` is
``/dev/null``, so LVM's shell cannot write ``~/.lvm_history``.

Any surprise (end of file, text that is not LVM's, no status) raises
``ShellError`` and stops the process; a timeout stops it and raises
``LVMTimeoutError``. The caller starts a new one for the next read.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Final

import psutil

from lvm_driver.run.command import CommandResult, LVMError, LVMTimeoutError

__all__ = ["LVMShell", "ShellError", "ShellStart", "shell_config_dir",
           "passable", "SHELL_SETTINGS"]

LOG = logging.getLogger(__name__)

#: What the shell's private configuration adds to the operator's (lvmlocal.conf).
SHELL_SETTINGS: Final = """\
# driver-kit's lvm shell: JSON reports with their command log, no AIO
global {
    use_aio = 0
}
report {
    output_format = "json"
}
log {
    report_command_log = 1
    command_log_selection = "log_context=shell || log_type!=status"
    command_log_cols = "log_seq_num,log_type,log_context,log_object_type,log_object_name,log_message,log_ret_code"
    command_log_sort = "log_seq_num"
}
shell {
    history_size = 0
}
"""

#: Starts a shell: given its environment, the argv to run and whether an inherited
#: descriptor survives it (False through sudo or rootwrap); None: no shell here.
ShellStart = Callable[[dict[str, str]], "tuple[list[str], bool] | None"]

_PROMPT: Final = "lvm> "
_LOG_KEY: Final = '"log": ['
_LOG_SEPARATOR: Final = '\n      ,\n      "log": ['
_ECMD_PROCESSED: Final = 1
_READ_BYTES: Final = 1 << 20
_PIPE_BYTES: Final = 1 << 20
_RSS_CHECK_EVERY: Final = 16
_UNSAFE = frozenset(" \t\n\r\"'\\")


class ShellError(LVMError):
    """The shell could not run a command (dead, mute, or printing what LVM does not)."""


def shell_config_dir(system_dir: str) -> str:
    """A new private LVM system directory: ``system_dir``'s entries as symlinks, and
    its ``lvmlocal.conf`` (if any) followed by ``SHELL_SETTINGS``. ShellError when
    the operator's ``lvmlocal.conf`` cannot be read (the shell would not see it)."""
    try:
        entries = sorted(os.listdir(system_dir))
    except FileNotFoundError:
        entries = []
    except OSError as exc:
        raise ShellError(f"cannot list {system_dir}: {exc.strerror}") from None
    local = ""
    if "lvmlocal.conf" in entries:
        try:
            with open(os.path.join(system_dir, "lvmlocal.conf"), encoding="utf-8") as f:
                local = f.read() + "\n"
        except (OSError, ValueError) as exc:
            raise ShellError(f"cannot read {system_dir}/lvmlocal.conf: {exc}") from None
    path = tempfile.mkdtemp(prefix="driver-kit-lvm-shell-")
    for name in entries:
        if name != "lvmlocal.conf":
            os.symlink(os.path.join(os.path.abspath(system_dir), name),
                       os.path.join(path, name))
    with open(os.path.join(path, "lvmlocal.conf"), "w", encoding="utf-8") as f:
        f.write(local + SHELL_SETTINGS)
    return path


def passable(argv: Sequence[str]) -> bool:
    """True when LVM's line splitter gives back exactly ``argv`` (no blank, quote,
    backslash or empty argument)."""
    return bool(argv) and all(arg and not _UNSAFE.intersection(arg) for arg in argv)


def _command_line(argv: Sequence[str]) -> bytes:
    """``argv`` as one shell line; ShellError for an argument LVM's splitter would change."""
    if not passable(argv):
        raise ShellError(f"`{' '.join(argv)}` cannot be passed through the lvm shell")
    return (" ".join(argv) + "\n").encode()


def _strip_prompts(text: str) -> str:
    while text.startswith(_PROMPT):
        text = text[len(_PROMPT):]
    while text.endswith(_PROMPT):
        text = text[:-len(_PROMPT)]
    return text


def _finished(doc: str) -> list[dict] | None:
    """The log of a complete document, None while it is still arriving."""
    if not doc.endswith("}\n"):
        return None
    at = doc.rfind(_LOG_KEY)
    if at < 0:
        return None
    try:
        log = json.loads("{" + doc[at:])["log"]
    except (ValueError, KeyError, TypeError):
        return None
    return log if isinstance(log, list) else None


def _result(argv: Sequence[str], doc: str, log: list, stderr: str) -> CommandResult:
    """What a fresh process would have printed and returned, from the shell's document."""
    status = [e for e in log if isinstance(e, dict) and e.get("log_context") == "shell"
              and e.get("log_type") == "status"]
    try:
        code = int(status[-1]["log_ret_code"])
    except (IndexError, KeyError, TypeError, ValueError):
        raise ShellError(f"`{argv[0]}` in the lvm shell logged no status") from None
    printed = [f"  {e.get('log_message', '')}\n" for e in log
               if isinstance(e, dict) and e.get("log_type") == "print"]
    errors = [f"  {e.get('log_message', '')}\n" for e in log
              if isinstance(e, dict) and e.get("log_type") in ("error", "warn")]
    report = ""
    if '"report"' in doc[:doc.rfind(_LOG_KEY)]:
        cut = doc.rfind(_LOG_SEPARATOR)
        if cut >= 0:
            report = doc[:cut] + "\n  }\n"
        else:  # laid out otherwise: the same report, re-serialised
            try:
                report = json.dumps({"report": json.loads(doc)["report"]}) + "\n"
            except (ValueError, KeyError, TypeError):
                raise ShellError("the lvm shell printed a report that is not JSON") from None
    return CommandResult(tuple(argv), 0 if code == _ECMD_PROCESSED else code,
                         "".join(printed) + report, stderr + "".join(errors))


class LVMShell:
    """One ``lvm`` shell process at a time, started on first use; thread-safe, one
    command at a time. Stopped (and restarted by the next ``run``) after a timeout,
    a ``ShellError``, ``max_commands`` commands, or when its memory has grown by
    more than ``max_rss_growth_bytes`` since its first command."""

    def __init__(self, start: ShellStart, env: dict[str, str], system_dir: str, *,
                 max_commands: int = 10_000, max_rss_growth_bytes: int = 256 * 1024 ** 2,
                 kill_grace_s: float = 1.0):
        self._start_command = start
        self._env = dict(env)
        self._system_dir = system_dir
        self.max_commands = max_commands
        self.max_rss_growth_bytes = max_rss_growth_bytes
        self.kill_grace_s = kill_grace_s
        self.lock = threading.Lock()
        #: the process that made this object: only it may use or stop the shell
        self.owner_pid = os.getpid()
        self._proc: subprocess.Popen | None = None
        self._report_fd: int | None = None
        self._conf_dir: str | None = None
        self._served = 0
        self._rss_baseline: int | None = None
        #: processes started, and commands run through them, over this object's life
        self.starts = 0
        self.commands_run = 0
        #: the argv and environment of the last process started
        self.argv: tuple[str, ...] = ()
        self.started_env: dict[str, str] = {}

    @property
    def pid(self) -> int | None:
        """The pid of the running shell (of the root helper, when there is one)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def fresh(self) -> bool:
        """True when the next ``run`` is the first command of its process."""
        return self._proc is None or self._served == 0

    def start(self) -> None:
        """Start the process (no-op when one runs); ShellError when it cannot start."""
        if self._proc is not None:
            return
        self._conf_dir = shell_config_dir(self._system_dir)
        env = {**self._env, "LVM_SYSTEM_DIR": self._conf_dir, "HOME": "/dev/null"}
        command = self._start_command(env)
        if command is None:
            self._remove_conf_dir()
            raise ShellError("this runner offers no lvm shell")
        argv, fds_survive = command
        write_fd = None
        if fds_survive:
            self._report_fd, write_fd = os.pipe()
            env["LVM_REPORT_FD"] = str(write_fd)
            try:  # fewer, larger reads of a large report
                fcntl.fcntl(self._report_fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
            except OSError:
                pass
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, close_fds=True, pass_fds=() if write_fd is None else (write_fd,),
                start_new_session=True)
        except OSError as exc:
            self.stop()
            raise ShellError(f"cannot start `{argv[0]}`: {exc.strerror}") from None
        finally:
            if write_fd is not None:
                os.close(write_fd)
        for fd in self._fds():
            os.set_blocking(fd, False)
        self.starts += 1
        self.argv, self.started_env = tuple(argv), env
        self._served = 0
        self._rss_baseline = None
        LOG.debug("Started an lvm shell (pid %d)", self._proc.pid)

    def run(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        """Run one report command in the shell (the caller holds ``lock``)."""
        line = _command_line(argv)
        if self._proc is not None and self._proc.poll() is not None:
            LOG.info("The lvm shell (pid %d) exited with code %s while idle: starting "
                     "another", self._proc.pid, self._proc.returncode)
            self.stop(graceful=False)
        self.start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
            doc, log, stderr = self._read(argv, timeout_s)
            result = _result(argv, doc, log, stderr)
        except (ShellError, LVMTimeoutError):
            self.stop(graceful=False)
            raise
        except OSError as exc:  # e.g. BrokenPipeError: it died before reading the line
            self.stop(graceful=False)
            raise ShellError(f"the lvm shell went away: {exc}") from None
        self._served += 1
        self.commands_run += 1
        if self._served >= self.max_commands or self._grew():
            self.stop()
        return result

    def _fds(self) -> list[int]:
        proc = self._proc
        if proc is None:
            return []
        fds = [proc.stdout.fileno(), proc.stderr.fileno()]  # type: ignore[union-attr]
        return fds + ([self._report_fd] if self._report_fd is not None else [])

    def _read(self, argv: Sequence[str], timeout_s: float) -> tuple[str, list, str]:
        """Everything the command printed, up to the end of its document."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        doc_fd = self._report_fd if self._report_fd is not None else out_fd
        chunks: dict[int, list[bytes]] = {fd: [] for fd in self._fds()}
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LVMTimeoutError(argv, timeout_s)
            ready, _, _ = select.select(list(chunks), [], [], left)
            for fd in ready:
                data = os.read(fd, _READ_BYTES)
                if not data:
                    raise ShellError(f"the lvm shell exited during `{argv[0]}` "
                                     f"(exit code {proc.poll()})")
                chunks[fd].append(data)
            if doc_fd not in ready:
                continue
            parts = chunks[doc_fd]
            head = _strip_prompts(parts[0][:64].decode(errors="replace"))
            if head and not "  {".startswith(head[:3]):
                raise ShellError(f"the lvm shell printed {head!r}, not a report")
            if not parts[-1].rstrip(_PROMPT.encode()).endswith(b"}\n"):
                continue  # cheap: only a chunk ending as a document ends is looked at
            doc = _strip_prompts(b"".join(parts).decode(errors="replace"))
            log = _finished(doc)
            if log is None:
                continue
            stray = _strip_prompts(b"".join(chunks[out_fd]).decode(errors="replace")) \
                if doc_fd != out_fd else ""
            if stray.strip():
                raise ShellError(f"the lvm shell printed {stray[:60]!r} outside its report")
            stderr = b"".join(chunks[err_fd]) + self._drain(err_fd)
            return doc, log, stderr.decode(errors="replace")

    @staticmethod
    def _drain(fd: int) -> bytes:
        try:
            return os.read(fd, _READ_BYTES) or b""
        except BlockingIOError:
            return b""

    def _grew(self) -> bool:
        """True when the shell's memory grew past the limit (checked every few commands)."""
        if self._served % _RSS_CHECK_EVERY != 1 or self._proc is None:
            return False
        try:
            root = psutil.Process(self._proc.pid)
            rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
        except psutil.Error:
            return False
        if self._rss_baseline is None:
            self._rss_baseline = rss
            return False
        if rss - self._rss_baseline > self.max_rss_growth_bytes:
            LOG.info("Restarting the lvm shell: its memory grew from %d to %d bytes",
                     self._rss_baseline, rss)
            return True
        return False

    def stop(self, *, graceful: bool = True) -> None:
        """Stop the process: ``exit`` on its stdin (``graceful``), then SIGKILL to its
        process group if it is still there. In another process than the owner
        (after a fork) the shell is only forgotten (``abandon``)."""
        if os.getpid() != self.owner_pid:
            self.abandon()
            return
        proc, self._proc = self._proc, None
        if proc is not None:
            if graceful:
                try:
                    proc.stdin.write(b"exit\n")  # type: ignore[union-attr]
                    proc.stdin.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            try:
                proc.wait(self.kill_grace_s if graceful else 0)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
            for stream in (proc.stdout, proc.stderr, proc.stdin):
                try:
                    stream.close()  # type: ignore[union-attr]
                except OSError:
                    pass
        if self._report_fd is not None:
            os.close(self._report_fd)
            self._report_fd = None
        self._remove_conf_dir()

    def abandon(self) -> None:
        """In a forked child: forget the parent's shell without touching it (its pipes'
        copies closed here, nothing written, no signal sent)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                try:  # stdin's buffer is empty (flushed after each line): nothing written
                    stream.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            proc.returncode = 0  # not this process's child: nothing to wait for
        if self._report_fd is not None:
            try:
                os.close(self._report_fd)
            except OSError:
                pass
            self._report_fd = None
        self._conf_dir = None  # the parent's, the parent removes it

    def _remove_conf_dir(self) -> None:
        if self._conf_dir is not None:
            shutil.rmtree(self._conf_dir, ignore_errors=True)
            self._conf_dir = None


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the shell's process group; through a root helper we may not signal
    root's processes, so its helper gets SIGTERM (sudo relays it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except PermissionError:
        proc.terminate()
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

