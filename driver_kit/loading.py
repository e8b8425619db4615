"""Loading drivers and their configuration by name, as every front end does it.

Drivers are named by dotted path (``volume_driver``, as in Cinder) and
configured from cinder.conf-style files. The command line, the compliance
harness and the Cinder adapter all build drivers here, so none of them needs
another front end: ``driver_kit.cli`` is the top of the house, imported by
nothing. With no file, ``default_overrides`` runs the LVM driver on its
embedded simulator.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Sequence

from driver_kit.config import load_backend_config, make_conf
from driver_kit.driver import VolumeDriver
from driver_kit.exceptions import ConfigError

__all__ = ["DEFAULT_BACKEND", "default_overrides", "driver_class", "import_object",
           "load_driver"]

#: the backend section used when no file names one
DEFAULT_BACKEND = "lvm-sim"


def default_overrides(state_file: str) -> dict[str, Any]:
    """The configuration used when no file is given: LVM driver on the simulator."""
    return {"volume_driver": "lvm_driver.driver.ThinLVMDriver", "lvm_backend": "simulator",
            "lvm_simulator_state_file": state_file, "volume_group": "dkvg",
            "lvm_thin_pool_name": "pool", "lvm_offer_thick": True,
            "lock_path": os.path.join(os.path.dirname(state_file), "locks")}


def import_object(path: str, what: str = "driver") -> Any:
    """The object a ``module:Name`` (or ``module.Name``) path names, or ConfigError."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"{what} path {path!r} must be module.Name or module:Name")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, SyntaxError, or whatever the module raised
        raise ConfigError(f"cannot import {module_name!r} for {what} {path!r}: "
                          f"{type(exc).__name__}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"module {module_name!r} has no {attr!r} ({what} {path!r})") from None


def driver_class(path: str, what: str = "driver") -> type[VolumeDriver]:
    """The ``VolumeDriver`` subclass a ``module:Class`` (or ``module.Class``) path names.

    Raises ConfigError saying why when the module does not import (whatever it
    raises), has no such name, or the name is not a ``VolumeDriver`` subclass.
    ``what`` names the setting in the message.
    """
    cls = import_object(path, what)
    if not (isinstance(cls, type) and issubclass(cls, VolumeDriver)):
        raise ConfigError(f"{what} {path!r} is not a driver_kit.VolumeDriver subclass")
    return cls


def load_driver(config_files: Sequence[str] = (), backend: str | None = None, *,
                driver_path: str | None = None,
                overrides: dict[str, Any] | None = None) -> VolumeDriver:
    """Build (without I/O) the driver a backend section names."""
    conf = make_conf(config_files)
    if backend is None:
        enabled = list(conf.enabled_backends or [])
        if config_files and not enabled:
            raise ConfigError(f"no backend to use: {', '.join(config_files)} enable none "
                              f"(set [DEFAULT] enabled_backends, or choose a section with "
                              f"--backend)")
        if len(enabled) > 1:
            raise ConfigError(f"several backends are enabled ({', '.join(enabled)}): "
                              f"choose one with --backend")
        backend = enabled[0] if enabled else DEFAULT_BACKEND
    overrides = dict(overrides or {})
    if driver_path:
        overrides["volume_driver"] = driver_path
    path = overrides.get("volume_driver")
    if path is None:
        path = load_backend_config(conf, backend).volume_driver
    cls = driver_class(path)
    config = load_backend_config(conf, backend, extra_opts=cls.OPTIONS, overrides=overrides)
    return cls(config)
