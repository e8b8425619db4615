"""LVM's command lines read as LVM reads them (getopt_long-like: clusters, -ay,
--opt=value, --), each command with its own option table.

The tables themselves live beside the command table in ``dispatch``, so a new
command is one row there; options recognised but not emulated are refused,
never ignored.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from lvm_driver.simulator.errors import EXIT_INVALID, Fail, parse_error


@dataclass
class Args:
    """One command line, read: each option's values by key, then the positionals."""

    command: str
    values: dict[str, list[str]] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)

    def has(self, name: str) -> bool:
        return name in self.values

    def last(self, name: str, default: str | None = None) -> str | None:
        values = self.values.get(name)
        return values[-1] if values else default

    def all(self, name: str) -> list[str]:
        return self.values.get(name, [])


def opts(*specs: str) -> dict[str, tuple[str, bool]]:
    """An option table from specs like ``"-L --size="``: one option's spellings,
    long one last (its name is the option's key in ``Args``), and a trailing
    ``=`` when it takes a value."""
    table: dict[str, tuple[str, bool]] = {}
    for spec in specs:
        spellings = spec.rstrip("=").split()
        table.update(dict.fromkeys(spellings, (spellings[-1][2:], spec.endswith("="))))
    return table


COMMON_OPTIONS = opts("-v --verbose", "-q --quiet", "-d --debug", "-y --yes", "-A --autobackup=",
                      "--config=", "--nolocking", "--noudevsync", "--readonly", "-f --force")
REPORT_OPTIONS = opts("-o --options=", "--reportformat=", "--units=", "--nosuffix",
                      "--noheadings", "--separator=", "-S --select=", "-O --sort=",
                      # a no-op where no VG is clustered, as none is here
                      "--ignoreskippedcluster")
#: Options the emulator recognises but does not emulate: refused, never ignored.
_UNSUPPORTED = {"select", "sort", "resizefs", "chunksize"}



def _value(attached: str | None, items: Sequence[str], i: int,
           missing: str) -> tuple[str, int]:
    """An option's value: the one attached to it (``--size=1G``, ``-L1G``), else the
    next item; with the index of the item after it. ``missing``: the error without."""
    if attached is not None:
        return attached, i
    if i < len(items):
        return items[i], i + 1
    raise parse_error(missing)

def _long_option(command: str, name: str, spec: dict[str, tuple[str, bool]]) -> str:
    """``name`` as getopt_long reads it: exact, else the one long option it begins
    (LVM takes ``--unit`` for ``--units``, as Cinder's LVM code spells it)."""
    if name in spec:
        return name
    found = {spec[o][0]: o for o in spec if o.startswith(name) and o.startswith("--")}
    if len(found) == 1:
        return next(iter(found.values()))
    if found:
        raise parse_error(f"{command}: option '{name}' is ambiguous")
    raise parse_error(f"{command}: unrecognized option '{name}'")


def parse_args(command: str, argv: Sequence[str],
               spec: dict[str, tuple[str, bool]]) -> Args:
    """``argv`` of ``command`` read with its option table ``spec`` (see ``opts``)."""
    args = Args(command)
    items = list(argv)
    i = 0
    only_positionals = False
    while i < len(items):
        item = items[i]
        i += 1
        if only_positionals or item == "-" or not item.startswith("-"):
            args.positionals.append(item)
            continue
        if item == "--":
            only_positionals = True
            continue
        if item.startswith("--"):
            name, eq, inline = item.partition("=")
            name = _long_option(command, name, spec)
            key, takes_value = spec[name]
            if takes_value:
                value, i = _value(inline if eq else None, items, i,
                                  f"{command}: option '{name}' requires an argument")
                args.values.setdefault(key, []).append(value)
            else:
                if eq:
                    raise parse_error(
                        f"{command}: option '{name}' doesn't allow an argument")
                args.values.setdefault(key, []).append("")
            continue
        cluster = item[1:]
        while cluster:
            letter, cluster = cluster[0], cluster[1:]
            option = "-" + letter
            if option not in spec:
                raise parse_error(f"{command}: invalid option -- '{letter}'")
            key, takes_value = spec[option]
            if takes_value:
                value, i = _value(cluster or None, items, i,
                                  f"{command}: option requires an argument -- '{letter}'")
                cluster = ""
                args.values.setdefault(key, []).append(value)
            else:
                args.values.setdefault(key, []).append("")
    for key in _UNSUPPORTED & args.values.keys():
        raise Fail(EXIT_INVALID, f"Option --{key} is not emulated by the LVM simulator.")
    return args


def yes_no(value: str | None, option: str) -> bool | None:
    if value is None:
        return None
    if value in ("y", "Y", "ay", "ey", "ly", "sy"):
        return True
    if value in ("n", "N", "an", "en", "ln", "sn"):
        return False
    raise parse_error(f"Invalid argument for --{option}: {value}")


def command_name(argv: Sequence[str]) -> str:
    """The LVM command ``argv`` runs (``lvm segtypes`` is ``segtypes``)."""
    name = os.path.basename(argv[0]) if argv else ""
    if name == "lvm" and len(argv) > 1:
        return argv[1]
    return name
