"""The driver's way to LVM when it runs unprivileged: the privileged daemon.

``PrivsepRunner`` is an ``LVMExecutor`` runner, so ``VolumeGroup`` and the driver
build and run exactly the argv they build as root: each argv is mapped back to its
operation (``lvm_argv.parse``) and sent to the daemon's entrypoint of that name
(``lvm_driver.privileged``), with the backend's config section name; the daemon
builds the argv again from its own configuration. Replies become the same
``CommandResult`` (so the same typed ``LVMError``) a process gives; a refusal is
``PrivilegeRefused``. ``device_sources()`` reads PV headers and the thin pool's
status through the daemon too (a refresh's reads in one round trip, ``prefetch``),
so the fast reads work unprivileged.

How the daemon starts: inside a service that set oslo.privsep's root helper
(Cinder's ``priv_context.init``), with that service's config files; standalone,
``use_helper`` sets ``<lvm_root_helper> privsep-helper --config-file <file>...``.
"""

from __future__ import annotations

import errno
import logging
import shlex
import threading
from collections.abc import Sequence
from typing import Any, Final

from driver_kit.exceptions import ConfigError, DriverKitError
from lvm_driver.commands import lvm_argv
from lvm_driver.privileged import CONFIG_SECTION, PrivilegeRefused, commands, devices
from lvm_driver.read.dm_status import ThinPoolStatus
from lvm_driver.read.report_cache import DeviceSources
from lvm_driver.run.command import CommandResult, LVMError, LVMTimeoutError

LOG = logging.getLogger(__name__)

__all__ = ["PrivsepRunner", "use_helper", "forget_helper", "helper_command"]

#: what the daemon may take beyond a command's own timeout before the call is dropped
_CALL_MARGIN_S: Final = 30.0
_READ_TIMEOUT_S: Final = 60.0


def helper_command(root_helper: str | None, config_files: Sequence[str]) -> list[str]:
    """``<root helper> privsep-helper --config-file F ...`` (the context and socket
    arguments are oslo.privsep's to add)."""
    prefix = shlex.split(root_helper) if root_helper else ["sudo"]
    command = [*prefix, "privsep-helper"]
    for path in config_files:
        command += ["--config-file", path]
    return command


def use_helper(root_helper: str | None, config_files: Sequence[str]) -> None:
    """Make the daemon start as the backend's config files say: their
    ``[lvm_driver_privileged] helper_command`` as written (oslo.privsep adds the
    context and socket; a sudoers rule can pin that exact argv), else
    ``helper_command(root_helper, config_files)``. Nothing changes when this process
    is a service that parsed its own config files (Cinder: oslo.privsep then starts
    the daemon with the root helper the service set, or that section of its files)
    or already has a helper_command. One daemon serves the process: every backend it
    runs must be in the files the first one started it with."""
    global _helper_set
    from oslo_config import cfg
    try:
        service_files = list(cfg.CONF.config_file or [])
    except cfg.NoSuchOptError:
        service_files = []
    current = cfg.CONF[CONFIG_SECTION].helper_command
    if service_files or (current and current != _helper_set):
        return
    if not config_files:
        raise ConfigError("lvm_privilege = privsep: the privileged daemon reads the "
                          "backend from its config file; load the backend from one")
    _helper_set = (_configured_helper(config_files)
                   or shlex.join(helper_command(root_helper, config_files)))
    cfg.CONF.set_override("helper_command", _helper_set, group=CONFIG_SECTION)


def _configured_helper(config_files: Sequence[str]) -> str | None:
    """``[lvm_driver_privileged] helper_command`` of ``config_files``, if set."""
    from oslo_config import cfg
    conf = cfg.ConfigOpts()
    conf.register_opt(cfg.StrOpt("helper_command"), group=CONFIG_SECTION)
    try:
        conf([], project="lvm_driver", default_config_files=list(config_files),
             default_config_dirs=[])
    except cfg.Error as exc:
        raise ConfigError(f"cannot read [{CONFIG_SECTION}] of the config files: "
                          f"{exc}") from exc
    return conf[CONFIG_SECTION].helper_command or None


def forget_helper() -> None:
    """Stop the daemon and undo ``use_helper`` (tests; a process changing backends)."""
    global _helper_set
    from oslo_config import cfg
    from lvm_driver.privileged import default
    channel = default.channel
    default.stop()  # shuts the socket's write side: the daemon sees EOF and exits
    if channel is not None:  # oslo.privsep leaves the socket itself to the GC
        channel.writer.writesock.close()
    if _helper_set is not None:
        cfg.CONF.clear_override("helper_command", group=CONFIG_SECTION)
        _helper_set = None


#: the helper command ``use_helper`` set (None: it set none)
_helper_set: str | None = None


class PrivsepRunner:
    """An ``LVMExecutor`` runner that sends each command to the privileged daemon."""

    def __init__(self, section: str, *, vg_name: str):
        self.section = section
        self.vg_name = vg_name
        #: refreshes whose batched reads failed as a whole, so were read one by one
        self.batch_failures = 0
        self._failures_lock = threading.Lock()

    def __call__(self, argv: list[str], env: dict[str, str],
                 timeout_s: float) -> CommandResult:
        """Run ``argv`` through the daemon; ``env`` is ignored (the daemon sets its own)."""
        try:
            operation, vg, kwargs = lvm_argv.parse(argv)
        except (ValueError, DriverKitError) as exc:
            raise PrivilegeRefused(f"the privileged daemon runs no such command: "
                                   f"{exc}") from None
        if vg is not None and vg != self.vg_name:
            raise PrivilegeRefused(f"`{shlex.join(argv)}` is not for volume group "
                                   f"{self.vg_name}, the backend's")
        entrypoint = getattr(devices if operation == "zero" else commands, operation)
        try:
            reply = self._call(entrypoint, argv, timeout_s, **kwargs, timeout_s=timeout_s)
        except OSError as exc:  # e.g. the wipe's device would not open
            raise LVMError(f"the privileged daemon failed running `{shlex.join(argv)}`: "
                           f"{exc}") from exc
        if reply["timed_out"]:
            raise LVMTimeoutError(argv, timeout_s)
        return CommandResult(argv, reply["exit_code"], reply["stdout"], reply["stderr"])

    def _call(self, entrypoint: Any, argv: Sequence[str], limit_s: float,
              **kwargs: Any) -> Any:
        try:
            return entrypoint(self.section, **kwargs, _wrap_timeout=limit_s + _CALL_MARGIN_S)
        except LVMError:
            raise
        except OSError:
            raise
        except Exception as exc:  # the channel: the daemon did not start, died, hung
            if type(exc).__name__ == "PrivsepTimeout":
                raise LVMTimeoutError(argv, limit_s) from exc
            raise LVMError(f"the privileged daemon failed running `{shlex.join(argv)}`: "
                           f"{type(exc).__name__}: {exc}") from exc

    def device_sources(self) -> DeviceSources:
        """PV header reads and the thin pool's status, through the daemon; a refresh's
        reads batched into one round trip (``prefetch``)."""
        return DeviceSources(read_block=self.read_block, thin_pool_status=self.thin_pool_status,
                             prefetch=self.prefetch)

    def prefetch(self, blocks: tuple[tuple[str, int, int], ...],
                 pools: tuple[tuple[str, str], ...]) -> DeviceSources:
        """Sources answering ``blocks`` and ``pools``' statuses from one round trip
        (``devices.read_refresh``), each once; any other read, or all of them when the
        batch fails (counted in ``batch_failures``, never raised), through the daemon
        one by one."""
        names = [pool for vg, pool in pools if vg == self.vg_name]
        try:
            reply = self._call(devices.read_refresh, ["read-refresh"], _READ_TIMEOUT_S,
                               blocks=[list(block) for block in blocks], pools=names)
        except (PrivilegeRefused, OSError, LVMError) as exc:
            with self._failures_lock:
                self.batch_failures += 1
                first = self.batch_failures == 1
            (LOG.warning if first else LOG.debug)(
                "batched refresh reads failed (%s): reading one by one", exc)
            return DeviceSources(read_block=self.read_block,
                                 thin_pool_status=self.thin_pool_status)
        got_blocks = dict(zip(blocks, reply["blocks"]))
        got_pools = dict(zip(names, reply["pools"]))

        def read_block(path: str, offset: int, length: int) -> tuple[int, bytes]:
            item = got_blocks.pop((path, offset, length), None)
            if item is None:
                return self.read_block(path, offset, length)
            identity, data = _value(item, path)
            return int(identity), data

        def thin_pool_status(vg_name: str, pool_name: str) -> ThinPoolStatus | None:
            item = got_pools.pop(pool_name, None) if vg_name == self.vg_name else None
            if item is None:
                return self.thin_pool_status(vg_name, pool_name)
            return devices.status_from_reply(_value(item, pool_name))

        return DeviceSources(read_block=read_block, thin_pool_status=thin_pool_status)

    def read_block(self, path: str, offset: int, length: int) -> tuple[int, bytes]:
        """``mda.BlockReader`` through the daemon; a refusal is a PermissionError (the
        read path then reads through LVM)."""
        try:
            identity, data = self._call(devices.read_pv_block, ["read", path],
                                        _READ_TIMEOUT_S, path=path, offset=offset,
                                        length=length)
        except PrivilegeRefused as exc:
            raise PermissionError(errno.EACCES, str(exc), path) from None
        return int(identity), data

    def thin_pool_status(self, vg_name: str, pool_name: str) -> ThinPoolStatus | None:
        """The pool's device-mapper status through the daemon (PermissionError when
        refused: the read path then asks LVM about the pool)."""
        if vg_name != self.vg_name:
            raise PermissionError(errno.EACCES, f"{vg_name} is not the backend's VG")
        try:
            reply = self._call(devices.thin_pool_status, ["dmstatus", pool_name],
                               _READ_TIMEOUT_S, pool=pool_name)
        except PrivilegeRefused as exc:
            raise PermissionError(errno.EACCES, str(exc)) from None
        return devices.status_from_reply(reply)


def _value(item: dict[str, Any], what: str) -> Any:
    """One answer of a batch: its value, or the error the single read would raise (a
    refusal is a PermissionError: the read path then asks LVM)."""
    if "refused" in item:
        raise PermissionError(errno.EACCES, item["refused"], what)
    if "errno" in item:
        raise OSError(item["errno"], item["message"], what)
    return item["value"]
