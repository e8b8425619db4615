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

__all__ = ["check_lock_path", "default_lock_path", "private_lock_dir"]


def default_lock_path() -> str:
    """Where the lock files go when ``lock_path`` is unset: ``driver_kit-locks`` in the
    system temporary directory."""
    return os.path.join(tempfile.gettempdir(), "driver_kit-locks")


def check_lock_path(path: str, what: str = "lock_path") -> None:
    """ConfigError, one line naming ``path``, unless it is a directory or one that can
    be made (its nearest existing parent is a directory this process may write in).
    Nothing is created: that happens at the first lock."""
    if "\0" in path:
        raise ConfigError(f"{what} {path!r}: a path cannot hold a NUL character")
    probe = os.path.abspath(path)
    while True:
        try:
            info = os.stat(probe)
        except (FileNotFoundError, NotADirectoryError):  # judged at the parent
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
            continue
        except OSError as exc:
            raise ConfigError(f"{what} {path}: {probe}: {exc.strerror}") from None
        if not stat.S_ISDIR(info.st_mode):
            whose = "" if probe == os.path.abspath(path) else f" ({probe})"
            raise ConfigError(f"{what} {path}: is not a directory{whose}: set lock_path "
                              f"to a directory")
        if probe != os.path.abspath(path) and not os.access(probe, os.W_OK | os.X_OK):
            raise ConfigError(f"{what} {path}: cannot be made: {probe} is not writable "
                              f"by this user")
        return


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
