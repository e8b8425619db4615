"""The configuration files themselves: whether a path can be read, which options each
section sets (and where), and which of those no one registered.

oslo.config silently ignores an option it does not know, so a misspelled
``max_over_subscripton_ratio`` leaves the ratio at its default; this module
names each such option with the nearest known one, as ``oslo-config-validator``
does. The files are read with oslo.config's own parser, so both agree on what
a file says.
"""

from __future__ import annotations

import difflib
import os
import stat
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from oslo_config import iniparser

from driver_kit.exceptions import ConfigError

__all__ = ["SetOption", "UnknownOption", "check_config_file", "check_config_files",
           "options_set", "unknown_options"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SetOption:
    """One ``name = value`` line of a configuration file."""

    section: str
    name: str
    value: str
    path: str
    line: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownOption:
    """An option a file sets that nothing registered in its section; ``nearest`` is the
    closest known name, if one is close."""

    option: SetOption
    nearest: str | None

    def __str__(self) -> str:
        where = f"{self.option.path}:{self.option.line}"
        hint = f"; did you mean {self.nearest}?" if self.nearest else ""
        return (f"[{self.option.section}] {self.option.name} ({where}): unknown option, "
                f"ignored{hint}")


def check_config_file(path: str) -> None:
    """ConfigError saying what is wrong with ``path`` as a configuration file (missing,
    a directory, unreadable); any readable file, ``/dev/null`` included, is fine."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"config file {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"config file {path}: is a directory, not a file")
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot be read: {exc.strerror}") from None


def check_config_files(paths: Iterable[str]) -> None:
    """ConfigError saying what is wrong with the first of ``paths`` that is not a readable
    file or does not parse (its path and line, in words)."""
    paths = list(paths)
    for path in paths:
        check_config_file(path)
    options_set(paths)


class _Recorder(iniparser.BaseParser):
    """oslo.config's parser, keeping each assignment with its section and line."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.section = "DEFAULT"
        self.found: list[SetOption] = []
        self._key_line = 0

    def _split_key_value(self, line: str) -> tuple[str, list[str]]:
        self._key_line = self.lineno
        return super()._split_key_value(line)

    def new_section(self, section: str) -> None:
        self.section = section

    def assignment(self, key: str, value: list[str]) -> None:
        self.found.append(SetOption(section=self.section, name=key, value="\n".join(value),
                                    path=self.path, line=self._key_line))

    def parse_exc(self, msg: str, lineno: int, line: str | None = None) -> ConfigError:
        return ConfigError(f"config file {self.path}, line {lineno}: {msg}")


def options_set(paths: Iterable[str]) -> list[SetOption]:
    """Every assignment in ``paths``, in order (ConfigError for a file that does not
    parse)."""
    found: list[SetOption] = []
    for path in paths:
        recorder = _Recorder(path)
        try:
            with open(path, encoding="utf-8") as handle:
                recorder.parse(handle)
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path}: is not UTF-8 text") from None
        except OSError as exc:
            raise ConfigError(f"config file {path}: cannot be read: {exc.strerror}") from None
        found.extend(recorder.found)
    return found


def unknown_options(paths: Sequence[str],
                    known: Mapping[str, Iterable[str]]) -> list[UnknownOption]:
    """The options ``paths`` set in the sections of ``known`` (section -> option
    names) that are not among that section's names; other sections are not judged."""
    names = {section: sorted(set(options)) for section, options in known.items()}
    found = []
    for option in options_set(paths):
        candidates = names.get(option.section)
        if candidates is None or option.name.replace("-", "_") in candidates:
            continue
        close = difflib.get_close_matches(option.name, candidates, n=1, cutoff=0.75)
        found.append(UnknownOption(option=option, nearest=close[0] if close else None))
    return found
