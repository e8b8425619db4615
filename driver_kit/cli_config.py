"""Which configuration the ``driver-kit`` command reads, and how it reads a cinder.conf.

The files, first found wins: every ``--config-file``; else the one file
``$DRIVER_KIT_CONFIG`` names (it must exist); else ``/etc/driver-kit/driver-kit.conf``
when it exists; else none, and the LVM driver runs on its embedded simulator.

A backend section written for Cinder through the adapter (``volume_driver =
contrib.cinder_adapter.DriverKitVolumeDriver``) is read as the adapter reads it: the
driver is the one ``driver_kit_driver`` names (the LVM driver by default), and with no
``lock_path`` of its own the admission locks are Cinder's (``[oslo_concurrency]
lock_path``), so the command and ``cinder-volume`` take the same lock. Cinder itself is
not imported. ``[coordination] backend_url`` is read by the kit's config already.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from oslo_config import cfg

from driver_kit.exceptions import ConfigError

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
        return [environ[CONFIG_ENV]], f"${CONFIG_ENV}"
    if os.path.isfile(default_file):
        return [default_file], default_file
    return [], ""


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
        overrides: dict[str, Any] = {
            "volume_driver": value("driver_kit_driver") or ADAPTER_DEFAULT_DRIVER}
        cinder_locks = conf.oslo_concurrency.lock_path
        if not value("lock_path") and cinder_locks:
            overrides["lock_path"] = cinder_locks
        return overrides
    except (cfg.Error, ValueError) as exc:
        raise ConfigError(f"cannot read configuration: {exc}") from exc
