"""LVM's rules for LV, VG and tag names, written from lvm(8) and LVM's lvm-string.c.

Kept apart from ``lvm_driver.run.names`` on purpose: the emulator checks the
wrapper, not itself.
"""

from __future__ import annotations

import re

from lvm_driver.simulator.errors import EXIT_INVALID, Fail, invalid, parse_error

_NAME_CHARS = re.compile(r"[A-Za-z0-9+_.-]+")
_TAG_CHARS = re.compile(r"[A-Za-z0-9_+.\-/=!:&#]+")
_RESERVED_PREFIXES = ("pvmove", "snapshot")
_RESERVED_PARTS = ("_cdata", "_cmeta", "_corig", "_cpool", "_cvol", "_wcorig",
                   "_mimage", "_mlog", "_rimage", "_rmeta", "_tdata", "_tmeta",
                   "_vdata", "_imeta", "_iorig", "_pmspare", "_vorigin")


def valid_name(name: str) -> bool:
    return (bool(name) and not name.startswith("-") and name not in (".", "..")
            and bool(_NAME_CHARS.fullmatch(name)) and len(name) <= 127)


def check_new_lv_name(name: str, command: str, *, rename: bool = False) -> None:
    if not valid_name(name):
        if rename:
            raise Fail(EXIT_INVALID, f'New logical volume name "{name}" is invalid')
        raise invalid(command, f'Logical volume name "{name}" is invalid.')
    for prefix in _RESERVED_PREFIXES:
        if name.startswith(prefix):
            raise invalid(command, f'Names starting "{prefix}" are reserved. '
                                   "Please choose a different LV name.")
    for part in _RESERVED_PARTS:
        if part in name:
            raise invalid(command, f'Names including "{part}" are reserved. '
                                   "Please choose a different LV name.")


def check_tags(tags: list[str], option: str) -> list[str]:
    for tag in tags:
        if not _TAG_CHARS.fullmatch(tag):
            raise parse_error(f"Invalid argument for --{option}: {tag}")
    return tags
