"""What the privileged daemon serves: the backend section of the root-owned config.

The daemon trusts only the config files privsep-helper was started with
(``--config-file``), and only when each file, and each directory above it, is
owned by root and not writable by group or others (a sticky directory such as
``/tmp`` aside). A section is served only when ``[DEFAULT] enabled_backends``
names it and its ``volume_driver`` is this driver (directly, or through the Cinder
adapter); the VG, the thin pool, ``lvm_conf_file`` and ``lvm_backend`` come from it
(Cinder's ``[backend_defaults]`` filling what the section leaves unset). The caller
gives the section's name and nothing else of this. The simulator's state file, which
the daemon then writes, meets the same rule (its directory and the file).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from oslo_config import cfg

from driver_kit.exceptions import ConfigError, InvalidName
from lvm_driver.privileged import PrivilegeRefused
from lvm_driver.run.names import validate_lv_name, validate_vg_name

__all__ = ["Backend", "load", "load_from", "trusted_path", "DRIVER_PATHS", "ADAPTER_PATHS"]

#: what ``volume_driver`` (or the adapter's ``driver_kit_driver``) names this driver as
DRIVER_PATHS: Final = frozenset({"lvm_driver.driver.ThinLVMDriver",
                                 "lvm_driver.driver:ThinLVMDriver"})
ADAPTER_PATHS: Final = frozenset({"contrib.cinder_adapter.DriverKitVolumeDriver",
                                  "contrib.cinder_adapter:DriverKitVolumeDriver"})
_SECTION_OPTS: Final = ("volume_driver", "driver_kit_driver", "volume_group",
                        "lvm_thin_pool_name", "lvm_conf_file", "lvm_backend",
                        "lvm_simulator_state_file")
_FALLBACK: Final = "backend_defaults"


@dataclass(frozen=True, slots=True)
class Backend:
    """One served backend: its VG, its thin pool(s), LVM's configuration directory
    (None: LVM's default) and whether it runs on the simulator (and its state file)."""

    section: str
    vg: str
    pools: frozenset[str]
    system_dir: str | None
    simulated: bool
    state_file: str | None

    def pool(self, name: object) -> str:
        """``name`` if it is a configured thin pool of this backend; else refused."""
        if name not in self.pools:
            raise PrivilegeRefused(f"[{self.section}]: {name!r} is not the backend's thin "
                                   f"pool ({', '.join(sorted(self.pools))})")
        return str(name)


def trusted_path(path: str, what: str, *, directory: bool = False) -> os.stat_result:
    """``path``'s stat when it and every directory above it (symlinks resolved) are
    owned by root and not writable by group or others (sticky directories aside);
    PrivilegeRefused naming ``what`` otherwise."""
    if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path:
        raise PrivilegeRefused(f"{what} {path!r} is not an absolute path")
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError as exc:
        raise PrivilegeRefused(f"{what} {path!r}: {exc.strerror}") from None
    kind_ok = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    if not kind_ok:
        raise PrivilegeRefused(f"{what} {path!r} is not a "
                               f"{'directory' if directory else 'regular file'}")
    _owned_by_root(info, path, what, sticky_ok=False)
    parent = os.path.dirname(real)
    while True:
        _owned_by_root(os.stat(parent), parent, f"directory above {what}", sticky_ok=True)
        if parent == "/":
            break
        parent = os.path.dirname(parent)
    return info


def _owned_by_root(info: os.stat_result, path: str, what: str, *, sticky_ok: bool) -> None:
    if info.st_uid != 0:
        raise PrivilegeRefused(f"{what} {path!r} is owned by uid {info.st_uid}, not root")
    writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and not (sticky_ok and info.st_mode & stat.S_ISVTX):
        raise PrivilegeRefused(f"{what} {path!r} is writable by group or others "
                               f"(mode {stat.S_IMODE(info.st_mode):o})")


def _daemon_config_files() -> list[str]:
    """The files privsep-helper was started with; config dirs are refused."""
    try:
        dirs = cfg.CONF.config_dir
    except cfg.NoSuchOptError:
        dirs = None
    if dirs:
        raise PrivilegeRefused("the privileged daemon reads --config-file only, not "
                               "--config-dir")
    try:
        return list(cfg.CONF.config_file or [])
    except cfg.NoSuchOptError:
        return []


_cache_lock = threading.Lock()
_cache: dict[tuple[Any, ...], Backend] = {}


def load(section: str) -> Backend:
    """The backend ``section`` of the daemon's config files (see the module)."""
    return load_from(_daemon_config_files(), section)


def load_from(files: Sequence[str], section: str) -> Backend:
    """The backend ``section`` of ``files``, each checked first (re-read when a file
    changed); PrivilegeRefused for anything not trusted or not served."""
    if not isinstance(section, str) or not section or section in ("DEFAULT", _FALLBACK) \
            or len(section) > 255 or any(ch in section for ch in "[]\n\r\0"):
        raise PrivilegeRefused(f"{section!r} is not a config section name")
    if not files:
        raise PrivilegeRefused("the privileged daemon was started without --config-file")
    stamps = []
    for path in files:
        info = trusted_path(path, "config file")
        stamps.append((path, info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size))
    key = (section, *stamps)
    with _cache_lock:
        found = _cache.get(key)
    if found is None:
        found = _parse(list(files), section)
        with _cache_lock:
            _cache.clear()  # one entry per section is all that is ever current
            _cache[key] = found
    if found.state_file is not None:
        _check_state_file(section, found.state_file)
    return found


def _check_state_file(section: str, path: str) -> None:
    """The simulator's state file, which the daemon writes as root, under the config
    files' rule: its directory (where its lock, PV files and temporary copies go too)
    root's alone, and so the file when it exists; checked on every request."""
    what = f"[{section}] lvm_simulator_state_file"
    if not os.path.isabs(path):
        raise PrivilegeRefused(f"{what} = {path!r} is not an absolute path")
    trusted_path(os.path.dirname(path), f"{what}'s directory", directory=True)
    if os.path.lexists(path):
        trusted_path(path, what)


def _parse(files: list[str], section: str) -> Backend:
    conf = cfg.ConfigOpts()
    conf.register_opt(cfg.ListOpt("enabled_backends", default=[]))
    for group in (section, _FALLBACK):
        conf.register_opts([cfg.StrOpt(name) for name in _SECTION_OPTS], group=group)
    try:
        conf([], project="lvm_driver_privileged", default_config_files=files,
             default_config_dirs=[])
        enabled = list(conf.enabled_backends or [])
        values = {name: _value(conf, section, name) for name in _SECTION_OPTS}
    except (cfg.Error, ValueError) as exc:
        raise PrivilegeRefused(f"cannot read the config files: {exc}") from None
    if section not in enabled:
        raise PrivilegeRefused(f"[{section}] is not one of enabled_backends "
                               f"({', '.join(enabled) or 'none'})")
    driver, wrapped = values["volume_driver"], values["driver_kit_driver"]
    ours = driver in DRIVER_PATHS or (
        driver in ADAPTER_PATHS and (wrapped is None or wrapped in DRIVER_PATHS))
    if not ours:
        raise PrivilegeRefused(f"[{section}] volume_driver = {driver!r} is not the LVM "
                               f"thin driver (set volume_driver explicitly)")
    try:
        vg = validate_vg_name(values["volume_group"] or "cinder-volumes")
        pool = validate_lv_name(values["lvm_thin_pool_name"] or f"{vg}-pool")
    except (InvalidName, ConfigError) as exc:
        raise PrivilegeRefused(f"[{section}]: {exc}") from None
    backend = values["lvm_backend"] or "real"
    if backend not in ("real", "simulator"):
        raise PrivilegeRefused(f"[{section}] lvm_backend = {backend!r} is not real or "
                               f"simulator")
    state_file = values["lvm_simulator_state_file"]
    if backend == "simulator" and not state_file:
        raise PrivilegeRefused(f"[{section}] lvm_backend = simulator needs "
                               f"lvm_simulator_state_file")
    return Backend(section=section, vg=vg, pools=frozenset({pool}),
                   system_dir=_system_dir(section, values["lvm_conf_file"]),
                   simulated=backend == "simulator",
                   state_file=state_file if backend == "simulator" else None)


def _value(conf: cfg.ConfigOpts, section: str, name: str) -> str | None:
    value = getattr(conf[section], name)
    return value if value is not None else getattr(conf[_FALLBACK], name)


def _system_dir(section: str, conf_file: str | None) -> str | None:
    """LVM_SYSTEM_DIR for ``lvm_conf_file``: its directory, when that is root's alone."""
    if not conf_file:
        return None
    if os.path.basename(conf_file) != "lvm.conf":
        raise PrivilegeRefused(f"[{section}] lvm_conf_file = {conf_file!r} is not named "
                               f"lvm.conf")
    directory = os.path.dirname(conf_file)
    trusted_path(directory, f"[{section}] lvm_conf_file's directory", directory=True)
    trusted_path(conf_file, f"[{section}] lvm_conf_file")
    return os.path.realpath(directory)
