"""Configuration in Cinder's style: ``[DEFAULT] enabled_backends`` names one
section per backend, and every backend section carries the kit's options.

Values are checked when a backend's configuration is loaded, before any
backend call: every option of the kit and of the driver is read once (type,
range and choices as oslo.config declares them, which the generated sample
shows; floats must be finite), and a bad one raises ``ConfigError`` naming the
section, the option, the value and what it must be (Cinder silently accepts a
ratio of 0.5; the kit refuses it).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from oslo_config import cfg

from driver_kit import capacity
from driver_kit.config_files import check_config_files, options_set
from driver_kit.coordination_url import parse_coordination_url
from driver_kit.exceptions import ConfigError, InvalidInput
from driver_kit.lock_dir import check_lock_path, default_lock_path

__all__ = ["BackendConfig", "KIT_OPTS", "DEFAULT_OPTS", "MAX_RATIO", "list_opts",
           "load_backend_config", "make_conf", "register_backend_opts", "option_rule",
           "read_option"]

#: the largest max_over_subscription_ratio accepted: far past any real pool's, and
#: every capacity figure stays exact at it
MAX_RATIO = 1000.0

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
                    f"number from 1.0 to {MAX_RATIO:,.0f}, or 'auto' to derive it from the "
                    "pool's usage as Cinder does (1 + provisioned / (used + 1); 20 while "
                    "the pool is empty)."),
    cfg.IntOpt("reserved_percentage", default=0, min=0, max=100,
               help="Percentage (0..100) of each pool's total capacity kept out of every "
                    "capacity calculation."),
    cfg.StrOpt("over_provisioning_calculation", default=capacity.DEFAULT_CALCULATION,
               choices=[("standard", "the test of Cinder's CapacityFilter"),
                        ("cinder", "stricter, as the provisioning specs read")],
               ignore_case=True,
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
                    "to a driver_kit-locks directory in the system temporary directory, "
                    "made private (0700) when missing and refused when another user owns "
                    "it, others may write to it, or it is or holds a symlink. Any "
                    "lock_path must be a directory, or one that can be made. Every "
                    "process sharing a pool must use the same path."),
    cfg.StrOpt("coordination_backend_url", secret=True,
               help="URL of a coordination service shared by every host serving this "
                    "backend. etcd3+http://host:2379?timeout=30 (or etcd3+https): "
                    "admissions commit reservations in etcd by compare-and-swap, bound "
                    "to the host's lease of 'timeout' seconds (no lock across backend "
                    "commands); redis://, zookeeper://, file:///shared/dir: a tooz lock "
                    "per backend. When unset, [coordination] backend_url is used as "
                    "Cinder does, and without either admissions are serialised per host "
                    "only. A secret: its credentials never show in messages or logs."),
    cfg.FloatOpt("capacity_warning_used_percent", default=90.0, min=0.0, max=100.0,
                 help="Send a capacity notification when a pool's used capacity exceeds "
                      "this percentage of its total (0..100)."),
    cfg.FloatOpt("capacity_warning_provisioned_percent", default=100.0, min=0.0, max=1000.0,
                 help="Send a capacity notification when provisioned capacity exceeds this "
                      "percentage of the over-subscription cap, (total - reserved) * ratio."),
    cfg.FloatOpt("stats_timeout", default=120.0, min=0.01, max=86400.0,
                 help="Seconds a backend read may take before the stats fail closed."),
]

_KIT_OPT = {opt.dest: opt for opt in KIT_OPTS}


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Options for oslo-config-generator (namespace ``driver_kit``).

    The ``backend`` section stands for every section named in enabled_backends.
    """
    return [("DEFAULT", list(DEFAULT_OPTS)), ("backend", list(KIT_OPTS))]


def make_conf(config_files: Sequence[str] = ()) -> cfg.ConfigOpts:
    """A fresh ConfigOpts loaded from ``config_files`` (no command line parsing); a
    path that is not a readable file, or does not parse, is a one-line ConfigError."""
    check_config_files(config_files)
    conf = cfg.ConfigOpts()
    conf.register_opts(DEFAULT_OPTS)
    try:
        conf([], project="driver_kit", default_config_files=list(config_files),
             default_config_dirs=[])
    except (cfg.Error, ValueError) as exc:  # ValueError: a file that is not UTF-8
        raise ConfigError(f"cannot read configuration: {exc}") from None
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


def option_rule(opt: cfg.Opt) -> str:
    """What a value of ``opt`` must be, in words (for messages)."""
    kind = opt.type
    choices = getattr(kind, "choices", None)
    if choices:
        return "one of " + ", ".join(repr(choice) for choice in choices)
    words = {int: "a whole number", float: "a finite number", bool: "true or false"}
    rule = words.get(getattr(kind, "num_type", None) or
                     (bool if isinstance(opt, cfg.BoolOpt) else None), "text")
    low, high = getattr(kind, "min", None), getattr(kind, "max", None)
    if low is not None and high is not None:
        rule += f" from {_number(low)} to {_number(high)}"
    elif low is not None:
        rule += f" >= {_number(low)}"
    elif high is not None:
        rule += f" <= {_number(high)}"
    return rule


def _number(value: float) -> str:
    """A bound for a message: digits grouped, never an exponent."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def read_option(conf: cfg.ConfigOpts, group: str, opt: cfg.Opt,
          overrides: dict[str, Any]) -> Any:
    """``opt``'s value in ``group``, checked by oslo.config and for finiteness; else a
    ConfigError saying what was set, where, and what it must be."""
    why = None
    try:
        value = getattr(conf[group], opt.dest)
        bad = isinstance(value, float) and not math.isfinite(value)
    except (cfg.ConfigFileValueError, ValueError):
        bad = True
    except cfg.Error as exc:  # a $substitution naming no option, or looping
        bad, why = True, (f"cannot be read ({exc}): a '$' starts a substitution, '$$' "
                          f"is a '$'")
    if not bad:
        return value
    if opt.dest in overrides:
        shown, where = overrides[opt.dest], ""
    else:
        shown, where = _file_value(conf, group, opt.dest)
    if opt.secret:
        shown = "****"
    raise ConfigError(f"[{group}] {opt.dest} = {shown!r}{where}: "
                      f"{why or 'must be ' + option_rule(opt)}") from None


def _file_value(conf: cfg.ConfigOpts, group: str, name: str) -> tuple[str | None, str]:
    """The text the files give ``name`` in ``group`` (the last one wins, as in
    oslo.config), and where, for a message."""
    found = [option for option in options_set(conf.config_file or ())
             if option.section == group and option.name.replace("-", "_") == name]
    if not found:
        return None, ""
    return found[-1].value, f" ({found[-1].path}:{found[-1].line})"


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
    if conf.config_file and backend not in conf.list_all_sections():
        raise ConfigError(f"backend {backend!r} is in enabled_backends but has no "
                          f"[{backend}] section in {', '.join(conf.config_file)}")
    extra_opts = list(extra_opts)
    register_backend_opts(conf, backend, extra_opts)
    overrides = dict(overrides or {})
    opt_of = {opt.dest: opt for opt in extra_opts} | _KIT_OPT
    for name, value in overrides.items():
        try:
            conf.set_override(name, value, group=backend)
        except cfg.NoSuchOptError:
            raise ConfigError(f"[{backend}] {name}: unknown option") from None
        except ValueError as exc:
            why = f"must be {option_rule(opt_of[name])}" if name in opt_of else str(exc)
            raise ConfigError(f"[{backend}] {name} = {value!r}: {why}") from None
    values = {opt.dest: read_option(conf, backend, opt, overrides) for opt in KIT_OPTS}
    for opt in extra_opts:  # the driver's own, so no bad value waits until it bites
        read_option(conf, backend, opt, overrides)

    def bad(name: str, why: str) -> ConfigError:
        where = "" if name in overrides else _file_value(conf, backend, name)[1]
        return ConfigError(f"[{backend}] {name} = {values[name]!r}{where}: {why}")

    try:
        ratio = capacity.validate_ratio(values["max_over_subscription_ratio"], allow_auto=True)
        if isinstance(ratio, float) and ratio > MAX_RATIO:
            raise InvalidInput("too large")
    except InvalidInput:
        raise bad("max_over_subscription_ratio",
                  f"must be 'auto' or a number from 1.0 to {MAX_RATIO:,.0f}") from None
    reserved = values["reserved_percentage"]
    calculation = (values["over_provisioning_calculation"] or "").strip().lower()
    for name in ("reserved_percentage", "over_provisioning_calculation",
                 "capacity_warning_used_percent", "capacity_warning_provisioned_percent",
                 "stats_timeout"):
        if values[name] is None:  # an override of None: the range says what to set
            raise bad(name, f"must be {option_rule(_KIT_OPT[name])}")
    lock_path = values["lock_path"] or default_lock_path()
    if values["lock_path"]:  # the default's own checks run when it is first used
        check_lock_path(lock_path, f"[{backend}] lock_path")
    url = values["coordination_backend_url"] or _coordination_section_url(conf)
    if url:
        try:
            parse_coordination_url(url)
        except ConfigError as exc:
            raise ConfigError(f"[{backend}] {exc}") from None
    return BackendConfig(
        backend=backend, volume_driver=values["volume_driver"],
        volume_backend_name=values["volume_backend_name"] or backend,
        max_over_subscription_ratio=ratio, reserved_percentage=int(reserved),
        over_provisioning_calculation=calculation,
        lock_path=lock_path,
        capacity_warning_used_percent=float(values["capacity_warning_used_percent"]),
        capacity_warning_provisioned_percent=float(
            values["capacity_warning_provisioned_percent"]),
        stats_timeout=float(values["stats_timeout"]),
        coordination_backend_url=url,
        options=conf[backend], config_files=tuple(conf.config_file or ()))


def _coordination_section_url(conf: cfg.ConfigOpts) -> str | None:
    """Cinder's ``[coordination] backend_url``, when the files set it."""
    try:
        conf.register_opt(cfg.StrOpt("backend_url", secret=True), group="coordination")
    except cfg.DuplicateOptError:
        pass
    return conf.coordination.backend_url or None
