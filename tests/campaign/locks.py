"""Who holds the admission lock, and whether it comes free after its holder is killed.

The admission lock is a POSIX (``lockf``) lock on a file (oslo.concurrency's
external lock); the kernel lists its holder in ``/proc/locks`` by inode and
pid, which is how the campaign finds the process to SIGKILL.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time


def holders(path: str) -> set[int]:
    """Pids holding a lock on ``path`` now (waiters excluded)."""
    try:
        inode = os.stat(path).st_ino
    except FileNotFoundError:
        return set()
    pids = set()
    with open("/proc/locks", encoding="ascii") as handle:
        for line in handle:
            fields = line.split()
            if "->" in fields or len(fields) < 6:
                continue
            pid, where = fields[4], fields[5]
            if where.rsplit(":", 1)[-1] == str(inode):
                pids.add(int(pid))
    return pids


def find_holder(path: str, candidates: set[int], within_s: float) -> int | None:
    """One of ``candidates`` seen holding the lock within ``within_s`` seconds, or None."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        held = holders(path) & candidates
        if held:
            return min(held)
        time.sleep(0.0005)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_free(path: str, victim: int, within_s: float) -> tuple[str, float]:
    """After ``victim`` was killed: ('acquired', s) once this process got the lock,
    ('busy', s) if only live processes other than the victim held it meanwhile,
    or ('stuck', s) if the victim or a dead process still held it at the deadline."""
    start = time.monotonic()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise
            else:
                fcntl.lockf(fd, fcntl.LOCK_UN)
                return "acquired", time.monotonic() - start
            elapsed = time.monotonic() - start
            if elapsed >= within_s:
                held = holders(path)
                stale = victim in held or any(not _alive(pid) for pid in held)
                return ("stuck" if stale else "busy"), elapsed
            time.sleep(0.001)
    finally:
        os.close(fd)
