"""The default directory of the admission lock files, and the proof that it is the
service user's own before a lock file is opened in it.

The default lies in the shared temporary directory, where any local user could have
made it first, open to all, with symlinks named as the lock files (opening one as
the service would create or lock a file of the attacker's choice). So the default
is made private (0700) when missing and otherwise used only when it is a real
directory owned by this process's user, writable by that user alone, holding no
symlink. A ``lock_path`` the operator sets is the operator's choice and not checked.
"""

from __future__ import annotations

import os
import stat
import tempfile

from driver_kit.exceptions import ConfigError

__all__ = ["default_lock_path", "private_lock_dir"]


def default_lock_path() -> str:
    """Where the lock files go when ``lock_path`` is unset: ``driver_kit-locks`` in the
    system temporary directory."""
    return os.path.join(tempfile.gettempdir(), "driver_kit-locks")


def private_lock_dir(path: str) -> None:
    """Make ``path`` (mode 0700) or check it is this user's own; ConfigError, one line
    naming the path and what to do, when it is not."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    uid = os.geteuid()
    why = None
    if stat.S_ISLNK(info.st_mode):
        why = "is a symlink"
    elif not stat.S_ISDIR(info.st_mode):
        why = "is not a directory"
    elif info.st_uid != uid:
        why = f"is owned by uid {info.st_uid}, not by this service's user (uid {uid})"
    elif info.st_mode & 0o022:
        why = f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    else:
        with os.scandir(path) as entries:
            planted = next((entry.name for entry in entries if entry.is_symlink()), None)
        if planted is not None:
            why = f"holds a symlink ({planted})"
    if why is not None:
        raise ConfigError(f"lock_path {path} (the default) {why}: remove it, or set "
                          f"lock_path in the backend's section to a directory of this "
                          f"service's user that only it can write to")
