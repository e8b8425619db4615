"""The set-up docs/privileges.md recommends: sudo pins privsep-helper's exact argv.

oslo.rootwrap lets ``privsep-helper`` through with any arguments (its own built-in
filter), so under Cinder's rootwrap route the rows ``ROOTWRAP_LETS_THROUGH`` of the
attack suite start a root process with the caller's config, context or log file.
Here the service user's only sudo rule is the daemon's start, pinned with sudo's
anchored regular expression (sudo >= 1.9.10): this context, the root-owned config
file, a socket where oslo.privsep makes one; no oslo-rootwrap at all. The driver
(``[lvm_driver_privileged] helper_command`` in that file) must work through it, and
every attempt of the root-helper side must be refused: each of the suite's root
helper and daemon-start rows, and argv crafted against the rule itself. In the VM
lane (``-m realvm``), on the session's Cinder host (``unprivileged_host``).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.functional.unprivileged_attacks import ATTACKS, Helper, Start, attempt, fill
from tests.functional.unprivileged_host import (CONTEXT, LOG_VICTIM, ROOTWRAP, VENV_BIN,
                                                Cinder, Host, as_cinder, lv_names, root,
                                                sha256, write_config)

pytestmark = pytest.mark.realvm

PINNED_CONFIG = "/etc/driver-kit/pinned.conf"
SUDOERS = Path("/etc/sudoers.d/driver-kit-cinder")
HELPER = f"{VENV_BIN}/privsep-helper"
#: what oslo.privsep appends to helper_command: this context, then a socket in a
#: fresh mkdtemp() directory (``tmp`` + 8 of [a-z0-9_]) of the service's TMPDIR
PINNED_RULE = (f"cinder ALL = (root) NOPASSWD: {HELPER} "
               f"^--config-file /etc/driver-kit/pinned[.]conf "
               f"--privsep_context lvm_driver[.]privileged[.]default "
               f"--privsep_sock_path /tmp/tmp[a-z0-9_]+/privsep[.]sock$")
GOOD = ("--config-file", PINNED_CONFIG, "--privsep_context", CONTEXT,
        "--privsep_sock_path", "/tmp/tmpabcdefgh/privsep.sock")


@dataclasses.dataclass(frozen=True)
class Sudo:
    """``sudo -n <sudo_options> <command> <argv>`` as cinder (``env``: variables set
    before sudo). ``reaches``: sudo's rule lets it through, and privsep-helper itself
    must then refuse it on its command line, starting nothing."""
    argv: tuple[str, ...]
    command: str = HELPER
    sudo_options: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    reaches: bool = False


#: argv crafted against the pinned rule itself
AGAINST_THE_RULE: list[tuple[str, str, Sudo]] = [
    ("P01", "the pinned argv, socket path climbing out with '..'",
     Sudo((*GOOD[:5], "/tmp/tmpabcdefgh/../../etc/driver-kit/privsep.sock"))),
    ("P02", "the pinned argv and a trailing --log-file over a root file",
     Sudo((*GOOD, "--log-file", LOG_VICTIM))),
    ("P03", "a cinder-owned config under /etc instead of the pinned one",
     Sudo(("--config-file", "/etc/driver-kit/cinder-owned.conf", *GOOD[2:]))),
    ("P04", "the pinned config and a second, cinder-owned one",
     Sudo((*GOOD[:2], "--config-file", "/etc/driver-kit/cinder-owned.conf", *GOOD[2:]))),
    ("P05", "os-brick's context (runs any command as root)",
     Sudo((*GOOD[:3], "os_brick.privileged.default", *GOOD[4:]))),
    ("P06", "--config-dir <cinder's dir> before the pinned argv",
     Sudo(("--config-dir", "{tmp}", *GOOD))),
    ("P07", "the pinned argv with cinder's PYTHONPATH kept (sudo -E)",
     Sudo(GOOD, sudo_options=("-E",), env=("PYTHONPATH={tmp}",))),
    ("P08", "the pinned argv with PYTHONPATH set on sudo's command line",
     Sudo(GOOD, sudo_options=("PYTHONPATH={tmp}",))),
    ("P09", "the pinned argv as another user's command (sudo -u nobody)",
     Sudo(GOOD, sudo_options=("-u", "nobody"))),
    ("P10", "the pinned argv with an empty config-file value",
     Sudo(("--config-file", "", *GOOD[2:]))),
    ("P11", "the pinned argv re-split: '--config-file <file>' as one argument (sudo "
            "matches the arguments joined by spaces)",
     Sudo((" ".join(GOOD[:2]), *GOOD[2:]), reaches=True)),
    ("P12", "the pinned argv re-split: the context and the socket option as one argument",
     Sudo((*GOOD[:2], " ".join(GOOD[2:4]), *GOOD[4:]), reaches=True)),
]
#: the attack suite's rows the root helper decides (its daemon-entrypoint rows do not
#: depend on how the daemon was started)
ROOT_HELPER_ROWS = [row for row in ATTACKS if isinstance(row[2], (Helper, Start))]


def _helpers_running() -> list[str]:
    out = root("ps", "-ww", "-eo", "user:12,args", "--no-headings")
    return [line for line in out.splitlines()
            if "privsep-helper" in line and "sudo" not in line]


@pytest.fixture(scope="module")
def pinned(unprivileged_host: Host, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Host]:
    """The Cinder host with cinder's sudo rule replaced by the pinned one, and a driver
    process of its own whose daemon starts through it; cinder's rule back at the end."""
    original = SUDOERS.read_text()
    SUDOERS.write_text("# the pinned set-up of docs/privileges.md (VM lane)\n"
                       "Defaults:cinder !requiretty\n" + PINNED_RULE + "\n")
    side = None
    try:
        root("visudo", "-c", "-q")
        write_config(unprivileged_host.vg, PINNED_CONFIG, extra=(
            f"\n[lvm_driver_privileged]\nhelper_command = sudo -n {HELPER} "
            f"--config-file {PINNED_CONFIG}\n"))
        side = Cinder(tmp_path_factory.mktemp("pinned") / "cinder-side.log",
                      config=PINNED_CONFIG)
        yield dataclasses.replace(unprivileged_host, cinder=side)
    finally:
        if side is not None:
            side.close()
        SUDOERS.write_text(original)
        os.unlink(PINNED_CONFIG)


def test_the_driver_starts_its_daemon_through_the_pinned_rule(pinned: Host):
    assert pinned.cinder.ok("setup") == {"runner": "PrivsepRunner"}
    daemons = [line for line in _helpers_running() if f"--config-file {PINNED_CONFIG}" in line]
    assert daemons and all(line.split()[0] == "root" for line in daemons), daemons
    pinned.cinder.driver("create_volume", "pinned-a", 1)
    assert "pinned-a" in lv_names(pinned.vg)
    refresh = pinned.cinder.ok("refresh")
    assert refresh["stats"]["pools"][0]["backend_state"] == "up"
    pinned.cinder.driver("delete_volume", "pinned-a")
    assert "pinned-a" not in lv_names(pinned.vg)
    # the rule's own form lets nothing else through: sudo lists exactly it
    listed = as_cinder(["sudo", "-n", "-l"]).stdout
    assert "oslo-rootwrap" not in listed and HELPER in listed, listed


@pytest.fixture(scope="module")
def before(pinned: Host) -> dict[str, Any]:
    pinned.cinder.ok("refresh")  # the daemon is up before the first attempt
    return {"untouched": pinned.untouched(), "helpers": len(_helpers_running())}


def _sudo_refused(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode == 1 and done.stderr.startswith("sudo:")


def _try_against_the_rule(how: Sudo, host: Host) -> tuple[bool, str]:
    argv = ["env", *fill(how.env, host), "sudo", "-n", *fill(how.sudo_options, host),
            how.command, *fill(how.argv, host)]
    done = as_cinder(argv)
    said = f"exit {done.returncode}: " + (done.stdout + done.stderr).strip()[-240:]
    if how.reaches:  # privsep-helper's own argument parsing stops it, as root
        return done.returncode == 2 and "unrecognized arguments" in done.stderr, said
    return _sudo_refused(done), said


def _try_suite_row(how: Helper | Start, host: Host) -> tuple[bool, str]:
    if isinstance(how, Start):  # the daemon restarted by the caller's command
        return attempt(how, host)
    argv = list(fill(how.argv, host))
    done = as_cinder(argv if how.bare else ["sudo", "-n", *ROOTWRAP, *argv],
                     fill(how.stdin, host))
    said = f"exit {done.returncode}: " + (done.stdout + done.stderr).strip()[-240:]
    return _sudo_refused(done), said


@pytest.mark.parametrize("row", [pytest.param(row, id=row[0]) for row in
                                 ROOT_HELPER_ROWS + AGAINST_THE_RULE])
def test_every_root_helper_attempt_is_refused(pinned: Host, before: dict[str, Any],
                                              row: tuple[str, str, Any]):
    ident, what, how = row
    log_before = sha256(LOG_VICTIM)
    refused, said = (_try_against_the_rule(how, pinned) if isinstance(how, Sudo)
                     else _try_suite_row(how, pinned))
    assert sha256(LOG_VICTIM) == log_before, f"{ident} wrote root's {LOG_VICTIM}"
    assert len(_helpers_running()) <= before["helpers"], f"{ident} left a root helper"
    assert refused, f"{ident} {what}: not refused: {said}"


def test_after_the_pinned_attempts_nothing_else_changed(pinned: Host, before: dict[str, Any]):
    assert pinned.untouched() == before["untouched"]
    assert pinned.cinder.ok("refresh")["stats"]["pools"][0]["backend_state"] == "up"
