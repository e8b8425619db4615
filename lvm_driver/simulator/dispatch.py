"""The command table: every LVM command the simulator emulates, in one place.

Each row names the function that runs a command and the options it takes;
adding a command is one row here plus its module. ``execute`` runs one
command line on the state: a change works on a copy that replaces the state
only once the command succeeded, as LVM commits its metadata.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from lvm_driver.run.executor import CommandResult
from lvm_driver.simulator.args import (
    COMMON_OPTIONS, REPORT_OPTIONS, Args, command_name, opts, parse_args)
from lvm_driver.simulator.dd import cmd_dd
from lvm_driver.simulator.errors import EXIT_NO_SUCH_CMD, EXIT_OK, Fail
from lvm_driver.simulator.lv_change import (cmd_lvchange, cmd_lvconvert, cmd_lvextend,
                                            cmd_lvremove, cmd_lvrename)
from lvm_driver.simulator.lv_create import cmd_lvcreate
from lvm_driver.simulator.pv_vg import cmd_pvcreate, cmd_vgcreate, cmd_vgextend
from lvm_driver.simulator.reports import cmd_lvdisplay, cmd_lvs, cmd_pvs, cmd_vgs
from lvm_driver.simulator.session import Output, Session

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


@dataclass(frozen=True)
class Command:
    """One emulated LVM command: the function that runs it and its option table."""

    run: Callable[[Session, Args], None]
    options: dict[str, tuple[str, bool]]


COMMANDS: Final[dict[str, Command]] = {
    "lvs": Command(cmd_lvs, {**COMMON_OPTIONS, **REPORT_OPTIONS, **opts("-a --all")}),
    # Cinder's LVM code asks ``lvdisplay -C`` for single columns: the lvs report
    "lvdisplay": Command(cmd_lvdisplay, {**COMMON_OPTIONS, **REPORT_OPTIONS,
                                         **opts("-C --columns", "-a --all")}),
    "vgs": Command(cmd_vgs, {**COMMON_OPTIONS, **REPORT_OPTIONS}),
    "pvs": Command(cmd_pvs, {**COMMON_OPTIONS, **REPORT_OPTIONS}),
    "lvcreate": Command(cmd_lvcreate, {**COMMON_OPTIONS, **opts(
        "-L --size=", "-l --extents=", "-V --virtualsize=", "-n --name=", "-T --thin",
        "--thinpool=", "--type=", "-s --snapshot", "-k --setactivationskip=",
        "-K --ignoreactivationskip", "-a --activate=", "--addtag=", "-Z --zero=",
        "-W --wipesignatures=", "--poolmetadatasize=", "-c --chunksize=",
        "--poolmetadataspare=")}),
    "lvextend": Command(cmd_lvextend, {**COMMON_OPTIONS, **opts(
        "-L --size=", "-l --extents=", "-r --resizefs")}),
    "lvremove": Command(cmd_lvremove, dict(COMMON_OPTIONS)),
    "lvrename": Command(cmd_lvrename, dict(COMMON_OPTIONS)),
    "lvchange": Command(cmd_lvchange, {**COMMON_OPTIONS, **opts(
        "-a --activate=", "-K --ignoreactivationskip", "-k --setactivationskip=",
        "--addtag=", "--deltag=")}),
    "lvconvert": Command(cmd_lvconvert, {**COMMON_OPTIONS, **opts("--merge")}),
    "pvcreate": Command(cmd_pvcreate, {**COMMON_OPTIONS, **opts("--setphysicalvolumesize=")}),
    "vgcreate": Command(cmd_vgcreate, {**COMMON_OPTIONS, **opts("-s --physicalextentsize=")}),
    "vgextend": Command(cmd_vgextend, {**COMMON_OPTIONS, **opts("--setphysicalvolumesize=")}),
}
#: commands that only report (``lvm version`` and ``lvm segtypes`` by subcommand)
READ_ONLY_COMMANDS: Final = frozenset({"lvs", "lvdisplay", "vgs", "pvs", "version",
                                        "segtypes"})
#: tools that are not LVM but run on its LVs (their own arguments, no ``lvm`` form)
OTHER_TOOLS: Final[dict[str, Callable[[Session, list[str]], None]]] = {"dd": cmd_dd}


def _dispatch(session: Session, argv: list[str]) -> int:
    """Run ``argv`` (``lvs ...``, ``lvm lvs ...`` or ``dd ...``) on ``session``; its
    exit code."""
    name = os.path.basename(argv[0])
    rest = argv[1:]
    if name in OTHER_TOOLS:
        OTHER_TOOLS[name](session, rest)
        return EXIT_OK
    if name == "lvm":
        if not rest:
            raise Fail(EXIT_NO_SUCH_CMD, "No such command.  Try 'lvm help'.")
        name, rest = rest[0], rest[1:]
        if name == "segtypes":
            session.out.raw("".join(f"  {segtype}\n" for segtype in SEGTYPES))
            return EXIT_OK
        if name == "version":
            session.out.raw(LVM_VERSION_TEXT)
            return EXIT_OK
        if name not in COMMANDS:
            raise Fail(EXIT_NO_SUCH_CMD, f"No such command '{name}'.  Try 'help'.")
    if "--version" in rest:
        session.out.raw(LVM_VERSION_TEXT)
        return EXIT_OK
    command = COMMANDS[name]
    command.run(session, parse_args(name, rest, command.options))
    return EXIT_OK


def execute(state: dict[str, Any], argv: list[str]) -> CommandResult:
    """Run the LVM command ``argv`` on ``state`` (held under the lock); what it printed."""
    # Reports change nothing, so they read the state itself; a change
    # works on a copy that replaces the state only once it succeeded.
    read_only = command_name(argv) in READ_ONLY_COMMANDS
    scratch = state if read_only else copy.deepcopy(state)
    out = Output()
    session = Session(scratch, out)
    try:
        code = _dispatch(session, argv)
    except Fail as exc:
        for line in exc.lines:
            out.error(line)
        code = exc.exit_code
    if session.dirty and not read_only:
        # Commands fail before changing anything, except multi-LV
        # lvremove/lvchange, which (like LVM) keep what they did.
        state.clear()
        state.update(scratch)
    return CommandResult(argv, code, out.stdout, out.stderr)
