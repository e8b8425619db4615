"""The privileged daemon's LVM commands: one entrypoint per command the driver issues.

Each takes the backend's section name first; the VG and thin pool come from that
section (``backend.load``), every other argument is checked here, and the argv is
built by ``lvm_driver.commands.lvm_argv``, the builders ``VolumeGroup`` runs as root. LVM runs
with a fixed environment (``LC_ALL=C``, fd warnings off, a fixed ``PATH``, and
``LVM_SYSTEM_DIR`` only from a root-owned ``lvm_conf_file``), on real LVM or, when the
section says ``lvm_backend = simulator``, on the simulator's state file. A reply is
``{"exit_code", "stdout", "stderr", "timed_out"}``; a refusal raises
``PrivilegeRefused`` and runs nothing.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Final

from driver_kit.exceptions import DriverKitError
from lvm_driver.commands import lvm_argv
from lvm_driver.policy.tags import is_driver_tag
from lvm_driver.privileged import PrivilegeRefused, backend, default
from lvm_driver.read.report import load_rows
from lvm_driver.run.command import CommandResult, LVMTimeoutError
from lvm_driver.run.names import validate_lv_name

__all__ = ["report", "live_report", "vg_report", "pv_report", "lvm_query",
           "create_thin_pool", "create_thin", "create_thick", "create_snapshot",
           "extend", "remove", "rename", "activate", "deactivate", "merge", "add_tags",
           "remove_tags", "run", "runner_for", "lvm_env", "MAX_SIZE_BYTES",
           "MAX_TIMEOUT_S", "checked_name", "checked_size", "checked_timeout", "refusing",
           "execute"]

#: the largest size any entrypoint takes: 8 PiB
MAX_SIZE_BYTES: Final = 8 << 50
#: the longest a command may run, whatever the caller asks
MAX_TIMEOUT_S: Final = 24 * 3600.0
_MAX_TAGS: Final = 8
_PATH: Final = "/usr/sbin:/usr/bin:/sbin:/bin"


@contextlib.contextmanager
def refusing(what: str) -> Iterator[None]:
    """Any bad argument found in the block is a PrivilegeRefused saying ``what``."""
    try:
        yield
    except PrivilegeRefused:
        raise
    except (DriverKitError, ValueError, TypeError) as exc:
        raise PrivilegeRefused(f"{what} refused: {exc}") from None


def checked_name(name: object) -> str:
    """An LV name as LVM and the driver allow it (no '/', '.', '..', leading '-',
    whitespace or NUL)."""
    if not isinstance(name, str):
        raise PrivilegeRefused(f"an LV name must be a str, got {type(name).__name__}")
    return validate_lv_name(name)


def checked_size(size: object, what: str = "size") -> int:
    """A byte count: an int, > 0, <= MAX_SIZE_BYTES, whole 512-byte sectors."""
    if isinstance(size, bool) or not isinstance(size, int):
        raise PrivilegeRefused(f"{what} must be an int of bytes, got {size!r}")
    if not 0 < size <= MAX_SIZE_BYTES or size % 512:
        raise PrivilegeRefused(f"{what} {size} is not a positive multiple of 512 bytes up "
                               f"to {MAX_SIZE_BYTES}")
    return size


def checked_timeout(timeout_s: object) -> float:
    """Seconds a command may run: a number within (0, MAX_TIMEOUT_S]."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or \
            not math.isfinite(timeout_s) or not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise PrivilegeRefused(f"timeout {timeout_s!r} is not within (0, {MAX_TIMEOUT_S:g}] s")
    return float(timeout_s)


def _checked_tags(tags: object) -> list[str]:
    if not isinstance(tags, (list, tuple)) or len(tags) > _MAX_TAGS:
        raise PrivilegeRefused(f"tags must be a list of at most {_MAX_TAGS}, got {tags!r}")
    for tag in tags:
        if not isinstance(tag, str) or not is_driver_tag(tag):
            raise PrivilegeRefused(f"tag {tag!r} is not one of the driver's tags")
    return list(tags)


_runners_lock = threading.Lock()
_runners: dict[tuple[bool, str | None], Any] = {}


def runner_for(served: backend.Backend) -> Any:
    """What runs LVM for ``served``: a ``ProcessRunner`` (no root helper: the daemon is
    root) or the simulator on the section's state file; one of each, kept."""
    key = (served.simulated, served.state_file)
    with _runners_lock:
        runner = _runners.get(key)
        if runner is None:
            if served.simulated:
                from lvm_driver.simulator import LVMSimulator
                runner = LVMSimulator(state_file=served.state_file)
            else:
                from lvm_driver.run.executor import ProcessRunner
                runner = ProcessRunner()
            _runners[key] = runner
    return runner


def lvm_env(served: backend.Backend) -> dict[str, str]:
    """The whole environment of every LVM command the daemon runs."""
    env = {"PATH": _PATH, "LC_ALL": "C", "LVM_SUPPRESS_FD_WARNINGS": "1"}
    if served.system_dir is not None:
        env["LVM_SYSTEM_DIR"] = served.system_dir
    return env


def execute(served: backend.Backend, argv: Sequence[str], timeout_s: float) -> CommandResult:
    """Run ``argv`` (built here) for ``served``; LVMTimeoutError past the timeout."""
    return runner_for(served)(list(argv), lvm_env(served), timeout_s)


def run(served: backend.Backend, argv: Sequence[str], timeout_s: object) -> dict[str, Any]:
    """Run ``argv`` for ``served`` and give the reply the client turns into a result."""
    timeout = checked_timeout(timeout_s)
    try:
        result = execute(served, argv, timeout)
    except LVMTimeoutError:
        return {"exit_code": None, "stdout": "", "stderr": "", "timed_out": True}
    return {"exit_code": result.exit_code, "stdout": result.stdout,
            "stderr": result.stderr, "timed_out": False}


# -- reads --------------------------------------------------------------------

@default.entrypoint
def report(section: str, timeout_s: float) -> dict[str, Any]:
    """The full ``lvs --readonly`` of the configured VG."""
    with refusing("report"):
        served = backend.load(section)
        argv = lvm_argv.report(served.vg)
    return run(served, argv, timeout_s)


@default.entrypoint
def live_report(section: str, timeout_s: float, name: str | None = None) -> dict[str, Any]:
    """The live ``lvs`` of the configured VG, or of its LV ``name``."""
    with refusing("live report"):
        served = backend.load(section)
        argv = lvm_argv.live_report(served.vg, None if name is None else checked_name(name))
    return run(served, argv, timeout_s)


@default.entrypoint
def vg_report(section: str, timeout_s: float) -> dict[str, Any]:
    """The ``vgs`` of the configured VG."""
    with refusing("VG report"):
        served = backend.load(section)
        argv = lvm_argv.vg_report(served.vg)
    return run(served, argv, timeout_s)


@default.entrypoint
def pv_report(section: str, timeout_s: float) -> dict[str, Any]:
    """The ``pvs`` of the driver, with the rows of the configured VG's PVs only."""
    with refusing("PV report"):
        served = backend.load(section)
    reply = run(served, lvm_argv.pv_report(), timeout_s)
    if reply["exit_code"] == 0:
        try:
            rows = [row for row in load_rows(reply["stdout"], "pv")
                    if isinstance(row, dict) and row.get("vg_name") == served.vg]
        except DriverKitError:
            rows = []
        reply["stdout"] = json.dumps({"report": [{"pv": rows}]})
    return reply


@default.entrypoint
def lvm_query(section: str, what: str, timeout_s: float) -> dict[str, Any]:
    """``lvm segtypes`` or ``lvm version``."""
    with refusing("lvm query"):
        served = backend.load(section)
        argv = lvm_argv.lvm_query(what)
    return run(served, argv, timeout_s)


# -- writes -------------------------------------------------------------------

@default.entrypoint
def create_thin_pool(section: str, name: str, size_bytes: int,
                     metadata_size_bytes: int | None, timeout_s: float) -> dict[str, Any]:
    """``lvcreate`` of the configured thin pool."""
    with refusing("thin pool create"):
        served = backend.load(section)
        md = None if metadata_size_bytes is None else checked_size(
            metadata_size_bytes, "metadata size")
        argv = lvm_argv.create_thin_pool(served.vg, served.pool(name),
                                         checked_size(size_bytes), metadata_size_bytes=md)
    return run(served, argv, timeout_s)


@default.entrypoint
def create_thin(section: str, name: str, size_bytes: int, pool: str, tags: list[str],
                timeout_s: float) -> dict[str, Any]:
    """``lvcreate`` of a thin volume in the configured pool."""
    with refusing("thin volume create"):
        served = backend.load(section)
        argv = lvm_argv.create_thin(served.vg, checked_name(name), checked_size(size_bytes),
                                    pool=served.pool(pool), tags=_checked_tags(tags))
    return run(served, argv, timeout_s)


@default.entrypoint
def create_thick(section: str, name: str, size_bytes: int, tags: list[str],
                 timeout_s: float) -> dict[str, Any]:
    """``lvcreate`` of a linear volume in the configured VG."""
    with refusing("thick volume create"):
        served = backend.load(section)
        argv = lvm_argv.create_thick(served.vg, checked_name(name),
                                     checked_size(size_bytes), tags=_checked_tags(tags))
    return run(served, argv, timeout_s)


@default.entrypoint
def create_snapshot(section: str, name: str, origin: str, tags: list[str], activate: bool,
                    timeout_s: float) -> dict[str, Any]:
    """``lvcreate --snapshot`` of an LV of the configured VG (never of its pool)."""
    with refusing("snapshot create"):
        served = backend.load(section)
        if not isinstance(activate, bool):
            raise PrivilegeRefused(f"activate must be a bool, got {activate!r}")
        origin = _not_a_pool(served, checked_name(origin))
        argv = lvm_argv.create_snapshot(served.vg, checked_name(name), origin,
                                        tags=_checked_tags(tags), activate=activate)
    return run(served, argv, timeout_s)


@default.entrypoint
def extend(section: str, name: str, size_bytes: int, timeout_s: float) -> dict[str, Any]:
    """``lvextend`` of an LV of the configured VG."""
    with refusing("extend"):
        served = backend.load(section)
        argv = lvm_argv.extend(served.vg, checked_name(name), checked_size(size_bytes))
    return run(served, argv, timeout_s)


@default.entrypoint
def remove(section: str, name: str, timeout_s: float) -> dict[str, Any]:
    """``lvremove --force`` of one LV of the configured VG, never its thin pool."""
    with refusing("remove"):
        served = backend.load(section)
        argv = lvm_argv.remove(served.vg, _not_a_pool(served, checked_name(name)))
    return run(served, argv, timeout_s)


@default.entrypoint
def rename(section: str, old: str, new: str, timeout_s: float) -> dict[str, Any]:
    """``lvrename`` of an LV of the configured VG (neither name its thin pool)."""
    with refusing("rename"):
        served = backend.load(section)
        argv = lvm_argv.rename(served.vg, _not_a_pool(served, checked_name(old)),
                               _not_a_pool(served, checked_name(new)))
    return run(served, argv, timeout_s)


@default.entrypoint
def activate(section: str, name: str, timeout_s: float) -> dict[str, Any]:
    """``lvchange --activate y --ignoreactivationskip`` of an LV of the configured VG."""
    with refusing("activate"):
        served = backend.load(section)
        argv = lvm_argv.activate(served.vg, checked_name(name))
    return run(served, argv, timeout_s)


@default.entrypoint
def deactivate(section: str, name: str, timeout_s: float) -> dict[str, Any]:
    """``lvchange --activate n`` of an LV of the configured VG, never its thin pool."""
    with refusing("deactivate"):
        served = backend.load(section)
        argv = lvm_argv.deactivate(served.vg, _not_a_pool(served, checked_name(name)))
    return run(served, argv, timeout_s)


@default.entrypoint
def merge(section: str, name: str, timeout_s: float) -> dict[str, Any]:
    """``lvconvert --merge`` of a snapshot of the configured VG."""
    with refusing("merge"):
        served = backend.load(section)
        argv = lvm_argv.merge(served.vg, _not_a_pool(served, checked_name(name)))
    return run(served, argv, timeout_s)


@default.entrypoint
def add_tags(section: str, name: str, tags: list[str], timeout_s: float) -> dict[str, Any]:
    """``lvchange --addtag`` of the driver's tags on an LV of the configured VG."""
    with refusing("add tags"):
        served = backend.load(section)
        argv = lvm_argv.add_tags(served.vg, checked_name(name), _checked_tags(tags))
    return run(served, argv, timeout_s)


@default.entrypoint
def remove_tags(section: str, name: str, tags: list[str],
                timeout_s: float) -> dict[str, Any]:
    """``lvchange --deltag`` of the driver's tags on an LV of the configured VG."""
    with refusing("remove tags"):
        served = backend.load(section)
        argv = lvm_argv.remove_tags(served.vg, checked_name(name), _checked_tags(tags))
    return run(served, argv, timeout_s)


def _not_a_pool(served: backend.Backend, name: str) -> str:
    if name in served.pools:
        raise PrivilegeRefused(f"{served.vg}/{name} is the backend's thin pool")
    return name
