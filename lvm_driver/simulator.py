"""An LVM command-line emulator: argv in, LVM's output and exit codes out.

It plugs into ``LVMExecutor`` as its runner, so everything above the runner
(environment, retries, error typing, parsing) runs exactly as on a real host.
It emulates the commands the wrapper issues (lvs, vgs, lvcreate in its thin
pool / thin / linear / thin snapshot forms, lvextend, lvremove, lvrename,
lvchange, ``lvm segtypes``, ``lvm version``) plus pvcreate and vgcreate to set
up a VG, with LVM 2.03's messages, exit codes (5 failed, 3 bad command line)
and rules: unique names, whole extents, thin pools with metadata and a
metadata spare, thin snapshots sharing their origin's data, over-provisioning
allowed with LVM's warnings, linear LVs and pools limited by VG free space.

State lives in memory or in a JSON file shared by processes; each command
holds an exclusive ``fcntl`` lock on ``<state file>.lock`` for its whole run,
as LVM holds its VG lock. Faults (exit codes, hangs, slow commands, malformed
output, a crash after the change was applied) are stored in the state too, so
every process sharing the file sees them; I/O errors on the state file itself
are kept beside it. A state file that cannot be read, written or understood
fails the command as LVM fails on unreadable metadata (exit code 5, one line
naming the file) and is never overwritten.

Operators can act on the same state from a shell::

    python -m lvm_driver.simulator --state /tmp/lvm.json sim-create-vg vg0 10G
    python -m lvm_driver.simulator --state /tmp/lvm.json lvcreate -V 1G -T vg0/pool -n mine
    python -m lvm_driver.simulator --state /tmp/lvm.json sim-write vg0/mine 100M
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import secrets
import string
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from driver_kit.exceptions import BackendError
from lvm_driver.executor import CommandResult, LVMExecutor, LVMTimeoutError

__all__ = ["LVMSimulator", "SimulatorError", "StateFileError", "main"]

KiB: Final = 1024
MiB: Final = 1024 ** 2
GiB: Final = 1024 ** 3
SECTOR: Final = 512
DEFAULT_EXTENT_SIZE: Final = 4 * MiB
#: LVM refuses a size argument of 16 EiB or more, and an LV of more extents than
#: a 32-bit count holds (lib/metadata: MAX_EXTENT_COUNT).
SIZE_ARG_LIMIT_BYTES: Final = 2 ** 64
MAX_EXTENT_COUNT: Final = 2 ** 32 - 1
#: pvcreate keeps the first MiB of a device for labels and metadata.
PV_METADATA_BYTES: Final = 1 * MiB
THIN_CHUNK_BYTES: Final = 64 * KiB
THIN_MIN_METADATA_BYTES: Final = 2 * MiB
THIN_MAX_METADATA_BYTES: Final = 17_045_913_600  # 15.875 GiB, dm-thin's limit / 2
#: Pool metadata model, fitted to LVM 2.03.16 on kernel 6.1 (exact on the
#: captured cases): metadata is counted in 4 KiB blocks: a fixed part, one
#: space-map bitmap block per 16,320 data chunks and per 16,320 metadata
#: blocks, and per mapping tree one block per 252 mappings (plus index
#: blocks). A thin snapshot shares its origin's tree until either is written.
MD_BLOCK_BYTES: Final = 4 * KiB
MD_FIXED_BLOCKS: Final = 109
MD_BITMAP_ENTRIES: Final = 16_320
MD_BTREE_ENTRIES: Final = 252
STATE_VERSION: Final = 1
LVM_VERSION_TEXT: Final = (
    "  LVM version:     2.03.16(2) (2022-05-18)\n"
    "  Library version: 1.02.185 (2022-05-18)\n"
    "  Driver version:  4.47.0\n"
    "  Configuration:   emulated by lvm_driver.simulator\n")
SEGTYPES: Final = (
    "linear", "striped", "zero", "error", "snapshot", "mirror", "raid0",
    "raid0_meta", "raid1", "raid10", "raid10_near", "raid4", "raid5",
    "raid5_n", "raid5_la", "raid5_ls", "raid5_ra", "raid5_rs", "raid6",
    "raid6_n_6", "raid6_nc", "raid6_nr", "raid6_zr", "raid6_ls_6",
    "raid6_rs_6", "raid6_la_6", "raid6_ra_6", "thin-pool", "thin",
    "cache-pool", "cache", "vdo", "vdo-pool", "writecache", "integrity")

EXIT_OK: Final = 0
EXIT_NO_SUCH_CMD: Final = 2
EXIT_INVALID: Final = 3
EXIT_FAILED: Final = 5


class SimulatorError(BackendError):
    """The simulator was misused (bad helper argument) or cannot use its state file."""


class StateFileError(SimulatorError):
    """The state file cannot be locked, read or written, or holds no simulator state.

    A command meeting it fails as LVM does when it cannot read or write its
    metadata: exit code 5, one line naming the file, nothing changed.
    """


class _Fail(Exception):
    """Ends a command with LVM's exit code and error lines."""

    def __init__(self, exit_code: int, *lines: str):
        super().__init__(lines)
        self.exit_code = exit_code
        self.lines = lines


def _invalid(command: str, *lines: str) -> _Fail:
    return _Fail(EXIT_INVALID, *lines, f"Run `{command} --help' for more information.")


def _parse_error(*lines: str) -> _Fail:
    return _Fail(EXIT_INVALID, *lines, "Error during parsing of command line.")


# ---------------------------------------------------------------------------
# Display helpers (LVM's libdm formats)

_UNITS = "EPTGMK"


def _human(size_bytes: int) -> str:
    """LVM's default ``r`` units: 2 decimals, '<' when rounded up."""
    if size_bytes == 0:
        return "0 "
    byte = 1024 ** 6
    index = 0
    while index < 6 and size_bytes < byte:
        byte //= 1024
        index += 1
    if index == 6:
        return f"{size_bytes} B"
    hundredths = 100 * size_bytes / byte
    prefix = "<" if math.floor(hundredths) != round(hundredths) else ""
    return f"{prefix}{size_bytes / byte:.2f} {_UNITS[index]}iB"


def _percent_text(used: int, total: int) -> str:
    """A percentage as LVM prints it: never 0.00 or 100.00 unless exact."""
    if total <= 0:
        return "100.00"
    percent = 100.0 * used / total
    if 0 < percent < 0.01:
        percent = 0.01
    elif 99.99 < percent < 100:
        percent = 99.99
    return f"{percent:.2f}"


def _format_size(size_bytes: int, units: str, suffix: bool) -> str:
    """A size field in ``--units`` (b, s, k..e binary, K..E decimal, h/r human)."""
    if units in ("h", "H", "r", "R"):
        text = _human(size_bytes).replace(" ", "")
        return text[:-2].lower() if text[-2:] == "iB" else text[:-1]
    if units in ("b", "B"):
        return f"{size_bytes}{'B' if suffix else ''}"
    if units in ("s", "S"):
        return f"{size_bytes // SECTOR}{'S' if suffix else ''}"
    power = "kmgtpe".index(units.lower()) + 1
    base = 1024 if units.islower() else 1000
    value = size_bytes / base ** power
    return f"{value:.2f}{units if suffix else ''}"


def _lvm_uuid() -> str:
    alphabet = string.ascii_letters + string.digits
    raw = "".join(secrets.choice(alphabet) for _ in range(32))
    groups = (6, 4, 4, 4, 4, 4, 6)
    parts, start = [], 0
    for length in groups:
        parts.append(raw[start:start + length])
        start += length
    return "-".join(parts)


# ---------------------------------------------------------------------------
# Name and size rules, written from lvm(8) and LVM's lvm-string.c (kept apart
# from lvm.py on purpose: the emulator checks the wrapper, not itself).

_NAME_CHARS = re.compile(r"[A-Za-z0-9+_.-]+")
_TAG_CHARS = re.compile(r"[A-Za-z0-9_+.\-/=!:&#]+")
_RESERVED_PREFIXES = ("pvmove", "snapshot")
_RESERVED_PARTS = ("_cdata", "_cmeta", "_corig", "_cpool", "_cvol", "_wcorig",
                   "_mimage", "_mlog", "_rimage", "_rmeta", "_tdata", "_tmeta",
                   "_vdata", "_imeta", "_iorig", "_pmspare", "_vorigin")


def _valid_name(name: str) -> bool:
    return (bool(name) and not name.startswith("-") and name not in (".", "..")
            and bool(_NAME_CHARS.fullmatch(name)) and len(name) <= 127)


def _check_new_lv_name(name: str, command: str, *, rename: bool = False) -> None:
    if not _valid_name(name):
        if rename:
            raise _Fail(EXIT_INVALID, f'New logical volume name "{name}" is invalid')
        raise _invalid(command, f'Logical volume name "{name}" is invalid.')
    for prefix in _RESERVED_PREFIXES:
        if name.startswith(prefix):
            raise _invalid(command, f'Names starting "{prefix}" are reserved. '
                                    "Please choose a different LV name.")
    for part in _RESERVED_PARTS:
        if part in name:
            raise _invalid(command, f'Names including "{part}" are reserved. '
                                    "Please choose a different LV name.")


_SIZE_RE = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)([bBsSkKmMgGtTpPeE]?)")
_UNIT_FACTORS = {"b": 1, "s": SECTOR, "k": KiB, "m": MiB, "g": GiB,
                 "t": 1024 ** 4, "p": 1024 ** 5, "e": 1024 ** 6}


def _parse_size(text: str, option: str) -> tuple[str, int]:
    """LVM's Size[UNIT] argument (default MiB) -> (sign, bytes in whole sectors)."""
    match = _SIZE_RE.fullmatch(text)
    if not match:
        raise _parse_error(f"Invalid argument for {option}: {text}")
    sign, number, unit = match.groups()
    if sign == "-":
        raise _parse_error("Size may not be negative.", f"Invalid argument for {option}: {text}")
    factor = _UNIT_FACTORS[(unit or "m").lower()]
    if float(number) * factor >= SIZE_ARG_LIMIT_BYTES:  # LVM compares as a double too
        raise _parse_error("Size is too big (>=16EiB).", f"Invalid argument for {option}: {text}")
    if factor == 1:
        if "." in number:
            raise _parse_error(f"Invalid argument for {option}: {text}")
        value = int(number)
        if value % SECTOR:
            low = value // SECTOR * SECTOR
            raise _parse_error(
                f"Size is not a multiple of 512. Try using {low} or {low + SECTOR}.",
                f"Invalid argument for {option}: {text}")
        return sign, value
    exact = float(number) * factor
    return sign, math.ceil(exact / SECTOR) * SECTOR


# ---------------------------------------------------------------------------
# Option parsing (getopt_long-like: clusters, -ay, --opt=value, --)


@dataclass
class _Args:
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


def _opts(*specs: str) -> dict[str, tuple[str, bool]]:
    """An option table from specs like ``"-L --size="``: one option's spellings,
    long one last (its name is the option's key in ``_Args``), and a trailing
    ``=`` when it takes a value."""
    table: dict[str, tuple[str, bool]] = {}
    for spec in specs:
        spellings = spec.rstrip("=").split()
        table.update(dict.fromkeys(spellings, (spellings[-1][2:], spec.endswith("="))))
    return table


_COMMON = _opts("-v --verbose", "-q --quiet", "-d --debug", "-y --yes", "-A --autobackup=",
                "--config=", "--nolocking", "--noudevsync", "--readonly", "-f --force")
_REPORT = _opts("-o --options=", "--reportformat=", "--units=", "--nosuffix",
                "--noheadings", "--separator=", "-S --select=", "-O --sort=")
_SPECS: dict[str, dict[str, tuple[str, bool]]] = {
    "lvs": {**_COMMON, **_REPORT, **_opts("-a --all")},
    "vgs": {**_COMMON, **_REPORT},
    "lvcreate": {**_COMMON, **_opts(
        "-L --size=", "-l --extents=", "-V --virtualsize=", "-n --name=", "-T --thin",
        "--thinpool=", "--type=", "-s --snapshot", "-k --setactivationskip=",
        "-K --ignoreactivationskip", "-a --activate=", "--addtag=", "-Z --zero=",
        "-W --wipesignatures=", "--poolmetadatasize=", "-c --chunksize=",
        "--poolmetadataspare=")},
    "lvextend": {**_COMMON, **_opts("-L --size=", "-l --extents=", "-r --resizefs")},
    "lvremove": dict(_COMMON),
    "lvconvert": {**_COMMON, **_opts("--merge")},
    "lvrename": dict(_COMMON),
    "lvchange": {**_COMMON, **_opts(
        "-a --activate=", "-K --ignoreactivationskip", "-k --setactivationskip=",
        "--addtag=", "--deltag=")},
    "pvcreate": {**_COMMON, **_opts("--setphysicalvolumesize=")},
    "vgcreate": {**_COMMON, **_opts("-s --physicalextentsize=")},
}
#: Options the emulator recognises but does not emulate: refused, never ignored.
_UNSUPPORTED = {"select", "sort", "resizefs", "chunksize"}


def _parse_args(command: str, argv: Sequence[str]) -> _Args:
    spec = _SPECS[command]
    args = _Args(command)
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
            if name not in spec:
                raise _parse_error(f"{command}: unrecognized option '{name}'")
            key, takes_value = spec[name]
            if takes_value:
                if eq:
                    value = inline
                elif i < len(items):
                    value = items[i]
                    i += 1
                else:
                    raise _parse_error(f"{command}: option '{name}' requires an argument")
                args.values.setdefault(key, []).append(value)
            else:
                if eq:
                    raise _parse_error(
                        f"{command}: option '{name}' doesn't allow an argument")
                args.values.setdefault(key, []).append("")
            continue
        cluster = item[1:]
        while cluster:
            letter, cluster = cluster[0], cluster[1:]
            option = "-" + letter
            if option not in spec:
                raise _parse_error(f"{command}: invalid option -- '{letter}'")
            key, takes_value = spec[option]
            if takes_value:
                if cluster:
                    value, cluster = cluster, ""
                elif i < len(items):
                    value = items[i]
                    i += 1
                else:
                    raise _parse_error(f"{command}: option requires an argument -- '{letter}'")
                args.values.setdefault(key, []).append(value)
            else:
                args.values.setdefault(key, []).append("")
    for key in _UNSUPPORTED & args.values.keys():
        raise _Fail(EXIT_INVALID, f"Option --{key} is not emulated by the LVM simulator.")
    return args


def _yes_no(value: str | None, option: str) -> bool | None:
    if value is None:
        return None
    if value in ("y", "Y", "ay", "ey", "ly", "sy"):
        return True
    if value in ("n", "N", "an", "en", "ln", "sn"):
        return False
    raise _parse_error(f"Invalid argument for --{option}: {value}")


# ---------------------------------------------------------------------------
# The state and the commands


#: lines printed unindented: getopt's complaints, and everything dd prints
_GETOPT_LINE = re.compile(r"[a-z]+: (unrecognized|invalid) option|[a-z]+: option |dd: ")


class _Output:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.err: list[str] = []

    def print(self, line: str) -> None:
        self.out.append(f"  {line}\n")

    def error(self, line: str) -> None:
        # getopt's own complaints ("lvs: unrecognized option ...") are not indented.
        self.err.append(f"{line}\n" if _GETOPT_LINE.match(line) else f"  {line}\n")

    def raw(self, text: str) -> None:
        self.out.append(text)

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)


def _empty_state() -> dict[str, Any]:
    return {"version": STATE_VERSION, "pvs": {}, "vgs": {}, "faults": []}


def _thin_lvs(vg: dict[str, Any], pool_name: str) -> dict[str, dict[str, Any]]:
    """The thin LVs (and thin snapshots) of pool ``pool_name``, by name."""
    return {name: lv for name, lv in vg["lvs"].items()
            if lv["kind"] == "thin" and lv["pool"] == pool_name}


class _Session:
    """One command's view of the state; ``dirty`` when it changed something."""

    def __init__(self, state: dict[str, Any], out: _Output):
        self.state = state
        self.out = out
        self.dirty = False

    # -- lookups ---------------------------------------------------------------

    def vg(self, name: str) -> dict[str, Any]:
        vg = self.state["vgs"].get(name)
        if vg is None:
            raise _Fail(EXIT_FAILED, f'Volume group "{name}" not found',
                        f"Cannot process volume group {name}")
        return vg

    @staticmethod
    def split_lv(arg: str) -> tuple[str, str]:
        if arg.startswith("/dev/"):
            arg = arg[5:]
        vg_name, slash, lv_name = arg.partition("/")
        if not slash or not lv_name or "/" in lv_name:
            raise _Fail(EXIT_INVALID, f'"{arg}": Invalid path for Logical Volume.')
        return vg_name, lv_name

    # -- VG arithmetic -----------------------------------------------------------

    @staticmethod
    def used_extents(vg: dict[str, Any]) -> int:
        total = vg["pmspare_extents"]
        for lv in vg["lvs"].values():
            if lv["kind"] == "linear":
                total += lv["extents"]
            elif lv["kind"] == "thin-pool":
                total += lv["extents"] + lv["metadata_extents"]
        return total

    def free_extents(self, vg: dict[str, Any]) -> int:
        return vg["extent_count"] - self.used_extents(vg)

    @staticmethod
    def to_extents(vg: dict[str, Any], size_bytes: int) -> int:
        """Whole extents for ``size_bytes``, rounded up; LVM counts them in 32 bits."""
        extents = -(-size_bytes // vg["extent_size"])
        if extents > MAX_EXTENT_COUNT:
            extent = vg["extent_size"]
            raise _Fail(EXIT_FAILED, f"Volume too large ({_human(extents * extent)}) for "
                                     f"extent size {_human(extent)}. Upper limit is less "
                                     f"than {_human(MAX_EXTENT_COUNT * extent)}.")
        return extents

    def rounding_note(self, vg: dict[str, Any], size_bytes: int) -> None:
        extents = self.to_extents(vg, size_bytes)
        if extents * vg["extent_size"] != size_bytes:
            self.out.print("Rounding up size to full physical extent "
                           f"{_human(extents * vg['extent_size'])}")

    @staticmethod
    def pool_used_bytes(vg: dict[str, Any], pool_name: str) -> int:
        pool = vg["lvs"][pool_name]
        referenced = {ref for lv in _thin_lvs(vg, pool_name).values() for ref in lv["refs"]}
        return sum(pool["chunks"][ref] for ref in referenced)

    @staticmethod
    def thin_mapped_bytes(vg: dict[str, Any], lv: dict[str, Any]) -> int:
        pool = vg["lvs"][lv["pool"]]
        return min(sum(pool["chunks"][ref] for ref in lv["refs"]),
                   lv["extents"] * vg["extent_size"])

    def pool_metadata_used(self, vg: dict[str, Any], pool_name: str) -> int:
        pool = vg["lvs"][pool_name]
        metadata_bytes = pool["metadata_extents"] * vg["extent_size"]
        data_chunks = pool["extents"] * vg["extent_size"] // pool["chunk_bytes"]
        blocks = (MD_FIXED_BLOCKS
                  + -(-metadata_bytes // MD_BLOCK_BYTES // MD_BITMAP_ENTRIES)
                  + -(-data_chunks // MD_BITMAP_ENTRIES))
        trees: dict[int, int] = {}
        for lv in _thin_lvs(vg, pool_name).values():
            mapped = self.thin_mapped_bytes(vg, lv) // pool["chunk_bytes"]
            trees[lv["tree"]] = max(trees.get(lv["tree"], 0), mapped)
        blocks += sum(_btree_blocks(entries) for entries in trees.values())
        return min(blocks * MD_BLOCK_BYTES, metadata_bytes)

    @staticmethod
    def prune_chunks(vg: dict[str, Any]) -> None:
        for pool_name, pool in vg["lvs"].items():
            if pool["kind"] != "thin-pool":
                continue
            live = {ref for lv in _thin_lvs(vg, pool_name).values() for ref in lv["refs"]}
            pool["chunks"] = {ref: size for ref, size in pool["chunks"].items() if ref in live}

    def check_overprovisioning(self, vg: dict[str, Any], lv_name: str) -> None:
        """LVM's warnings after a change when thin volumes outgrow their pools.

        Follows pool_check_overprovisioning() of LVM 2.03 with the default
        autoextend settings (threshold 100): over-provisioning is allowed,
        only warned about. Runs on the state after the change.
        """
        extent = vg["extent_size"]
        lvs = vg["lvs"]
        lv = lvs[lv_name]
        pool_name = lv["pool"] if lv["kind"] == "thin" else (
            lv_name if lv["kind"] == "thin-pool" else None)

        def thin_sum(pool: str) -> int:
            return sum(rec["extents"] * extent for rec in _thin_lvs(vg, pool).values())

        pool_sum = total = 0
        if pool_name is not None:
            pool_sum = lvs[pool_name]["extents"] * extent
            total = thin_sum(pool_name)
            if total <= pool_sum:
                return
        more_pools = 0
        for name, rec in lvs.items():
            if rec["kind"] == "thin-pool" and name != pool_name:
                more_pools += 1
                pool_sum += rec["extents"] * extent
                total += thin_sum(name)
        if total <= pool_sum:
            return
        vg_bytes = vg["extent_count"] * extent
        free_bytes = self.free_extents(vg) * extent
        if vg_bytes < total:
            text, limit = " and the size of whole volume group", vg_bytes
        elif free_bytes < total:
            text = " and the amount of free space in volume group" if free_bytes else ""
            limit = free_bytes
        else:
            text, limit = "", pool_sum
        which = "s" if more_pools else f" {vg['name']}/{pool_name}"
        limit_text = _human(limit) if limit > 0 else "no free space in volume group"
        self.out.error(f"WARNING: Sum of all thin volume sizes ({_human(total)}) exceeds "
                       f"the size of thin pool{which}{text} ({limit_text}).")
        self.out.print("WARNING: You have not turned on protection against thin pools "
                       "running out of space.")
        self.out.print("WARNING: Set activation/thin_pool_autoextend_threshold below 100 "
                       "to trigger automatic extension of thin pools before they get full.")

    def touch(self, vg: dict[str, Any]) -> None:
        """Record a change of ``vg``'s metadata (LVM bumps its seqno)."""
        vg["seqno"] += 1
        self.dirty = True

    def new_lv(self, vg: dict[str, Any], name: str, kind: str, extents: int,
               tags: list[str], **extra: Any) -> None:
        """Add LV ``name``; ``extra`` adds kind-specific fields or overrides
        ``active`` and ``skip``."""
        vg["lvs"][name] = {"kind": kind, "uuid": _lvm_uuid(), "extents": extents,
                           "active": True, "skip": False, "tags": sorted(set(tags)),
                           **extra}
        self.touch(vg)

    @staticmethod
    def auto_name(vg: dict[str, Any]) -> str:
        number = 0
        while f"lvol{number}" in vg["lvs"]:
            number += 1
        return f"lvol{number}"


def _btree_blocks(entries: int) -> int:
    """Blocks of a dm-persistent-data btree holding ``entries`` mappings."""
    nodes = max(1, -(-entries // MD_BTREE_ENTRIES))
    total = nodes
    while nodes > 1:
        nodes = -(-nodes // MD_BTREE_ENTRIES)
        total += nodes
    return total


def _check_tags(tags: list[str], option: str) -> list[str]:
    for tag in tags:
        if not _TAG_CHARS.fullmatch(tag):
            raise _parse_error(f"Invalid argument for --{option}: {tag}")
    return tags


# -- lvcreate -------------------------------------------------------------------


def _cmd_lvcreate(session: _Session, args: _Args) -> None:
    size = _size_option(args, "size", "--size")
    virtual = _size_option(args, "virtualsize", "--virtualsize")
    extents_arg = args.last("extents")
    name = args.last("name")
    tags = _check_tags(args.all("addtag"), "addtag")
    seg_type = args.last("type")
    skip = _yes_no(args.last("setactivationskip"), "setactivationskip")
    activate = _yes_no(args.last("activate"), "activate")
    if len(args.positionals) != 1:
        raise _invalid("lvcreate", "Please specify exactly one volume group "
                                   "(or VG/LV) argument.")
    target = args.positionals[0]
    if name is not None and "/" in name:
        name_vg, _, name = name.rpartition("/")
        target_vg = target.removeprefix("/dev/").split("/")[0]
        if name_vg.removeprefix("/dev/") != target_vg:
            raise _invalid("lvcreate", "Inconsistent volume group names given: "
                                       f'"{name_vg}" and "{target_vg}"')
    if name is not None:
        _check_new_lv_name(name, "lvcreate")
    thin = args.has("thin") or args.has("thinpool") or seg_type in ("thin", "thin-pool")
    if args.has("snapshot") or seg_type == "snapshot":
        _create_snapshot(session, args, target, name, tags, size, skip, activate)
    elif thin and virtual is not None:
        if size is not None or extents_arg is not None:
            raise _Fail(EXIT_INVALID, "Creating a thin pool and a thin volume in one "
                                      "lvcreate is not emulated by the LVM simulator.")
        _create_thin(session, args, target, name, tags, virtual, skip, activate)
    elif thin:
        _create_pool(session, args, target, name, tags, size, extents_arg)
    elif virtual is not None:
        raise _Fail(EXIT_INVALID, "Sparse (virtual) thick volumes are not emulated "
                                  "by the LVM simulator.")
    else:
        if seg_type not in (None, "linear", "striped"):
            raise _Fail(EXIT_INVALID, f"Segment type {seg_type} is not emulated by the "
                                      "LVM simulator.")
        _create_linear(session, target, name, tags, size, extents_arg)


def _size_option(args: _Args, key: str, option: str) -> int | None:
    text = args.last(key)
    if text is None:
        return None
    _, value = _parse_size(text, option)
    if value == 0:
        raise _invalid(args.command, f"{option} may not be zero.")
    return value


def _extents_option(session: _Session, vg: dict[str, Any], text: str) -> int:
    match = re.fullmatch(r"\+?(\d+)(?:%(FREE|VG))?", text)
    if not match:
        raise _parse_error(f"Invalid argument for --extents: {text}")
    number, base = int(match[1]), match[2]
    if base == "FREE":
        return session.free_extents(vg) * number // 100
    if base == "VG":
        return vg["extent_count"] * number // 100
    return number


def _vg_and_name(session: _Session, target: str, name: str | None,
                 ) -> tuple[dict[str, Any], str | None]:
    if "/" in target.removeprefix("/dev/"):
        vg_name, lv_name = session.split_lv(target)
        if name is not None and name != lv_name:
            raise _invalid("lvcreate", f"Inconsistent logical volume names given: "
                                       f'"{name}" and "{lv_name}"')
        return session.vg(vg_name), lv_name
    return session.vg(target), name


def _claim_name(session: _Session, vg: dict[str, Any], name: str | None) -> str:
    if name is None:
        return session.auto_name(vg)
    _check_new_lv_name(name, "lvcreate")
    if name in vg["lvs"]:
        raise _Fail(EXIT_FAILED, f'Logical Volume "{name}" already exists in volume '
                                 f'group "{vg["name"]}"')
    return name


def _need_extents(session: _Session, vg: dict[str, Any], extents: int) -> None:
    free = session.free_extents(vg)
    if free < extents:
        raise _Fail(EXIT_FAILED, f'Volume group "{vg["name"]}" has insufficient free '
                                 f"space ({free} extents): {extents} required.")


def _requested_extents(session: _Session, vg: dict[str, Any], size: int | None,
                       extents_arg: str | None) -> int:
    """The extents of a new LV from ``--size`` (rounded up) or ``--extents``."""
    if size is not None:
        session.rounding_note(vg, size)
        extents = session.to_extents(vg, size)
    else:
        extents = _extents_option(session, vg, extents_arg or "0")
    if extents <= 0:
        raise _Fail(EXIT_FAILED, "Unable to create new logical volume with no extents.")
    return extents


def _create_linear(session: _Session, target: str, name: str | None, tags: list[str],
                   size: int | None, extents_arg: str | None) -> None:
    vg, name = _vg_and_name(session, target, name)
    if size is None and extents_arg is None:
        raise _invalid("lvcreate", "Please specify either size or extents.")
    name = _claim_name(session, vg, name)
    extents = _requested_extents(session, vg, size, extents_arg)
    _need_extents(session, vg, extents)
    session.new_lv(vg, name, "linear", extents, tags)
    session.check_overprovisioning(vg, name)
    session.out.print(f'Logical volume "{name}" created.')


def _metadata_bytes(data_bytes: int) -> tuple[int, int]:
    """LVM's default pool metadata size (bytes, before extent rounding) and chunk."""
    chunk = THIN_CHUNK_BYTES
    metadata = data_bytes // chunk * 64
    while metadata > 2 * 128 * MiB and chunk < GiB:
        chunk *= 2
        metadata //= 2
    return min(max(metadata, THIN_MIN_METADATA_BYTES), THIN_MAX_METADATA_BYTES), chunk


def _create_pool(session: _Session, args: _Args, target: str, name: str | None,
                 tags: list[str], size: int | None, extents_arg: str | None) -> None:
    if name is None and args.has("thinpool") and "/" not in target:
        name = args.last("thinpool")
    vg, name = _vg_and_name(session, target, name)
    if size is None and extents_arg is None:
        raise _invalid("lvcreate", "Please specify either size or extents.")
    name = _claim_name(session, vg, name)
    extent = vg["extent_size"]
    data_extents = _requested_extents(session, vg, size, extents_arg)
    metadata_text = args.last("poolmetadatasize")
    metadata, chunk = _metadata_bytes(data_extents * extent)
    if metadata_text is not None:
        _, metadata = _parse_size(metadata_text, "--poolmetadatasize")
        metadata = min(max(metadata, THIN_MIN_METADATA_BYTES), THIN_MAX_METADATA_BYTES)
    metadata_extents = session.to_extents(vg, metadata)
    spare_wanted = _yes_no(args.last("poolmetadataspare"), "poolmetadataspare")
    spare_growth = 0
    if spare_wanted is not False:
        spare_growth = max(0, min(metadata_extents, session.to_extents(vg, 16 * GiB))
                           - vg["pmspare_extents"])
    _need_extents(session, vg, data_extents)
    needed = data_extents + metadata_extents + spare_growth
    free = session.free_extents(vg)
    if free < needed:
        raise _Fail(EXIT_FAILED, f"Insufficient free space: {needed} extents needed, "
                                 f"but only {free} available")
    zero = _yes_no(args.last("zero"), "zero")
    session.out.print(f"Thin pool volume with chunk size {_human(chunk)} can address at "
                      f"most {_human(THIN_MAX_METADATA_BYTES * chunk // 64)} of data.")
    vg["pmspare_extents"] += spare_growth
    session.new_lv(vg, name, "thin-pool", data_extents, tags,
                   metadata_extents=metadata_extents, chunk_bytes=chunk,
                   zero=zero is not False, chunks={}, next_chunk=1)
    session.check_overprovisioning(vg, name)
    session.out.print(f'Logical volume "{name}" created.')


def _create_thin(session: _Session, args: _Args, target: str, name: str | None,
                 tags: list[str], virtual: int, skip: bool | None,
                 activate: bool | None) -> None:
    pool_name = args.last("thinpool")
    if pool_name is not None:
        if "/" in pool_name:
            pool_vg, pool_name = session.split_lv(pool_name)
            vg = session.vg(pool_vg)
        else:
            vg, lv_name = _vg_and_name(session, target, name)
            name = lv_name
    else:
        vg_name, pool_name = session.split_lv(target)
        vg = session.vg(vg_name)
    pool = vg["lvs"].get(pool_name)
    if pool is None:
        raise _Fail(EXIT_FAILED, f"Pool {pool_name} not found in Volume group {vg['name']}.")
    if pool["kind"] != "thin-pool":
        raise _Fail(EXIT_FAILED, f"Logical volume {vg['name']}/{pool_name} is not a thin pool.")
    name = _claim_name(session, vg, name)
    session.rounding_note(vg, virtual)
    extents = session.to_extents(vg, virtual)
    active = (activate is not False) and (not skip or args.has("ignoreactivationskip"))
    pool["next_tree"] = pool.get("next_tree", 1) + 1
    session.new_lv(vg, name, "thin", extents, tags, active=active, skip=bool(skip),
                   pool=pool_name, origin=None, refs=[], tree=pool["next_tree"])
    if active:
        pool["active"] = True
    session.check_overprovisioning(vg, name)
    session.out.print(f'Logical volume "{name}" created.')


def _create_snapshot(session: _Session, args: _Args, target: str, name: str | None,
                     tags: list[str], size: int | None, skip: bool | None,
                     activate: bool | None) -> None:
    vg_name, origin_name = session.split_lv(target)
    vg = session.vg(vg_name)
    origin = vg["lvs"].get(origin_name)
    if origin is None:
        raise _Fail(EXIT_FAILED, f"Snapshot origin LV {origin_name} not found in "
                                 f"Volume group {vg_name}.")
    if origin["kind"] != "thin" or size is not None or args.has("extents"):
        if origin["kind"] != "thin" and size is None and not args.has("extents"):
            raise _Fail(EXIT_FAILED, "Please specify either size or extents with snapshots.")
        raise _Fail(EXIT_INVALID, "Thick (COW) snapshots are not emulated by the LVM "
                                  "simulator.")
    name = _claim_name(session, vg, name)
    skip_flag = True if skip is None else skip
    active = (activate is not False) and (not skip_flag or args.has("ignoreactivationskip"))
    session.new_lv(vg, name, "thin", origin["extents"], tags, active=active,
                   skip=skip_flag, pool=origin["pool"], origin=origin_name,
                   refs=list(origin["refs"]), tree=origin["tree"])
    if active:
        vg["lvs"][origin["pool"]]["active"] = True
    session.check_overprovisioning(vg, name)
    session.out.print(f'Logical volume "{name}" created.')


# -- lvextend, lvremove, lvrename, lvchange ---------------------------------------


def _find_lv(session: _Session, arg: str, message: str) -> tuple[dict, str, dict]:
    vg_name, lv_name = session.split_lv(arg)
    vg = session.vg(vg_name)
    lv = vg["lvs"].get(lv_name)
    if lv is None:
        raise _Fail(EXIT_FAILED, message.format(vg=vg_name, lv=lv_name))
    return vg, lv_name, lv


def _cmd_lvextend(session: _Session, args: _Args) -> None:
    if len(args.positionals) != 1:
        raise _invalid("lvextend", "Please specify a logical volume path.")
    size_text, extents_text = args.last("size"), args.last("extents")
    if (size_text is None) == (extents_text is None):
        raise _invalid("lvextend", "Please specify either size or extents but not both.")
    sign, size = ("", 0)
    if size_text is not None:
        sign, size = _parse_size(size_text, "--size")
    vg, name, lv = _find_lv(session, args.positionals[0],
                            "Logical volume {lv} not found in volume group {vg}.")
    extent = vg["extent_size"]
    old = lv["extents"]
    if size_text is not None:
        new = session.to_extents(vg, size) + (old if sign == "+" else 0)
        if size % extent:
            session.out.print("Rounding size to boundary between physical extents: "
                              f"{_human(new * extent)}.")
    else:
        number = _extents_option(session, vg, extents_text or "0")
        new = old + number if (extents_text or "").startswith("+") else number
    if new == old:
        raise _Fail(EXIT_FAILED, f"New size ({new} extents) matches existing size "
                                 f"({old} extents).")
    if new < old:
        raise _Fail(EXIT_FAILED, f"New size given ({new} extents) not larger than existing "
                                 f"size ({old} extents)")
    if lv["kind"] in ("linear", "thin-pool"):
        free = session.free_extents(vg)
        if free < new - old:
            raise _Fail(EXIT_FAILED, f"Insufficient free space: {new - old} extents "
                                     f"needed, but only {free} available")
    shown = f"{name}_tdata" if lv["kind"] == "thin-pool" else name
    session.out.print(
        f"Size of logical volume {vg['name']}/{shown} changed from {_human(old * extent)} "
        f"({old} extents) to {_human(new * extent)} ({new} extents).")
    lv["extents"] = new
    session.touch(vg)
    if lv["kind"] in ("thin", "thin-pool"):
        session.check_overprovisioning(vg, name)
    session.out.print(f"Logical volume {vg['name']}/{name} successfully resized.")


def _cmd_lvremove(session: _Session, args: _Args) -> None:
    if not args.positionals:
        raise _invalid("lvremove", "Please enter one or more logical volume paths.")
    failed: _Fail | None = None
    for arg in args.positionals:
        try:
            _remove_one(session, args, arg)
        except _Fail as exc:
            if exc.exit_code != EXIT_FAILED:
                raise
            for line in exc.lines:
                session.out.error(line)
            failed = exc
    if failed is not None:
        raise _Fail(EXIT_FAILED)


def _remove_one(session: _Session, args: _Args, arg: str) -> None:
    vg, name, lv = _find_lv(session, arg, 'Failed to find logical volume "{vg}/{lv}"')
    forced = args.has("force") or args.has("yes")
    dependents = list(_thin_lvs(vg, name))
    if not forced and (lv["active"] or dependents):
        raise _Fail(EXIT_FAILED, f"Logical volume {vg['name']}/{name} not removed.")
    for other in sorted(dependents):
        del vg["lvs"][other]
        session.out.print(f'Logical volume "{other}" successfully removed.')
    del vg["lvs"][name]
    for rec in vg["lvs"].values():
        if rec["kind"] == "thin" and rec["origin"] == name:
            rec["origin"] = None
    if not any(rec["kind"] == "thin-pool" for rec in vg["lvs"].values()):
        vg["pmspare_extents"] = 0
    session.prune_chunks(vg)
    session.touch(vg)
    session.out.print(f'Logical volume "{name}" successfully removed.')


def _cmd_lvrename(session: _Session, args: _Args) -> None:
    pos = args.positionals
    if len(pos) == 3:
        vg_name, old, new = pos
    elif len(pos) == 2 and "/" in pos[0]:
        vg_name, old = session.split_lv(pos[0])
        new = pos[1]
        if "/" in new:
            new_vg, new = session.split_lv(new)
            if new_vg != vg_name:
                raise _Fail(EXIT_INVALID, "Logical volume names must have the same "
                                          "volume group (\"{vg_name}\" or \"{new_vg}\").")
    else:
        raise _invalid("lvrename", "Old and new logical volume names required")
    _check_new_lv_name(new, "lvrename", rename=True)
    vg = session.vg(vg_name)
    if old not in vg["lvs"]:
        raise _Fail(EXIT_FAILED, f'Existing logical volume "{old}" not found in volume '
                                 f'group "{vg_name}"')
    if new in vg["lvs"]:
        raise _Fail(EXIT_FAILED, f'Logical Volume "{new}" already exists in volume '
                                 f'group "{vg_name}"')
    vg["lvs"] = {(new if key == old else key): rec for key, rec in vg["lvs"].items()}
    for rec in vg["lvs"].values():
        if rec["kind"] == "thin":
            if rec["pool"] == old:
                rec["pool"] = new
            if rec["origin"] == old:
                rec["origin"] = new
    session.touch(vg)
    session.out.print(f'Renamed "{old}" to "{new}" in volume group "{vg_name}"')


def _cmd_lvchange(session: _Session, args: _Args) -> None:
    if not args.positionals:
        raise _invalid("lvchange", "Please give logical volume path(s).")
    activate = _yes_no(args.last("activate"), "activate")
    skip = _yes_no(args.last("setactivationskip"), "setactivationskip")
    add = _check_tags(args.all("addtag"), "addtag")
    remove = _check_tags(args.all("deltag"), "deltag")
    if activate is None and skip is None and not add and not remove:
        raise _invalid("lvchange", "Need one or more command options.")
    for arg in args.positionals:
        vg, name, lv = _find_lv(session, arg, 'Failed to find logical volume "{vg}/{lv}"')
        changed = False
        if skip is not None and lv["skip"] != skip:
            lv["skip"] = skip
            changed = True
        if add or remove:
            lv["tags"] = sorted((set(lv["tags"]) | set(add)) - set(remove))
            changed = True
        if activate is True and (not lv["skip"] or args.has("ignoreactivationskip")):
            lv["active"] = True
            if lv["kind"] == "thin":
                vg["lvs"][lv["pool"]]["active"] = True
        elif activate is False:
            if lv["kind"] == "thin-pool" and any(
                    rec["active"] for rec in _thin_lvs(vg, name).values()):
                raise _Fail(EXIT_FAILED, f"Logical volume {vg['name']}/{name} is used by "
                                         "another device.")
            if lv.get("open"):
                raise _Fail(EXIT_FAILED, f"Logical volume {vg['name']}/{name} in use.")
            lv["active"] = False
        session.touch(vg)
        if changed:
            session.out.print(f"Logical volume {vg['name']}/{name} changed.")


def _cmd_lvconvert(session: _Session, args: _Args) -> None:
    """``lvconvert --merge vg/snap`` of a thin snapshot: the origin takes the snapshot's
    data and size, keeps its own name, uuid and tags; the snapshot LV goes away."""
    if not args.has("merge") or len(args.positionals) != 1:
        raise _invalid("lvconvert", "Only lvconvert --merge of one thin snapshot is "
                                    "emulated by the LVM simulator.")
    vg, name, snap = _find_lv(session, args.positionals[0],
                              'Failed to find logical volume "{vg}/{lv}"')
    where = f"{vg['name']}/{name}"
    if snap["kind"] != "thin" or not snap.get("origin"):
        raise _Fail(EXIT_FAILED, f"Command on LV {where} uses options that require LV "
                                 f"types thinsnapshot or snapshot.",
                    f"Command not permitted on LV {where}.")
    origin_name = snap["origin"]
    origin = vg["lvs"][origin_name]
    if origin.get("open") and origin["active"]:
        raise _Fail(EXIT_FAILED, "Can't merge over open origin volume.")
    origin.update(extents=snap["extents"], refs=list(snap["refs"]), tree=snap["tree"])
    del vg["lvs"][name]
    for rec in vg["lvs"].values():
        if rec["kind"] == "thin" and rec["origin"] == name:
            rec["origin"] = origin_name
    session.prune_chunks(vg)
    session.touch(vg)
    session.out.print(f"Volume {where} replaced origin {vg['name']}/{origin_name}.")
    session.out.print(f"Merging of thin snapshot {where} has finished.")


# -- dd (the zeroing the driver runs on a thick volume before removing it) --------

_DD_UNITS: Final = {"": 1, "c": 1, "w": 2, "b": 512, "K": KiB, "M": MiB, "G": GiB}


def _dd_number(text: str, key: str) -> int:
    match = re.fullmatch(r"(\d+)([cwbKMG]?)", text)
    if not match:
        raise _Fail(1, f"dd: invalid number: '{text}'")
    return int(match[1]) * _DD_UNITS[match[2]]


def _cmd_dd(session: _Session, argv: list[str]) -> None:
    """``dd if=/dev/zero of=/dev/<vg>/<lv> count=N bs=... [iflag=count_bytes] ...``:
    the LV's data (thick) is zeroed, a thin LV gets the blocks mapped, and the wipe
    is recorded in the state (``LVMSimulator.wipes``)."""
    ops = dict(arg.partition("=")[::2] for arg in argv)
    if ops.get("if") != "/dev/zero":
        raise _Fail(1, f"dd: the LVM simulator copies only if=/dev/zero, got "
                       f"'{ops.get('if', '')}'")
    device = ops.get("of", "")
    vg_name, _, lv_name = device.removeprefix("/dev/").partition("/")
    vg = session.state["vgs"].get(vg_name)
    lv = vg["lvs"].get(lv_name) if vg is not None and "/" not in lv_name else None
    if lv is None or not lv["active"] or lv["kind"] == "thin-pool":
        raise _Fail(1, f"dd: failed to open '{device}': No such file or directory")
    block = _dd_number(ops.get("bs", "512"), "bs")
    count = _dd_number(ops.get("count", "0"), "count")
    wanted = count if "count_bytes" in ops.get("iflag", "").split(",") else count * block
    size = lv["extents"] * vg["extent_size"]
    written = min(wanted, size)
    if lv["kind"] == "thin":
        _map_thin(session, vg, lv, written)
    else:
        lv["data"] = _without(lv.get("data", []), 0, written)
    session.state.setdefault("wipes", []).append({"device": device, "bytes": written})
    session.touch(vg)
    full, part = divmod(written, block)
    records = f"{full}+{1 if part else 0} records"
    session.out.err += [f"{records} in\n", f"{records} out\n",
                        f"{written} bytes copied, 0.001 s, {written // 1000} kB/s\n"]
    if wanted > size:
        raise _Fail(1, f"dd: error writing '{device}': No space left on device")


def _without(ranges: list[list[int]], start: int, end: int) -> list[list[int]]:
    """Byte ranges ``[a, b)`` less ``[start, end)``."""
    kept = []
    for a, b in ranges:
        kept += [r for r in ([a, min(b, start)], [max(a, end), b]) if r[0] < r[1]]
    return kept


def _map_thin(session: _Session, vg: dict[str, Any], rec: dict[str, Any],
              nbytes: int) -> int:
    """Map ``nbytes`` more of thin LV ``rec`` (rounded up to chunks, capped at the LV's
    size and at the pool's room); returns how many bytes the pool could not map."""
    pool = vg["lvs"][rec["pool"]]
    chunk = pool["chunk_bytes"]
    room_in_lv = rec["extents"] * vg["extent_size"] - session.thin_mapped_bytes(vg, rec)
    wanted = min(-(-nbytes // chunk) * chunk, max(room_in_lv, 0))
    room_in_pool = pool["extents"] * vg["extent_size"] - \
        session.pool_used_bytes(vg, rec["pool"])
    granted = min(wanted, room_in_pool)
    if granted > 0:
        if any(other is not rec and other["tree"] == rec["tree"]
               for other in _thin_lvs(vg, rec["pool"]).values()):
            pool["next_tree"] = pool.get("next_tree", 1) + 1
            rec["tree"] = pool["next_tree"]  # copy-on-write of a shared tree
        ref = str(pool["next_chunk"])
        pool["next_chunk"] += 1
        pool["chunks"][ref] = granted
        rec["refs"].append(ref)
    return wanted - granted


# -- reports ----------------------------------------------------------------------


def _lv_attr(session: _Session, vg: dict[str, Any], lv: dict[str, Any], name: str) -> str:
    kind = lv["kind"]
    state = "a" if lv["active"] else "-"
    skip = "k" if lv["skip"] else "-"
    if kind == "thin-pool":
        opened = any(rec["active"] for rec in _thin_lvs(vg, name).values())
        pool_bytes = lv["extents"] * vg["extent_size"]
        full = lv["active"] and session.pool_used_bytes(vg, name) >= pool_bytes
        return (f"twi-{state}{'o' if opened else '-'}t{'z' if lv['zero'] else '-'}"
                f"{'D' if full else '-'}{skip}")
    opened = "o" if lv["active"] and lv.get("open") else "-"
    if kind == "thin":
        zero = "z" if vg["lvs"][lv["pool"]]["zero"] else "-"
        return f"Vwi-{state}{opened}t{zero}-{skip}"
    return f"-wi-{state}{opened}----"[:9] + skip


def _lv_rows(session: _Session, vg: dict[str, Any], show_all: bool,
             readonly: bool = False) -> list[dict[str, Any]]:
    """Every LV of the VG as raw typed values, plus hidden ones with ``-a``.

    ``readonly`` (``--readonly``) means LVM never asks the kernel: state and
    open flags show as X and no percentage is known.
    """
    rows = _lv_rows_live(session, vg, show_all)
    if readonly:
        for row in rows:
            attr = row["lv_attr"]
            row.update(lv_attr=attr[:4] + "XX" + attr[6:], data_percent="",
                       metadata_percent="", lv_active="unknown")
    return rows


def _lv_rows_live(session: _Session, vg: dict[str, Any],
                  show_all: bool) -> list[dict[str, Any]]:
    extent = vg["extent_size"]
    rows = []
    snapshot_count: dict[str, int] = {}
    for rec in vg["lvs"].values():
        if rec["kind"] == "thin" and rec["origin"]:
            snapshot_count[rec["origin"]] = snapshot_count.get(rec["origin"], 0) + 1
    for name, lv in vg["lvs"].items():
        kind = lv["kind"]
        row: dict[str, Any] = {
            "lv_name": name, "lv_size": lv["extents"] * extent,
            "lv_attr": _lv_attr(session, vg, lv, name), "lv_uuid": lv["uuid"],
            "lv_tags": ",".join(lv["tags"]), "pool_lv": "", "origin": "",
            "data_percent": "", "metadata_percent": "", "lv_metadata_size": None,
            "lv_active": "active" if lv["active"] else "",
            "lv_skip_activation": "skip activation" if lv["skip"] else "",
            "lv_full_name": f"{vg['name']}/{name}", "lv_path": f"/dev/{vg['name']}/{name}",
        }
        if kind == "linear":
            row.update(lv_layout="linear", lv_role="public", segtype="linear")
        elif kind == "thin-pool":
            row.update(lv_layout="thin,pool", lv_role="private", segtype="thin-pool",
                       lv_metadata_size=lv["metadata_extents"] * extent, lv_path="")
            if lv["active"]:
                row["data_percent"] = _percent_text(session.pool_used_bytes(vg, name),
                                                    lv["extents"] * extent)
                row["metadata_percent"] = _percent_text(
                    session.pool_metadata_used(vg, name), lv["metadata_extents"] * extent)
        else:
            roles = ["public"]
            if name in snapshot_count:
                roles += ["origin", "thinorigin"]
                if snapshot_count[name] > 1:
                    roles.append("multithinorigin")
            if lv["origin"]:
                roles += ["snapshot", "thinsnapshot"]
            row.update(lv_layout="thin,sparse", lv_role=",".join(roles), segtype="thin",
                       pool_lv=lv["pool"], origin=lv["origin"] or "")
            if lv["active"]:
                row["data_percent"] = _percent_text(session.thin_mapped_bytes(vg, lv),
                                                    lv["extents"] * extent)
        rows.append(row)
        if show_all and kind == "thin-pool":
            state = "a" if lv["active"] else "-"
            opened = "o" if lv["active"] else "-"
            for suffix, size, attr, role in (
                    ("_tdata", lv["extents"] * extent, f"Twi-{state}{opened}----",
                     "private,thin,pool,data"),
                    ("_tmeta", lv["metadata_extents"] * extent, f"ewi-{state}{opened}----",
                     "private,thin,pool,metadata")):
                row = _hidden_row(vg, f"[{name}{suffix}]", size, attr, role)
                row["lv_active"] = "active" if lv["active"] else ""
                rows.append(row)
    if show_all and vg["pmspare_extents"]:
        rows.append(_hidden_row(vg, "[lvol0_pmspare]", vg["pmspare_extents"] * extent,
                                "ewi-------", "private,pool,spare"))
    return rows


def _hidden_row(vg: dict[str, Any], name: str, size: int, attr: str,
                role: str) -> dict[str, Any]:
    return {"lv_name": name, "lv_size": size, "lv_attr": attr, "lv_uuid": _stable_uuid(vg, name),
            "lv_tags": "", "pool_lv": "", "origin": "", "data_percent": "",
            "metadata_percent": "", "lv_metadata_size": None, "lv_active": "",
            "lv_skip_activation": "",
            "lv_full_name": f"{vg['name']}/{name}", "lv_path": "", "lv_layout": "linear",
            "lv_role": role, "segtype": "linear"}


def _stable_uuid(vg: dict[str, Any], name: str) -> str:
    alphabet = string.ascii_letters + string.digits
    digest = hashlib.sha256(f"{vg['uuid']}/{name}".encode()).digest()
    raw = "".join(alphabet[byte % len(alphabet)] for byte in digest[:32])
    return "-".join((raw[:6], raw[6:10], raw[10:14], raw[14:18], raw[18:22],
                     raw[22:26], raw[26:]))


def _vg_row(session: _Session, vg: dict[str, Any]) -> dict[str, Any]:
    extent = vg["extent_size"]
    free = session.free_extents(vg)
    return {
        "vg_name": vg["name"], "vg_size": vg["extent_count"] * extent,
        "vg_free": free * extent, "vg_extent_size": extent, "vg_uuid": vg["uuid"],
        "vg_extent_count": vg["extent_count"], "vg_free_count": free,
        "lv_count": len(vg["lvs"]), "pv_count": len(vg["pvs"]),
        "snap_count": 0, "vg_attr": "wz--n-", "vg_seqno": vg["seqno"],
    }


_SIZE_FIELDS = {"vg_size", "vg_free", "vg_extent_size", "lv_size", "lv_metadata_size"}
_COUNT_FIELDS = {"vg_extent_count", "vg_free_count", "lv_count", "pv_count",
                 "snap_count", "vg_seqno"}
_LV_FIELDS = ("lv_name", "lv_size", "lv_attr", "lv_layout", "lv_role", "pool_lv",
              "origin", "data_percent", "metadata_percent", "lv_metadata_size",
              "lv_uuid", "lv_tags", "lv_active", "lv_skip_activation", "lv_full_name",
              "lv_path", "segtype", "move_pv", "mirror_log", "copy_percent", "convert_lv")
_VG_FIELDS = ("vg_name", "vg_size", "vg_free", "vg_extent_size", "vg_uuid",
              "vg_extent_count", "vg_free_count", "lv_count", "pv_count", "snap_count",
              "vg_attr", "vg_seqno")
_HEADINGS = {
    "lv_name": "LV", "vg_name": "VG", "lv_attr": "Attr", "lv_size": "LSize",
    "pool_lv": "Pool", "origin": "Origin", "data_percent": "Data%",
    "metadata_percent": "Meta%", "move_pv": "Move", "mirror_log": "Log",
    "copy_percent": "Cpy%Sync", "convert_lv": "Convert", "vg_size": "VSize",
    "vg_free": "VFree", "vg_extent_size": "Ext", "lv_layout": "Layout",
    "lv_role": "Role", "lv_metadata_size": "MSize", "lv_uuid": "LV UUID",
    "lv_tags": "LV Tags", "vg_uuid": "VG UUID", "pv_count": "#PV", "lv_count": "#LV",
    "snap_count": "#SN", "vg_attr": "Attr", "lv_active": "Active",
    "vg_extent_count": "#Ext", "lv_skip_activation": "SkipAct", "vg_free_count": "Free",
    "segtype": "Type", "lv_full_name": "LV", "lv_path": "Path", "vg_seqno": "Seq",
}
_DEFAULT_COLUMNS = {
    "lvs": ("lv_name", "vg_name", "lv_attr", "lv_size", "pool_lv", "origin",
            "data_percent", "metadata_percent", "move_pv", "mirror_log",
            "copy_percent", "convert_lv"),
    "vgs": ("vg_name", "pv_count", "lv_count", "snap_count", "vg_attr", "vg_size",
            "vg_free"),
}


def _report_columns(args: _Args) -> list[str]:
    known = _LV_FIELDS + _VG_FIELDS if args.command == "lvs" else _VG_FIELDS
    prefix = "lv_" if args.command == "lvs" else "vg_"
    columns: list[str] = []
    options = args.all("options")
    if not options or options[0].startswith("+"):
        columns += _DEFAULT_COLUMNS[args.command]
    for option in options:
        for name in option.lstrip("+").split(","):
            name = name.strip()
            if not name:
                continue
            if name not in known and prefix + name in known:
                name = prefix + name
            if name not in known:
                raise _Fail(EXIT_FAILED, f"Unrecognised field: {name}")
            columns.append(name)
    return columns


def _cell(value: Any, column: str, units: str, suffix: bool) -> str:
    if value is None or value == "":
        return ""
    if column in _SIZE_FIELDS:
        return _format_size(value, units, suffix)
    return str(value)


def _emit_report(session: _Session, args: _Args, section: str,
                 rows: list[dict[str, Any]], columns: list[str]) -> None:
    fmt = args.last("reportformat", "basic")
    units = args.last("units", "r") or "r"
    if len(units) != 1 or units not in "hHrRbBsSkKmMgGtTpPeE":
        raise _parse_error(f"Invalid argument for --units: {units}")
    suffix = not args.has("nosuffix")
    cells = [[_cell(row.get(col, ""), col, units, suffix) for col in columns] for row in rows]
    if fmt == "json":
        lines = ["  {", '      "report": [', "          {", f'              "{section}": [']
        for index, values in enumerate(cells):
            body = ", ".join(f'"{col}":{json.dumps(val)}' for col, val in zip(columns, values))
            comma = "," if index < len(cells) - 1 else ""
            lines.append(f"                  {{{body}}}{comma}")
        lines += ["              ]", "          }", "      ]", "  }"]
        session.out.raw("\n".join(lines) + "\n")
        return
    if fmt != "basic":
        raise _parse_error(f"Invalid argument for --reportformat: {fmt}")
    if not rows:
        return  # LVM prints no table, not even headings, without rows
    separator = args.last("separator")
    numeric = {col for col in columns if col in _SIZE_FIELDS | _COUNT_FIELDS}
    table = cells if args.has("noheadings") else [[_HEADINGS.get(c, c) for c in columns], *cells]
    if separator is not None:
        for values in table:
            session.out.raw("  " + separator.join(values) + "\n")
        return
    widths = [max([6 if columns[i].endswith("percent") else 0]
                  + [len(values[i]) for values in table]) for i in range(len(columns))]
    for line_no, values in enumerate(table):
        parts = []
        for i, value in enumerate(values):
            heading = line_no == 0 and not args.has("noheadings")
            right = columns[i] in numeric and not heading
            parts.append(value.rjust(widths[i]) if right else value.ljust(widths[i]))
        session.out.raw("  " + " ".join(parts) + "\n")


def _report_vg(session: _Session, vg_name: str) -> dict[str, Any] | None:
    """VG ``vg_name`` for a report, or None once its not-found errors are out."""
    try:
        return session.vg(vg_name)
    except _Fail as exc:
        for line in exc.lines:
            session.out.error(line)
        return None


def _cmd_lvs(session: _Session, args: _Args) -> None:
    columns = _report_columns(args)
    rows: list[dict[str, Any]] = []
    failed = False
    selections: list[tuple[str, str | None]] = []
    for arg in args.positionals or sorted(session.state["vgs"]):
        if "/" in arg.removeprefix("/dev/"):
            vg_name, lv_name = session.split_lv(arg)
            selections.append((vg_name, lv_name))
        else:
            selections.append((arg, None))
    for vg_name, lv_name in selections:
        vg = _report_vg(session, vg_name)
        if vg is None:
            failed = True
            continue
        vg_row = _vg_row(session, vg)
        lv_rows = _lv_rows(session, vg, args.has("all"), args.has("readonly"))
        if lv_name is not None:
            lv_rows = [row for row in lv_rows if row["lv_name"] == lv_name]
            if not lv_rows:
                session.out.error(f'Failed to find logical volume "{vg_name}/{lv_name}"')
                failed = True
                continue
        lv_rows.sort(key=lambda row: row["lv_name"].strip("[]"))
        rows += [{**vg_row, **row} for row in lv_rows]
    _emit_report(session, args, "lv", rows, columns)
    if failed:
        raise _Fail(EXIT_FAILED)


def _cmd_vgs(session: _Session, args: _Args) -> None:
    columns = _report_columns(args)
    rows = []
    failed = False
    for vg_name in args.positionals or sorted(session.state["vgs"]):
        vg = _report_vg(session, vg_name)
        if vg is None:
            failed = True
            continue
        rows.append(_vg_row(session, vg))
    _emit_report(session, args, "vg", rows, columns)
    if failed:
        raise _Fail(EXIT_FAILED)


# -- setup: pvcreate, vgcreate ---------------------------------------------------------


def _device_size(args: _Args, device: str) -> int:
    text = args.last("setphysicalvolumesize")
    if text is not None:
        _, size = _parse_size(text, "--setphysicalvolumesize")
        return size
    with contextlib.suppress(OSError):
        info = os.stat(device)
        if info.st_size:
            return info.st_size
    raise _Fail(EXIT_FAILED, f"No device found for {device}.")


def _cmd_pvcreate(session: _Session, args: _Args) -> None:
    if not args.positionals:
        raise _invalid("pvcreate", "Please enter a physical volume path.")
    for device in args.positionals:
        pv = session.state["pvs"].get(device)
        if pv is not None and pv["vg"]:
            raise _Fail(EXIT_FAILED, f'Can\'t initialize physical volume "{device}" of '
                                     f'volume group "{pv["vg"]}" without -ff',
                        f"{device}: physical volume not initialized.")
        size = _device_size(args, device)
        if size < PV_METADATA_BYTES + 2 * MiB:
            raise _Fail(EXIT_FAILED, f"{device}: Minimum PV size is 2.00 MiB beyond "
                                     "metadata.")
        session.state["pvs"][device] = {"size": size, "vg": None, "uuid": _lvm_uuid()}
        session.dirty = True
        session.out.print(f'Physical volume "{device}" successfully created.')


def _cmd_vgcreate(session: _Session, args: _Args) -> None:
    if len(args.positionals) < 2:
        raise _invalid("vgcreate", "Please provide volume group name and physical volumes")
    name, devices = args.positionals[0], args.positionals[1:]
    if not _valid_name(name):
        raise _invalid("vgcreate", "Name contains invalid character, valid set includes: "
                                   "[a-zA-Z0-9.-_+].",
                       f'New volume group name "{name}" is invalid.')
    extent = DEFAULT_EXTENT_SIZE
    text = args.last("physicalextentsize")
    if text is not None:
        _, extent = _parse_size(text, "--physicalextentsize")
        if extent < 1024 or extent & (extent - 1):
            raise _Fail(EXIT_INVALID, "Physical extent size must be a power of 2.")
    if name in session.state["vgs"]:
        raise _Fail(EXIT_FAILED, f"A volume group called {name} already exists.")
    extent_count = 0
    for device in devices:
        pv = session.state["pvs"].get(device)
        if pv is None:
            _cmd_pvcreate(session, _Args("pvcreate", dict(args.values), [device]))
            pv = session.state["pvs"][device]
        elif pv["vg"]:
            raise _Fail(EXIT_FAILED, f'Physical volume "{device}" is already in volume '
                                     f'group "{pv["vg"]}"')
        extent_count += (pv["size"] - PV_METADATA_BYTES) // extent
    if extent_count <= 0:
        raise _Fail(EXIT_FAILED, "Volume group has no usable extents.")
    for device in devices:
        session.state["pvs"][device]["vg"] = name
    session.state["vgs"][name] = {
        "name": name, "uuid": _lvm_uuid(), "extent_size": extent,
        "extent_count": extent_count, "pvs": list(devices), "lvs": {},
        "pmspare_extents": 0, "seqno": 1,
    }
    session.dirty = True
    session.out.print(f'Volume group "{name}" successfully created')


# -- lvm <subcommand> ------------------------------------------------------------------


_COMMANDS = {
    "lvs": _cmd_lvs, "vgs": _cmd_vgs, "lvcreate": _cmd_lvcreate,
    "lvextend": _cmd_lvextend, "lvremove": _cmd_lvremove, "lvrename": _cmd_lvrename,
    "lvchange": _cmd_lvchange, "pvcreate": _cmd_pvcreate, "vgcreate": _cmd_vgcreate,
    "lvconvert": _cmd_lvconvert,
}
def _dispatch(session: _Session, argv: list[str]) -> int:
    name = os.path.basename(argv[0])
    rest = argv[1:]
    if name == "dd":
        _cmd_dd(session, rest)
        return EXIT_OK
    if name == "lvm":
        if not rest:
            raise _Fail(EXIT_NO_SUCH_CMD, "No such command.  Try 'lvm help'.")
        name, rest = rest[0], rest[1:]
        if name == "segtypes":
            session.out.raw("".join(f"  {segtype}\n" for segtype in SEGTYPES))
            return EXIT_OK
        if name == "version":
            session.out.raw(LVM_VERSION_TEXT)
            return EXIT_OK
        if name not in _COMMANDS:
            raise _Fail(EXIT_NO_SUCH_CMD, f"No such command '{name}'.  Try 'help'.")
    if "--version" in rest:
        session.out.raw(LVM_VERSION_TEXT)
        return EXIT_OK
    handler = _COMMANDS[name]
    handler(session, _parse_args(name, rest))
    return EXIT_OK


#: commands that only report (``lvm version`` and ``lvm segtypes`` by subcommand)
_READ_ONLY_COMMANDS: Final = frozenset({"lvs", "vgs", "version", "segtypes"})


def _command_name(argv: Sequence[str]) -> str:
    name = os.path.basename(argv[0]) if argv else ""
    if name == "lvm" and len(argv) > 1:
        return argv[1]
    return name


# ---------------------------------------------------------------------------
# The simulator


class LVMSimulator:
    """An LVM CLI on simulated state; call it as an ``LVMExecutor`` runner.

    ``state_file=None`` keeps the state in memory (one process); a path keeps
    it in a JSON file that several processes may share, each command holding
    an exclusive lock on ``<state_file>.lock``.
    """

    def __init__(self, state_file: str | os.PathLike[str] | None = None):
        self.state_file = os.fspath(state_file) if state_file is not None else None
        self._memory = _empty_state()
        self._thread_lock = threading.RLock()
        self._count_lock = threading.Lock()
        self.commands_run = 0
        self.last_env: dict[str, str] | None = None

    # -- the runner seam -------------------------------------------------------

    def __call__(self, argv: list[str], env: dict[str, str],
                 timeout_s: float) -> CommandResult:
        """Run one emulated LVM command (the executor's ``Runner`` signature)."""
        argv = list(argv)
        with self._count_lock:
            self.commands_run += 1
            self.last_env = dict(env)
        name = os.path.basename(argv[0]) if argv else ""
        if name not in ("lvm", "dd") and name not in _COMMANDS:
            return CommandResult(argv, 127, "", f"{argv[0] if argv else ''}: command not found\n")
        try:
            with self._transaction(argv) as state:
                return self._run(state, argv, timeout_s)
        except StateFileError as exc:  # LVM's way: the command fails, nothing changes
            return CommandResult(argv, EXIT_FAILED, "", f"  {exc}\n")

    def _run(self, state: dict[str, Any], argv: list[str], timeout_s: float) -> CommandResult:
        """One command on ``state`` (held under the lock), its fault applied if any."""
        fault = self._take_fault(state, argv)
        if fault is not None and fault.get("delay_s") is not None:
            # slow, then run as usual, unless the runner stops it first
            time.sleep(min(fault["delay_s"], timeout_s))
            if fault["delay_s"] >= timeout_s:
                raise LVMTimeoutError(argv, timeout_s)
            fault = None
        if fault is not None and not (fault["fail_after_apply"] or
                                      fault["malformed_output"]):
            if fault["hang"]:
                time.sleep(timeout_s)
                raise LVMTimeoutError(argv, timeout_s)
            return CommandResult(argv, fault["exit_code"], fault["stdout"],
                                 fault["stderr"])
        # Reports change nothing, so they read the state itself; a change
        # works on a copy that replaces the state only once it succeeded.
        read_only = _command_name(argv) in _READ_ONLY_COMMANDS
        scratch = state if read_only else copy.deepcopy(state)
        out = _Output()
        session = _Session(scratch, out)
        try:
            code = _dispatch(session, argv)
        except _Fail as exc:
            for line in exc.lines:
                out.error(line)
            code = exc.exit_code
        if session.dirty and not read_only:
            # Commands fail before changing anything, except multi-LV
            # lvremove/lvchange, which (like LVM) keep what they did.
            state.clear()
            state.update(scratch)
        result = CommandResult(argv, code, out.stdout, out.stderr)
        if fault is None:
            return result
        if fault["malformed_output"]:
            text = result.stdout
            cut = text[: len(text) // 2] if text.strip() else '  {\n      "report": [\n'
            return CommandResult(argv, code, cut, result.stderr)
        if fault["hang"]:
            time.sleep(timeout_s)
            raise LVMTimeoutError(argv, timeout_s)
        return CommandResult(argv, fault["exit_code"], result.stdout,
                             result.stderr + fault["stderr"])

    def run(self, argv: Sequence[str], *, timeout_s: float = 3600.0) -> CommandResult:
        """Run one command as an operator would; never raises on failure."""
        if isinstance(argv, str):
            raise TypeError("argv must be a list of strings")
        return self(list(argv), dict(os.environ), timeout_s)

    def executor(self, **kwargs: Any) -> LVMExecutor:
        """An ``LVMExecutor`` that runs its commands on this simulator."""
        return LVMExecutor(runner=self, **kwargs)

    # -- helpers for tests and demos ------------------------------------------------

    def create_vg(self, name: str, size_bytes: int,
                  extent_size_bytes: int = DEFAULT_EXTENT_SIZE) -> None:
        """Create VG ``name`` of ``size_bytes`` (rounded down to whole extents).

        Done through pvcreate/vgcreate on a pseudo device ``/dev/sim/<name>``.
        """
        if size_bytes < extent_size_bytes:
            raise SimulatorError("a VG needs at least one extent")
        device = f"/dev/sim/{name}"
        pv_bytes = size_bytes // SECTOR * SECTOR + PV_METADATA_BYTES
        for argv in (["pvcreate", "--setphysicalvolumesize", f"{pv_bytes}b", device],
                     ["vgcreate", "--physicalextentsize", f"{extent_size_bytes}b",
                      name, device]):
            result = self.run(argv)
            if result.exit_code:
                raise SimulatorError(f"{' '.join(argv)} failed: {result.stderr.strip()}")

    def write_data(self, vg: str, lv: str, nbytes: int) -> None:
        """Write ``nbytes`` of new data to thin LV ``vg/lv``: pool usage grows.

        Rounded up to the pool's chunk size and capped at the LV's size. An
        inactive LV cannot be written; a full pool raises after filling up.
        """
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise SimulatorError(f"nbytes must be an int >= 0, got {nbytes!r}")
        with self._transaction() as state:
            vg_rec = state["vgs"].get(vg)
            if vg_rec is None or lv not in vg_rec["lvs"]:
                raise SimulatorError(f"no logical volume {vg}/{lv}")
            rec = vg_rec["lvs"][lv]
            if not rec["active"]:
                raise SimulatorError(f"{vg}/{lv} is not active; it cannot be written")
            if rec["kind"] != "thin":  # a thick LV owns its extents: only its data changes
                size = rec["extents"] * vg_rec["extent_size"]
                end = max([0] + [b for _, b in rec.get("data", [])])
                rec["data"] = _without(rec.get("data", []), end, size) + \
                    ([[end, min(size, end + nbytes)]] if nbytes and end < size else [])
                return
            if _map_thin(_Session(state, _Output()), vg_rec, rec, nbytes):
                raise SimulatorError(f"thin pool {vg}/{rec['pool']} is out of data space")

    def wipes(self) -> list[dict[str, Any]]:
        """Every ``dd`` of zeros run so far: ``{"device": "/dev/vg/lv", "bytes": n}``."""
        with self._transaction() as state:
            return copy.deepcopy(state.get("wipes", []))

    def data_bytes(self, vg: str, lv: str) -> int:
        """Bytes of thick LV ``vg/lv`` holding data written by ``write_data`` and not
        zeroed since."""
        with self._transaction() as state:
            rec = state["vgs"].get(vg, {}).get("lvs", {}).get(lv)
            if rec is None:
                raise SimulatorError(f"no logical volume {vg}/{lv}")
            return sum(b - a for a, b in rec.get("data", []))

    def set_open(self, vg: str, lv: str, is_open: bool = True) -> None:
        """Mark LV ``vg/lv`` open (held by a process, e.g. a target exporting it): its
        ``lv_attr`` shows ``o`` and ``lvchange -an`` refuses, as LVM does."""
        with self._transaction() as state:
            rec = state["vgs"].get(vg, {}).get("lvs", {}).get(lv)
            if rec is None:
                raise SimulatorError(f"no logical volume {vg}/{lv}")
            rec["open"] = bool(is_open)

    def inject(self, command: str, *, exit_code: int = EXIT_FAILED,
               stderr: str | None = None, stdout: str = "", times: int | None = 1,
               hang: bool = False, malformed_output: bool = False,
               fail_after_apply: bool = False, argv_contains: str | None = None,
               delay_s: float | None = None) -> None:
        """Make the next ``times`` runs of ``command`` fail (None: every run).

        ``command`` is the LVM command (``lvcreate``, ``lvs``; ``segtypes`` for
        ``lvm segtypes``). Default: exit code 5 with an LVM-style message and
        nothing applied. ``hang``: sleeps the runner's timeout, then raises
        LVMTimeoutError. ``malformed_output``: the command runs, its stdout is
        cut in half. ``fail_after_apply``: the change is applied, then the
        command exits ``exit_code`` (a crash after lvcreate succeeded).
        ``delay_s``: a slow command, not a failing one: it waits that many
        seconds (holding the lock, as LVM holds its VG lock), then runs as
        usual; one slower than the runner's timeout is stopped unapplied, as
        with ``hang``. ``argv_contains``: only runs whose argv has this item.
        """
        _check_times(times)
        if delay_s is not None and (
                isinstance(delay_s, bool) or not isinstance(delay_s, (int, float))
                or not math.isfinite(delay_s) or delay_s < 0
                or hang or malformed_output or fail_after_apply):
            raise SimulatorError(f"delay_s must be a finite number of seconds >= 0, with "
                                 f"no other fault; got {delay_s!r}")
        if stderr is None:
            stderr = (f"  Internal error: injected failure of {command} "
                      f"(exit code {exit_code}).\n")
        fault = {"command": command, "exit_code": exit_code, "stderr": stderr,
                 "stdout": stdout, "times": times, "hang": hang,
                 "malformed_output": malformed_output,
                 "fail_after_apply": fail_after_apply, "argv_contains": argv_contains,
                 "delay_s": delay_s}
        with self._transaction() as state:
            state["faults"].append(fault)

    def inject_state_error(self, operation: str, *, command: str | None = None,
                           times: int | None = 1, argv_contains: str | None = None) -> None:
        """Make reading or writing the state file fail with EIO for the next ``times``
        runs of ``command`` (None: any command; ``times`` None: every run).

        ``operation`` is ``"read"`` (the command cannot load the state) or
        ``"write"`` (it cannot save what it changed; a command that changes
        nothing writes nothing and is not failed). The command fails as LVM
        does when its metadata cannot be read or written: exit code 5, a line
        naming the file, nothing applied, the file's bytes unchanged. These
        faults live beside the state, in ``<state file>.io-faults`` (a file
        that cannot be written cannot record its own faults either), and apply
        to LVM commands only, never to the helpers (``state()``, ``inject``).
        """
        if operation not in ("read", "write"):
            raise SimulatorError(f"operation must be 'read' or 'write', got {operation!r}")
        _check_times(times)
        if self.state_file is None:
            raise SimulatorError("a simulator without a state file has no file to fail")
        fault = {"operation": operation, "command": command, "times": times,
                 "argv_contains": argv_contains}
        with self._thread_lock, self._locked():
            self._save_io_faults(self._load_io_faults() + [fault])

    def clear_faults(self) -> None:
        """Remove every injected fault, state file I/O errors included."""
        with self._transaction() as state:
            state["faults"] = []
            if self.state_file is not None:
                self._save_io_faults([])

    def state(self) -> dict[str, Any]:
        """A copy of the whole simulated state (for assertions and debugging)."""
        with self._transaction() as state:
            return copy.deepcopy(state)

    # -- internals ----------------------------------------------------------------------

    @staticmethod
    def _take_fault(state: dict[str, Any], argv: list[str]) -> dict[str, Any] | None:
        return _take_matching(state["faults"], argv)

    def _io_fault(self, operation: str, argv: list[str] | None) -> bool:
        """Whether this ``operation`` on the state file fails for the command ``argv``."""
        if argv is None:
            return False
        faults = self._load_io_faults()
        if _take_matching(faults, argv, operation=operation) is None:
            return False
        self._save_io_faults(faults)  # counted down, or removed once used up
        return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """This process holds the exclusive lock on ``<state file>.lock``."""
        assert self.state_file is not None
        lock_path = self.state_file + ".lock"
        try:
            lock_file = open(lock_path, "a+")
        except OSError as exc:
            raise StateFileError(f"Error locking simulator state {lock_path}: "
                                 f"{exc.strerror}.") from None
        with lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _transaction(self, argv: list[str] | None = None) -> Iterator[dict[str, Any]]:
        """The state, under the lock; written back if it changed, even on an error.

        ``argv``: the LVM command this is for, to which the state file's I/O
        faults apply (helpers pass none).
        """
        with self._thread_lock:
            if self.state_file is None:
                yield self._memory
                return
            with self._locked():
                state = self._load(fail=self._io_fault("read", argv))
                before = json.dumps(state, sort_keys=True)
                try:
                    yield state
                finally:
                    # Saved even when the command then raises (a hang
                    # after applying, a full pool): LVM commits as it goes.
                    if json.dumps(state, sort_keys=True) != before:
                        self._save(state, fail=self._io_fault("write", argv))

    def _load(self, *, fail: bool = False) -> dict[str, Any]:
        assert self.state_file is not None
        try:
            if fail:
                raise OSError(errno.EIO, os.strerror(errno.EIO), self.state_file)
            with open(self.state_file, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            return _empty_state()
        except OSError as exc:
            raise StateFileError(f"Error reading simulator state {self.state_file}: "
                                 f"{exc.strerror}.") from None
        except UnicodeDecodeError as exc:
            raise StateFileError(f"state file {self.state_file} is not JSON: {exc}") from None
        if not text.strip():
            return _empty_state()
        try:
            state = json.loads(text)
        except ValueError as exc:
            raise StateFileError(f"state file {self.state_file} is not JSON: {exc}") from None
        if not (isinstance(state, dict) and state.get("version") == STATE_VERSION
                and isinstance(state.get("pvs"), dict) and isinstance(state.get("vgs"), dict)
                and isinstance(state.get("faults"), list)):
            raise StateFileError(f"state file {self.state_file} is not a simulator state "
                                 f"(version {STATE_VERSION})")
        return state

    def _save(self, state: dict[str, Any], *, fail: bool = False) -> None:
        assert self.state_file is not None
        _write_json(self.state_file, state, fail=fail)

    def _load_io_faults(self) -> list[dict[str, Any]]:
        assert self.state_file is not None
        path = self.state_file + ".io-faults"
        try:
            with open(path, encoding="utf-8") as handle:
                faults = json.load(handle)
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise StateFileError(f"Error reading simulator faults {path}: {exc}") from None
        if not isinstance(faults, list):
            raise StateFileError(f"Error reading simulator faults {path}: not a list")
        return faults

    def _save_io_faults(self, faults: list[dict[str, Any]]) -> None:
        assert self.state_file is not None
        path = self.state_file + ".io-faults"
        if faults:
            _write_json(path, faults)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _check_times(times: int | None) -> None:
    if times is not None and (isinstance(times, bool) or not isinstance(times, int)
                              or times < 1):
        raise SimulatorError("times must be None or >= 1")


def _take_matching(faults: list[dict[str, Any]], argv: list[str],
                   **wanted: Any) -> dict[str, Any] | None:
    """The first of ``faults`` for this command (and ``wanted`` values), counted as
    used in place: its ``times`` goes down, and it is removed once used up."""
    name = _command_name(argv)
    for index, fault in enumerate(faults):
        if fault["command"] not in (name, None) or \
                any(fault.get(key) != value for key, value in wanted.items()):
            continue
        if fault["argv_contains"] is not None and fault["argv_contains"] not in argv:
            continue
        if fault["times"] is not None:
            fault["times"] -= 1
            if fault["times"] <= 0:
                del faults[index]
        return dict(fault)
    return None


def _write_json(path: str, document: Any, *, fail: bool = False) -> None:
    """Replace ``path`` with ``document`` at once, or leave it as it was (StateFileError)."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".lvmsim-", dir=os.path.dirname(os.path.abspath(path)))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1)
            handle.write("\n")
            if fail:
                raise OSError(errno.EIO, os.strerror(errno.EIO), path)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise StateFileError(f"Error writing simulator state {path}: {exc.strerror}.") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


# ---------------------------------------------------------------------------
# Command line: act as the operator on a shared state file


def _parse_bytes(text: str) -> int:
    sign, value = _parse_size(text, "size")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lvm_driver.simulator --state FILE <lvm command...>``."""
    args = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: python -m lvm_driver.simulator --state FILE COMMAND [ARGS...]\n"
             "  COMMAND: an LVM command (lvs, vgs, lvcreate, lvextend, lvremove,\n"
             "  lvrename, lvchange, pvcreate, vgcreate, lvm segtypes|version), or\n"
             "  sim-create-vg NAME SIZE [EXTENT_SIZE] | sim-write VG/LV SIZE |\n"
             "  sim-clear-faults   (sizes like 10G, 512M, 4096b)\n")
    if len(args) < 3 or args[0] != "--state":
        sys.stderr.write(usage)
        return 2
    simulator = LVMSimulator(args[1])
    command = args[2:]
    try:
        if command[0] == "sim-create-vg" and len(command) in (3, 4):
            extent = _parse_bytes(command[3]) if len(command) == 4 else DEFAULT_EXTENT_SIZE
            simulator.create_vg(command[1], _parse_bytes(command[2]), extent)
            return 0
        if command[0] == "sim-write" and len(command) == 3:
            vg_name, _, lv_name = command[1].partition("/")
            simulator.write_data(vg_name, lv_name, _parse_bytes(command[2]))
            return 0
        if command[0] == "sim-clear-faults" and len(command) == 1:
            simulator.clear_faults()
            return 0
        if command[0].startswith("sim-"):
            sys.stderr.write(usage)
            return 2
        result = simulator.run(command)
    except _Fail as exc:
        sys.stderr.write("".join(f"  {line}\n" for line in exc.lines))
        return exc.exit_code
    except (SimulatorError, LVMTimeoutError) as exc:
        sys.stderr.write(f"lvm_driver.simulator: {exc}\n")
        return 1
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
