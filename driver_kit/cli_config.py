"""Which configuration the ``driver-kit`` command reads, and how it reads a cinder.conf.

The files, first found wins: every ``--config-file``; else the one file
``$DRIVER_KIT_CONFIG`` names (it must exist); else ``/etc/driver-kit/driver-kit.conf``
when it exists; else none, and the LVM driver runs on its embedded simulator. A
configuration names Python classes that are imported, so as root a file found the
implicit way (the variable, the default path) must be root's and writable by root
alone: an inherited variable or a loose file never makes root run another user's code.

A backend section written for Cinder through the adapter (``volume_driver =
contrib.cinder_adapter.DriverKitVolumeDriver``) is read as the adapter reads it: the
driver is the one ``driver_kit_driver`` names (the LVM driver by default), an option
the section leaves unset takes its ``[backend_defaults]`` value (Cinder's fallback),
and with no ``lock_path`` the admission locks are Cinder's (``[oslo_concurrency]
lock_path``), so the command and ``cinder-volume`` take the same lock and admit with
the same figures. Cinder itself is not imported. ``[coordination] backend_url`` is
read by the kit's config already.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Mapping, Sequence

from oslo_config import cfg

from driver_kit.config import KIT_OPTS
from driver_kit.exceptions import ConfigError
from driver_kit.loading import driver_class

__all__ = ["ADAPTER_PATHS", "CONFIG_ENV", "DEFAULT_CONFIG_FILE", "adapter_overrides",
           "choose_config_files"]

CONFIG_ENV = "DRIVER_KIT_CONFIG"
DEFAULT_CONFIG_FILE = "/etc/driver-kit/driver-kit.conf"
#: how a cinder.conf names the adapter (named as a string: driver_kit never imports contrib)
ADAPTER_PATHS = frozenset({"contrib.cinder_adapter.DriverKitVolumeDriver",
                           "contrib.cinder_adapter:DriverKitVolumeDriver"})
#: the adapter's driver_kit_driver default
ADAPTER_DEFAULT_DRIVER = "lvm_driver.driver.ThinLVMDriver"
#: Cinder's state_path default, which its lock_path usually interpolates
CINDER_STATE_PATH = "/var/lib/cinder"


def choose_config_files(given: Sequence[str],
                        environ: Mapping[str, str] | None = None) -> tuple[list[str], str]:
    """The files to read and what chose them (``--config-file``, ``$DRIVER_KIT_CONFIG``,
    the default path; ``""`` when none, for the simulator)."""
    environ = os.environ if environ is None else environ
    default_file = DEFAULT_CONFIG_FILE
    if given:
        return list(given), "--config-file"
    if environ.get(CONFIG_ENV):
        return [_safe_for_root(environ[CONFIG_ENV], f"${CONFIG_ENV}")], f"${CONFIG_ENV}"
    if os.path.isfile(default_file):
        return [_safe_for_root(default_file, "the default path")], default_file
    return [], ""


def _safe_for_root(path: str, chosen_by: str) -> str:
    """``path``, unless this process is root and the file is another user's or others
    may write it (ConfigError saying so). A missing file is load_driver's to report."""
    if os.geteuid() != 0:
        return path
    try:
        info = os.stat(path)
    except OSError:
        return path
    if info.st_uid != 0 or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(f"config file {path!r} (from {chosen_by}) is not root's alone "
                          f"(owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}): "
                          f"as root, a file not given with --config-file must be owned by "
                          f"root and writable by root only")
    return path


def adapter_overrides(config_files: Sequence[str], backend: str | None) -> dict[str, Any]:
    """Overrides that load a section written for the Cinder adapter as the adapter does;
    empty for any other section (or when no one backend is chosen yet)."""
    if not config_files or not all(os.path.isfile(path) for path in config_files):
        return {}  # nothing to read, or load_driver says which file is missing
    conf = cfg.ConfigOpts()
    conf.register_opt(cfg.ListOpt("enabled_backends", default=[]))
    conf.register_opt(cfg.StrOpt("state_path", default=CINDER_STATE_PATH))
    conf.register_opt(cfg.StrOpt("lock_path"), group="oslo_concurrency")
    try:
        conf([], project="driver_kit", default_config_files=list(config_files),
             default_config_dirs=[])
        enabled = list(conf.enabled_backends or [])
        section = backend or (enabled[0] if len(enabled) == 1 else None)
        if section is None or section == "DEFAULT":
            return {}
        opts = [cfg.StrOpt("volume_driver"), cfg.StrOpt("driver_kit_driver"),
                cfg.StrOpt("lock_path")]
        for group in (section, "backend_defaults"):
            conf.register_opts(opts, group=group)

        def value(name: str) -> str | None:
            return conf[section][name] or conf["backend_defaults"][name]

        if value("volume_driver") not in ADAPTER_PATHS:
            return {}
        wrapped = value("driver_kit_driver") or ADAPTER_DEFAULT_DRIVER
        overrides: dict[str, Any] = {"volume_driver": wrapped}
        overrides.update(_backend_defaults(conf, section, driver_class(
            wrapped, f"[{section}] driver_kit_driver").OPTIONS))
        cinder_locks = conf.oslo_concurrency.lock_path
        if not value("lock_path") and cinder_locks:
            overrides["lock_path"] = cinder_locks
        return overrides
    except (cfg.Error, ValueError) as exc:
        raise ConfigError(f"cannot read configuration: {exc}") from exc


def _backend_defaults(conf: cfg.ConfigOpts, section: str,
                      driver_opts: Sequence[cfg.Opt]) -> dict[str, Any]:
    """The kit's and the driver's options that ``[backend_defaults]`` sets and
    ``section`` does not, with their values (typed as the options say)."""
    found = {}
    for opt in [*KIT_OPTS, *driver_opts]:
        if opt.dest in ("volume_driver", "lock_path"):
            continue  # the adapter's own reading of both, above
        for group in (section, "backend_defaults"):
            try:
                conf.register_opt(opt, group=group)
            except cfg.DuplicateOptError:
                pass
        if not _set_in(conf, section, opt.dest) and _set_in(conf, "backend_defaults", opt.dest):
            found[opt.dest] = conf["backend_defaults"][opt.dest]
    return found


def _set_in(conf: cfg.ConfigOpts, group: str, name: str) -> bool:
    """Whether the files set ``name`` in ``group`` (oslo.config knows no place for an
    unset option without a default)."""
    where = conf.get_location(name, group)
    return where is not None and where.location.is_user_controlled
