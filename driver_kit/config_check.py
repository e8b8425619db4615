"""``driver-kit check-config``: every problem of a configuration, found before any
backend is touched, one line each.

It reads the files as every command does, then judges ``[DEFAULT]`` and each
enabled backend's section: unknown options (with the nearest known name), each
value (type, range, choices) and the driver it names, built without I/O. The
other commands report the unknown options of the section they use as warnings;
inside Cinder the adapter logs them.
"""

from __future__ import annotations

import sys
from typing import Iterable, Sequence

from oslo_config import cfg

from driver_kit.config import (DEFAULT_OPTS, KIT_OPTS, load_backend_config, make_conf,
                               register_backend_opts)
from driver_kit.config_files import UnknownOption, unknown_options
from driver_kit.exceptions import ConfigError, DriverKitError
from driver_kit.loading import driver_class

__all__ = ["check_configuration", "option_names", "report_configuration",
           "unknown_in_backend"]


def option_names(opts: Iterable[cfg.Opt]) -> set[str]:
    """The names a file may use for ``opts``: each one's own and its deprecated ones."""
    names = set()
    for opt in opts:
        names.add(opt.dest)
        names.update(old.name.replace("-", "_") for old in opt.deprecated_opts
                     if old.name and old.group in (None, "DEFAULT"))
    return names


def unknown_in_backend(config_files: Sequence[str], backend: str,
                       driver_opts: Iterable[cfg.Opt]) -> list[UnknownOption]:
    """Options ``[DEFAULT]`` or ``[backend]`` set that neither the kit nor the driver
    (``driver_opts``) defines."""
    return unknown_options(config_files, {
        "DEFAULT": option_names(DEFAULT_OPTS),
        backend: option_names([*KIT_OPTS, *driver_opts])})


def check_configuration(config_files: Sequence[str],
                        backends: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """(problems, backends checked): every problem of ``config_files`` as one line,
    judging ``backends`` (default: every enabled one)."""
    conf = make_conf(config_files)  # a path or file that cannot be read: ConfigError
    enabled = list(conf.enabled_backends or [])
    chosen = list(backends) if backends else enabled
    problems: list[str] = []
    if not chosen:
        problems.append("no backend to check: [DEFAULT] enabled_backends is empty")
    known = {"DEFAULT": option_names(DEFAULT_OPTS)}
    for backend in chosen:
        try:
            register_backend_opts(conf, backend)
            path = conf[backend].volume_driver
            cls = driver_class(path, f"[{backend}] volume_driver")
        except DriverKitError as exc:  # its options cannot be judged without it
            problems.append(str(exc))
            continue
        known[backend] = option_names([*KIT_OPTS, *cls.OPTIONS])
        try:
            cls(load_backend_config(conf, backend, extra_opts=cls.OPTIONS))
        except DriverKitError as exc:
            problems.append(str(exc))
        except Exception as exc:  # noqa: BLE001  (a vendor driver's own refusal)
            problems.append(f"[{backend}] {path} refused its configuration: "
                            f"{type(exc).__name__}: {exc}")
    problems.extend(str(unknown) for unknown in unknown_options(config_files, known))
    return problems, chosen


def report_configuration(config_files: Sequence[str], backend: str | None) -> int:
    """``driver-kit check-config``: every problem of ``config_files`` on stderr, one a
    line, and exit code 2; else one line saying what was checked, and 0."""
    if not config_files:
        raise ConfigError("check-config needs --config-file (with none, the embedded "
                          "simulator's built-in configuration is used, and it is valid)")
    problems, backends = check_configuration(config_files, [backend] if backend else None)
    for problem in problems:
        print(f"config error: {problem}", file=sys.stderr)
    if problems:
        return 2
    print(f"configuration OK: {', '.join(config_files)} (backends: {', '.join(backends)})")
    return 0
