"""The options ``driver-kit check`` and the pytest plugin share, defined once.

Each front end adds them under its own flag (the plugin's carry a
``--driver-kit-`` prefix, as pytest's option namespace is shared), with the same
metavar, type, default and help, and builds its ``Runner`` with ``build_runner``
from the values, keyed by ``Option.key``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from driver_kit.compliance.cinder_front import prepare_cinder
from driver_kit.exceptions import ConfigError
from driver_kit.compliance.runner import DriverSpec, Runner

__all__ = ["OPTIONS", "Option", "add_options", "build_runner"]

FrontEnd = Literal["command", "pytest"]


@dataclass(frozen=True, slots=True)
class Option:
    """One shared option: its key, its flag in each front end, and its definition."""

    key: str
    flag: str
    pytest_flag: str
    #: keyword arguments of argparse's ``add_argument`` and pytest's ``addoption``
    kwargs: Mapping[str, Any]
    #: what differs between the front ends (added to ``kwargs``)
    command_kwargs: Mapping[str, Any] = field(default_factory=dict)
    pytest_kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pytest_dest(self) -> str:
        """The plugin's name for the value (``config.getoption``)."""
        return self.pytest_flag.lstrip("-").replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option("driver", "--driver", "--driver-kit-driver", {
        "metavar": "MODULE:CLASS",
        "help": "the VolumeDriver subclass to check (default: the backend's volume_driver)"}),
    Option("config_files", "--config-file", "--driver-kit-config", {
        "metavar": "FILE", "action": "append", "default": [],
        "help": "cinder.conf-style file with the backend section (repeatable)"}),
    Option("backend", "--backend", "--driver-kit-backend", {
        "metavar": "NAME", "help": "backend section (default: the one in enabled_backends)"}),
    Option("cinder_driver", "--cinder-driver", "--driver-kit-cinder-driver", {
        "metavar": "DOTTED.CLASS",
        "help": "an existing Cinder volume driver class to check through Cinder's driver "
                "interface (with --cinder-config and --backend)"}),
    Option("cinder_config", "--cinder-config", "--driver-kit-cinder-config", {
        "metavar": "FILE", "action": "append", "default": [],
        "help": "the cinder.conf of --cinder-driver (repeatable)"}),
    Option("hooks", "--hooks", "--driver-kit-hooks", {
        "metavar": "MODULE:ATTR",
        "help": "ComplianceHooks (or a callable returning them); default: the driver "
                "module's COMPLIANCE_HOOKS"}),
    Option("only", "--only", "--driver-kit-only", {
        "metavar": "ID", "default": [],
        "help": "run only the checks matching ID, a check id or shell pattern "
                "('stats.*'); repeatable"},
           # the command takes several ids after one --only; in pytest, one id per
           # option, so that the test paths after it are not taken for ids
           command_kwargs={"nargs": "+", "action": "extend"},
           pytest_kwargs={"action": "append"}),
    Option("timeout", "--timeout", "--driver-kit-timeout", {
        "metavar": "S", "type": float, "default": 60.0,
        "help": "seconds each check may take before it is abandoned (60)"}),
    Option("scale", "--scale", "--driver-kit-scale", {
        "metavar": "N", "type": int, "default": 64,
        "help": "volumes the tour makes in a pool when it has room (64: more than 60 "
                "shows a listing read only to its first page of 50)"}),
)


def add_options(add: Callable[..., Any], front_end: FrontEnd) -> None:
    """Add every shared option with ``add`` (``add_argument`` or ``addoption``)."""
    for option in OPTIONS:
        if front_end == "command":
            add(option.flag, dest=option.key, **option.kwargs, **option.command_kwargs)
        else:
            add(option.pytest_flag, dest=option.pytest_dest, **option.kwargs,
                **option.pytest_kwargs)


def build_runner(values: Mapping[str, Any], *,
                 overrides: Mapping[str, Any] | None = None) -> Runner:
    """The Runner the option ``values`` (by ``Option.key``) describe.

    Raises ``ValueError`` saying what is wrong with them (an unknown check id, a
    timeout that is not positive, a scale below 1); each front end reports it as a
    usage error.
    """
    if values.get("cinder_config") and not values.get("cinder_driver"):
        raise ValueError("--cinder-config goes with --cinder-driver")
    if values.get("cinder_driver"):
        if values["driver"] or values["config_files"]:
            raise ValueError("--cinder-driver takes --cinder-config, not --driver or "
                             "--config-file")
        if not values.get("cinder_config"):
            raise ValueError("--cinder-driver needs its cinder.conf (--cinder-config)")
        try:
            prepare_cinder(values["cinder_config"])
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        except Exception as exc:  # Cinder's own: a bad option value, a database error
            raise ValueError(f"cannot set Cinder up: {type(exc).__name__}: {exc}") from None
        spec = DriverSpec(cinder_driver=values["cinder_driver"],
                          config_files=tuple(values["cinder_config"]),
                          backend=values["backend"])
    else:
        spec = DriverSpec(driver=values["driver"],
                          config_files=tuple(values["config_files"]),
                          backend=values["backend"], overrides=dict(overrides or {}))
    return Runner(spec=spec, hooks_path=values["hooks"], only=values["only"],
                  timeout_s=values["timeout"], scale=values["scale"])
