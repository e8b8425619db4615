"""Configuration in Cinder's style: ``[DEFAULT] enabled_backends`` names one
section per backend, and every backend section carries the kit's options.

Values are checked when a backend's configuration is loaded, and a bad one
raises ``ConfigError`` naming the section, the option and the value (Cinder
silently accepts a ratio of 0.5; the kit refuses it).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from oslo_config import cfg

from driver_kit import capacity
from driver_kit.exceptions import ConfigError, InvalidInput

__all__ = ["BackendConfig", "KIT_OPTS", "DEFAULT_OPTS", "list_opts", "load_backend_config",
           "make_conf", "register_backend_opts"]

DEFAULT_OPTS = [
    cfg.ListOpt("enabled_backends", default=[],
                help="Backend sections to load, one per driver instance, as in cinder.conf."),
]

KIT_OPTS = [
    cfg.StrOpt("volume_driver", default="lvm_driver.driver.ThinLVMDriver",
               help="Dotted path of the VolumeDriver class serving this backend "
                    "(module.Class or module:Class)."),
    cfg.StrOpt("volume_backend_name",
               help="Name the backend reports as volume_backend_name; defaults to the "
                    "section name."),
    cfg.StrOpt("max_over_subscription_ratio", default="20.0",
               help="Ratio of provisioned to usable capacity a thin pool may reach: a "
                    "number >= 1.0, or 'auto' to derive it from the pool's usage as Cinder "
                    "does (1 + provisioned / (used + 1); 20 while the pool is empty)."),
    cfg.IntOpt("reserved_percentage", default=0,
               help="Percentage (0..100) of each pool's total capacity kept out of every "
                    "capacity calculation."),
    cfg.StrOpt("over_provisioning_calculation", default=capacity.DEFAULT_CALCULATION,
               help="How creates, extends, snapshots and clones are admitted. "
                    "'standard' (default): exactly the test Cinder's CapacityFilter "
                    "applies, so the driver takes every request the scheduler sends: thin, "
                    "provisioned + size <= (total - reserved) * ratio; thick, "
                    "size <= min(free, total - reserved - provisioned). "
                    "'cinder': stricter, as the provisioning specs read: thin also needs "
                    "size <= (free - reserved) * ratio, thick size <= free - reserved. "
                    "Cinder's default filters do not check these, so the scheduler can "
                    "pick a pool the driver then refuses (the request is rescheduled, or "
                    "ends in error); add DriverFilter to scheduler_default_filters with "
                    f"filter_function = \"{capacity.CINDER_CALCULATION_FILTER_FUNCTION}\" "
                    "in the backend section so it agrees on creates and snapshots (an "
                    "extend's filter sees the volume's size, not the growth)."),
    cfg.StrOpt("lock_path",
               help="Directory for the per-pool inter-process admission locks; defaults "
                    "to a driver_kit-locks directory in the system temporary directory. "
                    "Every process sharing a pool must use the same path."),
    cfg.StrOpt("coordination_backend_url",
               help="tooz URL of a coordination service shared by every host serving "
                    "this backend (etcd3+http://host:2379, redis://host:6379, "
                    "zookeeper://host:2181, file:///shared/dir). When set, admissions "
                    "are serialised across hosts by a lock there instead of the local "
                    "file lock; when unset, [coordination] backend_url is used as Cinder "
                    "does, and without either admissions are serialised per host only."),
    cfg.FloatOpt("capacity_warning_used_percent", default=90.0,
                 help="Send a capacity notification when a pool's used capacity exceeds "
                      "this percentage of its total (0..100)."),
    cfg.FloatOpt("capacity_warning_provisioned_percent", default=100.0,
                 help="Send a capacity notification when provisioned capacity exceeds this "
                      "percentage of the over-subscription cap, (total - reserved) * ratio."),
    cfg.FloatOpt("stats_timeout", default=120.0,
                 help="Seconds a backend read may take before the stats fail closed."),
]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Options for oslo-config-generator (namespace ``driver_kit``).

    The ``backend`` section stands for every section named in enabled_backends.
    """
    return [("DEFAULT", list(DEFAULT_OPTS)), ("backend", list(KIT_OPTS))]


def make_conf(config_files: Sequence[str] = ()) -> cfg.ConfigOpts:
    """A fresh ConfigOpts loaded from ``config_files`` (no command line parsing)."""
    for path in config_files:
        if not os.path.isfile(path):
            raise ConfigError(f"config file {path!r} does not exist")
    conf = cfg.ConfigOpts()
    conf.register_opts(DEFAULT_OPTS)
    try:
        conf([], project="driver_kit", default_config_files=list(config_files),
             default_config_dirs=[])
    except cfg.Error as exc:
        raise ConfigError(f"cannot read configuration: {exc}") from exc
    return conf


def register_backend_opts(conf: cfg.ConfigOpts, group: str,
                          extra_opts: Iterable[cfg.Opt] = ()) -> None:
    """Register the kit's options (and a driver's own) in one backend section."""
    for opt in list(KIT_OPTS) + list(extra_opts):
        try:
            conf.register_opt(opt, group=group)
        except cfg.DuplicateOptError:
            pass


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendConfig:
    """One backend's validated settings, plus the raw group for driver options."""

    backend: str
    volume_driver: str
    volume_backend_name: str
    max_over_subscription_ratio: float | str
    reserved_percentage: int
    over_provisioning_calculation: str
    lock_path: str
    capacity_warning_used_percent: float
    capacity_warning_provisioned_percent: float
    stats_timeout: float
    coordination_backend_url: str | None = None
    options: Any = None
    #: the files the section was read from (none: overrides only, as in Cinder)
    config_files: tuple[str, ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        """A driver-specific option of this backend's section (``default`` if unset).

        A value oslo.config refuses (out of range, not a number) is a ConfigError
        naming the section and option.
        """
        if self.options is None:
            return default
        try:
            value = getattr(self.options, name)
        except (cfg.NoSuchOptError, AttributeError):
            return default
        except (cfg.ConfigFileValueError, ValueError) as exc:
            raise ConfigError(f"[{self.backend}] {name}: {exc}") from exc
        return default if value is None else value


def _read(conf: cfg.ConfigOpts, group: str, name: str) -> Any:
    try:
        return getattr(conf[group], name)
    except (cfg.ConfigFileValueError, ValueError) as exc:
        raise ConfigError(f"[{group}] {name}: {exc}") from exc


def load_backend_config(conf: cfg.ConfigOpts | None = None, backend: str = "default",
                        *, extra_opts: Iterable[cfg.Opt] = (),
                        overrides: dict[str, Any] | None = None) -> BackendConfig:
    """Validate and return one backend section; ``overrides`` win over the file.

    A ``backend`` that is neither in ``enabled_backends`` nor present as a
    section in the files is refused.
    """
    if conf is None:
        conf = make_conf()
    if not isinstance(backend, str) or not backend or backend == "DEFAULT":
        raise ConfigError(f"backend must name a config section, got {backend!r}")
    enabled = list(conf.enabled_backends or [])
    known = set(enabled) | set(conf.list_all_sections())
    if (enabled or conf.config_file) and backend not in known:
        raise ConfigError(f"unknown backend {backend!r}: enabled_backends is "
                          f"{', '.join(enabled) or 'empty'}")
    register_backend_opts(conf, backend, extra_opts)
    for name, value in (overrides or {}).items():
        try:
            conf.set_override(name, value, group=backend)
        except (cfg.NoSuchOptError, ValueError) as exc:
            raise ConfigError(f"[{backend}] {name} = {value!r}: {exc}") from exc
    values = {opt.dest: _read(conf, backend, opt.dest) for opt in KIT_OPTS}

    def bad(name: str, why: str) -> ConfigError:
        return ConfigError(f"[{backend}] {name} = {values[name]!r}: {why}")

    try:
        ratio = capacity.validate_ratio(values["max_over_subscription_ratio"], allow_auto=True)
    except InvalidInput:
        raise bad("max_over_subscription_ratio", "must be 'auto' or a number >= 1.0") from None
    reserved = values["reserved_percentage"]
    if reserved is None or not 0 <= reserved <= 100:
        raise bad("reserved_percentage", "must be an integer within 0..100")
    calculation = (values["over_provisioning_calculation"] or "").strip().lower()
    if calculation not in capacity.CALCULATIONS:
        raise bad("over_provisioning_calculation", "must be 'standard' or 'cinder'")
    for name in ("capacity_warning_used_percent", "capacity_warning_provisioned_percent"):
        if values[name] is None or not 0 <= values[name] <= 1000:
            raise bad(name, "must be a percentage >= 0")
    if values["stats_timeout"] is None or values["stats_timeout"] <= 0:
        raise bad("stats_timeout", "must be a positive number of seconds")
    return BackendConfig(
        backend=backend, volume_driver=values["volume_driver"],
        volume_backend_name=values["volume_backend_name"] or backend,
        max_over_subscription_ratio=ratio, reserved_percentage=int(reserved),
        over_provisioning_calculation=calculation,
        lock_path=values["lock_path"] or os.path.join(tempfile.gettempdir(),
                                                      "driver_kit-locks"),
        capacity_warning_used_percent=float(values["capacity_warning_used_percent"]),
        capacity_warning_provisioned_percent=float(
            values["capacity_warning_provisioned_percent"]),
        stats_timeout=float(values["stats_timeout"]),
        coordination_backend_url=(values["coordination_backend_url"]
                                  or _coordination_section_url(conf)),
        options=conf[backend], config_files=tuple(conf.config_file or ()))


def _coordination_section_url(conf: cfg.ConfigOpts) -> str | None:
    """Cinder's ``[coordination] backend_url``, when the files set it."""
    try:
        conf.register_opt(cfg.StrOpt("backend_url"), group="coordination")
    except cfg.DuplicateOptError:
        pass
    return _read(conf, "coordination", "backend_url") or None
