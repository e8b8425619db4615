"""The attack suite of the unprivileged driver: (id, what is tried, how) for everything
the ``cinder`` user can send to the root helper (``Helper``), to the privileged
daemon's entrypoints (``Entry``), down the daemon's channel (``Raw``), or as the
daemon's start command (``Start``); ``attempt`` tries one and says whether it was
refused as expected. Placeholders in the rows are filled per host (``fill``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tests.functional.unprivileged_host import (BACKEND, CONFIG, CONTEXT, DECOY_SECTION,
                                                DECOY_VG, GiB, LOG_VICTIM, MiB, REPO,
                                                ROOTWRAP, Host, as_cinder)

@dataclass(frozen=True)
class Helper:
    """``sudo -n oslo-rootwrap /etc/driver-kit/rootwrap.conf <argv>`` as cinder, with
    ``stdin``; refused when oslo-rootwrap says Unauthorized (exit 99). ``bare``: the
    argv goes to sudo as it is (what sudo itself allows)."""
    argv: tuple[str, ...]
    stdin: str = ""
    bare: bool = False


@dataclass(frozen=True)
class Entry:
    """A daemon entrypoint called from the cinder process with these arguments."""
    module: str
    name: str
    kwargs: dict[str, Any]
    section: str = BACKEND
    expect: str = "PrivilegeRefused"


@dataclass(frozen=True)
class Raw:
    """Any Python name sent down the daemon's channel."""
    name: str
    args: tuple[Any, ...] = ()
    expect: str = "NameError"


@dataclass(frozen=True)
class Start:
    """The daemon started by a helper command the caller chose, then an entrypoint."""
    command: str
    then: Entry


T = 120.0  # every entrypoint's timeout_s
#: as oslo.privsep's client names it (rootwrap finds it in exec_dirs: the venv's bin)
PRIVSEP = ("privsep-helper",)
OK_START = ("--config-file", CONFIG, "--privsep_context", CONTEXT)
DD = ("dd", "if=/dev/zero", "count=1048576", "bs=1M", "iflag=count_bytes",
      "oflag=direct", "conv=fdatasync")
ENV = ("env", "LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1")
SHELL = ("env", "HOME=/dev/null", "LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1",
         "LVM_SYSTEM_DIR=/etc/lvm", "lvm")
REPORT = ("--reportformat", "json", "--units", "b", "--nosuffix", "-o", "lv_name")


def _thin(**kwargs: Any) -> dict[str, Any]:
    return {"name": "intruder", "size_bytes": GiB, "pool": "pool", "tags": [],
            "timeout_s": T, **kwargs}


def _read(path: str, offset: int = 0, length: int = 4096) -> dict[str, Any]:
    return {"path": path, "offset": offset, "length": length}


# placeholders, filled per host: {raw} {decoy_pv} {pv} {pvname} {tmp} {vg}
ATTACKS: list[tuple[str, str, Any]] = [
    # -- the root helper, any argv and stdin --------------------------------------
    ("R01", "the old lvm shell, `vgremove` of the decoy VG on stdin",
     Helper(SHELL, stdin=f"vgremove -f {DECOY_VG}\n")),
    ("R02", "bare `lvm` shell, `pvremove` of the decoy PV on stdin",
     Helper(("lvm",), stdin="pvremove -ff -y {decoy_pv}\n")),
    ("R03", "lvm shell, `vgcfgbackup -f` over a root file on stdin",
     Helper(("env", "LC_ALL=C", "lvm"),
            stdin=f"vgcfgbackup -f /etc/driver-kit/victim {DECOY_VG}\n")),
    ("R04", "`lvs` of another VG (the old report filter's argv)",
     Helper((*ENV, "lvs", *REPORT, DECOY_VG))),
    ("R05", "`lvremove --force` of the decoy LV (old filter's argv)",
     Helper((*ENV, "lvremove", "--force", f"{DECOY_VG}/precious"))),
    ("R06", "plain `lvremove -f` of the decoy LV", Helper(("lvremove", "-f", f"{DECOY_VG}/precious"))),
    ("R07", "`lvcreate` in the decoy VG",
     Helper((*ENV, "lvcreate", "--type", "linear", "--size", "4194304b", "--name", "x",
             "--yes", DECOY_VG))),
    ("R08", "`lvrename` of the decoy LV",
     Helper((*ENV, "lvrename", DECOY_VG, "precious", "stolen"))),
    ("R09", "a snapshot of the decoy LV",
     Helper((*ENV, "lvcreate", "--snapshot", "--setactivationskip", "y", "--name", "copy",
             "--yes", f"{DECOY_VG}/precious"))),
    ("R10", "`pvs` with LVM_SYSTEM_DIR=<cinder's dir> (lvm.conf logging over a root file)",
     Helper((*ENV, "LVM_SYSTEM_DIR={tmp}/lvmconf", "pvs", "--readonly", "--reportformat",
             "json", "-o", "pv_name"))),
    ("R11", "`lvs --config` naming thin_check_executable",
     Helper((*ENV, "lvs", "--config", "global/thin_check_executable=/usr/bin/touch",
             *REPORT, "{vg}"))),
    ("R12", "`vgcfgbackup -f` over a root file", Helper(("vgcfgbackup", "-f",
                                                         "/etc/driver-kit/victim", DECOY_VG))),
    ("R13", "`dd` zeros over the raw decoy device", Helper((*DD[:2], "of={raw}", *DD[2:]))),
    ("R14", "`dd` to /dev/./<raw device>", Helper((*DD[:2], "of=/dev/./{rawname}", *DD[2:]))),
    ("R15", "`dd` to /dev/../<cinder's symlink to the raw device>",
     Helper((*DD[:2], "of=/dev/..{tmp}/raw-link", *DD[2:]))),
    ("R16", "`dd` to a /dev/shm symlink to the raw device",
     Helper((*DD[:2], "of=/dev/shm/dk-raw-link", *DD[2:]))),
    ("R17", "`dd` to /dev/mapper/<decoy LV>",
     Helper((*DD[:2], f"of=/dev/mapper/{DECOY_VG}-precious", *DD[2:]))),
    ("R18", "`dd` to /dev/<decoy VG>/<LV> (the old wipe filter's form)",
     Helper((*DD[:2], f"of=/dev/{DECOY_VG}/precious", *DD[2:]))),
    ("R19", "a shell", Helper(("sh", "-c", "id > /etc/driver-kit/victim"))),
    ("R20", "privsep-helper with another context (os-brick's)",
     Helper((*PRIVSEP, "--config-file", CONFIG, "--privsep_context",
             "os_brick.privileged.default", "--privsep_sock_path", "{tmp}/s"))),
    ("R21", "privsep-helper with a config file outside /etc (cinder's own)",
     Helper((*PRIVSEP, "--config-file", "{tmp}/evil.conf", "--privsep_context", CONTEXT,
             "--privsep_sock_path", "{tmp}/s"))),
    ("R22", "privsep-helper with /etc/../<cinder's config>",
     Helper((*PRIVSEP, "--config-file", "/etc/..{tmp}/evil.conf", "--privsep_context",
             CONTEXT, "--privsep_sock_path", "{tmp}/s"))),
    ("R23", "privsep-helper with --config-dir <cinder's dir>",
     Helper((*PRIVSEP, "--config-dir", "{tmp}", "--privsep_context", CONTEXT,
             "--privsep_sock_path", "{tmp}/s"))),
    ("R24", "privsep-helper with an extra --log-file over a root file",
     Helper((*PRIVSEP, *OK_START, "--privsep_sock_path", "{tmp}/s", "--log-file",
             LOG_VICTIM))),
    ("R25", "privsep-helper reading /etc/shadow as its config (its parse error would "
            "print it)",
     Helper((*PRIVSEP, "--config-file", "/etc/shadow", "--privsep_context", CONTEXT,
             "--privsep_sock_path", "{tmp}/s"))),
    ("R26", "privsep-helper with a second, cinder-owned config file under /etc",
     Helper((*PRIVSEP, *OK_START[:2], "--config-file", "/etc/driver-kit/cinder-owned.conf",
             *OK_START[2:], "--privsep_sock_path", "{tmp}/s"))),
    ("R27", "sudo: oslo-rootwrap with cinder's own rootwrap.conf",
     Helper(("sudo", "-n", ROOTWRAP[0], "{tmp}/evil.conf", "lvs"), bare=True)),
    ("R28", "sudo: setting LVM_SYSTEM_DIR for the root helper",
     Helper(("sudo", "-n", "LVM_SYSTEM_DIR={tmp}/lvmconf", *ROOTWRAP, "lvs"), bare=True)),
    ("R29", "sudo -E: keeping cinder's environment (PYTHONPATH) for the root helper",
     Helper(("env", "PYTHONPATH={tmp}", "sudo", "-n", "-E", *ROOTWRAP, "lvs"), bare=True)),
    ("R30", "sudo: privsep-helper without the root helper",
     Helper(("sudo", "-n", *PRIVSEP, *OK_START, "--privsep_sock_path", "{tmp}/s"),
            bare=True)),
    # -- the daemon's entrypoints, crafted arguments ----------------------------
    ("D01", "remove, naming the decoy VG's section (in the file, not enabled)",
     Entry("commands", "remove", {"name": "precious", "timeout_s": T}, section=DECOY_SECTION)),
    ("D02", "remove, section DEFAULT", Entry("commands", "remove",
                                             {"name": "precious", "timeout_s": T},
                                             section="DEFAULT")),
    ("D03", "remove, section backend_defaults",
     Entry("commands", "remove", {"name": "precious", "timeout_s": T},
           section="backend_defaults")),
    ("D04", "remove of <decoy VG>/<LV>",
     Entry("commands", "remove", {"name": f"{DECOY_VG}/precious", "timeout_s": T})),
    ("D05", "remove of ../<decoy VG>/<LV>",
     Entry("commands", "remove", {"name": f"../{DECOY_VG}/precious", "timeout_s": T})),
    ("D06", "remove of the backend's own thin pool",
     Entry("commands", "remove", {"name": "pool", "timeout_s": T})),
    ("D07", "create, 2**64 - 1 bytes (the largest integer the channel carries)",
     Entry("commands", "create_thin", _thin(size_bytes=2 ** 64 - 1))),
    ("D08", "create, -1 bytes", Entry("commands", "create_thin", _thin(size_bytes=-1))),
    ("D09", "create, 1.5 GiB as a float", Entry("commands", "create_thin",
                                                _thin(size_bytes=1.5 * GiB))),
    ("D10", "create, size as text '1g'", Entry("commands", "create_thin", _thin(size_bytes="1g"))),
    ("D11", "create in another pool (the decoy's LV as pool)",
     Entry("commands", "create_thin", _thin(pool="precious"))),
    ("D12", "create, name with a leading '-'", Entry("commands", "create_thin",
                                                     _thin(name="-ffoo"))),
    ("D13", "create, name with a newline", Entry("commands", "create_thin",
                                                 _thin(name="a\nvgremove"))),
    ("D14", "create, name '..'", Entry("commands", "create_thin", _thin(name=".."))),
    ("D15", "create, tag with a newline and --config",
     Entry("commands", "create_thin", _thin(tags=["x\n--config=global/x=1"]))),
    ("D16", "rename of ../<decoy VG>/<LV>",
     Entry("commands", "rename", {"old": f"../{DECOY_VG}/precious", "new": "stolen",
                                  "timeout_s": T})),
    ("D17", "extend of <decoy VG>/<LV>",
     Entry("commands", "extend", {"name": f"{DECOY_VG}/precious", "size_bytes": GiB,
                                  "timeout_s": T})),
    ("D18", "activate of <decoy VG>/<LV>",
     Entry("commands", "activate", {"name": f"{DECOY_VG}/precious", "timeout_s": T})),
    ("D19", "merge of ../<decoy VG>/<LV>",
     Entry("commands", "merge", {"name": f"../{DECOY_VG}/precious", "timeout_s": T})),
    ("D20", "snapshot of the decoy LV",
     Entry("commands", "create_snapshot", {"name": "copy", "origin": f"{DECOY_VG}/precious",
                                           "tags": [], "activate": True, "timeout_s": T})),
    ("D21", "a caller-chosen LVM_SYSTEM_DIR as an extra argument",
     Entry("commands", "report", {"timeout_s": T, "lvm_system_dir": "{tmp}/lvmconf"},
           expect="TypeError")),
    ("D22", "wipe of the decoy LV by its bare name",
     Entry("devices", "zero", {"name": "precious", "nbytes": MiB, "timeout_s": T})),
    ("D23", "wipe of ../../<raw device>",
     Entry("devices", "zero", {"name": "../..{raw}", "nbytes": MiB, "timeout_s": T})),
    ("D24", "wipe of the backend's thin pool",
     Entry("devices", "zero", {"name": "pool", "nbytes": MiB, "timeout_s": T})),
    ("D25", "wipe of a thin volume of the backend (not linear)",
     Entry("devices", "zero", {"name": "victim-thin", "nbytes": MiB, "timeout_s": T})),
    ("D26", "wipe of -1 bytes", Entry("devices", "zero", {"name": "victim-thin", "nbytes": -1,
                                                          "timeout_s": T})),
    ("D27", "read of the decoy VG's PV", Entry("devices", "read_pv_block", _read("{decoy_pv}"))),
    ("D28", "read of the raw device (no PV)", Entry("devices", "read_pv_block", _read("{raw}"))),
    ("D29", "read of /dev/./<the backend's PV>",
     Entry("devices", "read_pv_block", _read("/dev/./{pvname}"))),
    ("D30", "read through cinder's symlink to the decoy PV",
     Entry("devices", "read_pv_block", _read("{tmp}/decoy-pv-link"))),
    ("D31", "read through a /dev/shm symlink", Entry("devices", "read_pv_block",
                                                     _read("/dev/shm/dk-raw-link"))),
    ("D32", "read of the backend's PV in its data area (1 GiB in)",
     Entry("devices", "read_pv_block", _read("{pv}", offset=GiB))),
    ("D33", "read of 2 GiB at once", Entry("devices", "read_pv_block",
                                           _read("{pv}", length=2 * GiB))),
    ("D34", "read at a negative offset", Entry("devices", "read_pv_block",
                                               _read("{pv}", offset=-512, length=512))),
    ("D35", "read of /etc/shadow", Entry("devices", "read_pv_block", _read("/etc/shadow"))),
    ("D36", "read of a path with '..'", Entry("devices", "read_pv_block",
                                              _read("/dev/../dev/{pvname}"))),
    ("D37", "device-mapper status of another pool",
     Entry("devices", "thin_pool_status", {"pool": "precious"})),
    ("D38", "device-mapper status through the decoy's section",
     Entry("devices", "thin_pool_status", {"pool": "precious"}, section=DECOY_SECTION)),
    ("D39", "a function that is no entrypoint: subprocess.check_output",
     Raw("subprocess.check_output", (["id"],))),
    ("D40", "os.system through the channel", Raw("os.system", ("id > /etc/driver-kit/victim",))),
    ("D41", "the daemon's own argv runner (no entrypoint)",
     Raw("lvm_driver.privileged.commands.execute", (None, ["vgremove", "-f", DECOY_VG], 60))),
    ("D42", "the daemon's config loader with cinder's files (no entrypoint)",
     Raw("lvm_driver.privileged.backend.load_from", (["{tmp}/evil.conf"], DECOY_SECTION))),
    ("D43", "a batch of refresh reads through the decoy's section",
     Entry("devices", "read_refresh", {"blocks": [["{decoy_pv}", 0, 4096]], "pools": []},
           section=DECOY_SECTION)),
    ("D44", "a batch of refresh reads past its byte cap (16 MiB of the PV twice)",
     Entry("devices", "read_refresh", {"blocks": [["{pv}", 0, 16 * MiB]] * 2, "pools": []})),
    ("D45", "a batch of 65 refresh reads",
     Entry("devices", "read_refresh", {"blocks": [["{pv}", 0, 512]] * 65, "pools": []})),
    # -- the daemon started with a helper command the caller chose ---------------
    ("S01", "daemon started with cinder's config file (outside /etc)",
     Start(f"sudo {' '.join(ROOTWRAP)} privsep-helper --config-file {{tmp}}/evil.conf",
           Entry("commands", "remove", {"name": "precious", "timeout_s": T},
                 section=DECOY_SECTION))),
    ("S02", "daemon started with a cinder-owned config under /etc (logs to a root file)",
     Start(f"sudo {' '.join(ROOTWRAP)} privsep-helper --config-file "
           "/etc/driver-kit/cinder-owned.conf",
           Entry("commands", "remove", {"name": "precious", "timeout_s": T},
                 section=DECOY_SECTION))),
    ("S03", "daemon started with --config-dir <cinder's dir>",
     Start(f"sudo {' '.join(ROOTWRAP)} privsep-helper --config-dir {{tmp}}",
           Entry("commands", "remove", {"name": "precious", "timeout_s": T},
                 section=DECOY_SECTION))),
]


def fill(value: Any, host: Host) -> Any:
    if isinstance(value, str):
        return value.format(raw=host.raw, rawname=os.path.basename(host.raw),
                            decoy_pv=host.decoy_pv, pv=host.pv,
                            pvname=os.path.basename(host.pv), tmp=host.tmp, vg=host.vg)
    if isinstance(value, (list, tuple)):
        return type(value)(fill(v, host) for v in value)
    if isinstance(value, dict):
        return {k: fill(v, host) for k, v in value.items()}
    return value


def _entry_request(entry: Entry, host: Host) -> dict[str, Any]:
    return {"module": entry.module, "name": entry.name, "args": [entry.section],
            "kwargs": fill(entry.kwargs, host)}


def attempt(how: Any, host: Host) -> tuple[bool, str]:
    """Try one attack as cinder: (refused as expected, what happened)."""
    if isinstance(how, Helper):
        argv = list(fill(how.argv, host))
        done = as_cinder(argv if how.bare else ["sudo", "-n", *ROOTWRAP, *argv],
                         fill(how.stdin, host))
        said = (done.stdout + done.stderr).strip().replace("\n", " ")[-240:]
        leaked = "root:" in done.stdout + done.stderr  # /etc/shadow's first line
        if how.bare:
            refused = done.returncode == 1 and done.stderr.startswith("sudo:")
        else:
            refused = done.returncode == 99 and "Unauthorized command" in done.stderr
        return refused and not leaked, f"exit {done.returncode}: {said}"
    if isinstance(how, Entry):
        reply = host.cinder.ask("entry", **_entry_request(how, host))
    elif isinstance(how, Raw):
        reply = host.cinder.ask("raw", name=how.name, args=list(fill(how.args, host)))
    else:
        reply = host.cinder.ask("helper", command=fill(how.command, host),
                                then={"op": "entry", **_entry_request(how.then, host)})
    if "error" not in reply:
        return False, f"ran: {str(reply['ok'])[:240]}"
    said = f"{reply['error'].rsplit('.', 1)[-1]}: {reply['message'][:200]}"
    if isinstance(how, Start):
        return reply["error"].endswith(("PrivilegeRefused", "FailedToDropPrivileges")), said
    return reply["error"].endswith(how.expect), said


#: rows the root helper lets through, whatever this project's filters say: oslo.rootwrap
#: (wrapper.load_filters) always adds ``CommandFilter privsep-helper root``, so
#: ``privsep-helper`` starts as root with any arguments, as on every Cinder host; its
#: oslo.log then writes wherever --log-file or the config's log_file says, before any
#: check of the driver's daemon. Strict xfails in the rootwrap set-up (they fail the day
#: that changes); refused in the pinned one (test_unprivileged_pinned_realvm.py).
ROOTWRAP_LETS_THROUGH = {"R20", "R21", "R22", "R23", "R24", "R25", "R26"}
KNOWN = ("oslo.rootwrap always allows privsep-helper with any arguments "
         "(wrapper.load_filters): docs/privileges.md, set-up 1; set-up 2 refuses it")


def write_table(rows: list[tuple[str, str, bool, str]]) -> None:
    known = [r for r in rows if r[0] in ROOTWRAP_LETS_THROUGH]
    lines = [f"# Attack suite: {len(rows)} attempts, {sum(1 for r in rows if r[2])} refused; "
             f"{len(known)} through oslo.rootwrap's own privsep-helper filter\n",
             "| id | attempt | refused | what happened |", "|---|---|---|---|"]
    lines += [f"| {i} | {what} | "
              f"{'yes' if ok else 'no (oslo.rootwrap)' if i in ROOTWRAP_LETS_THROUGH else '**NO**'}"
              f" | {said.replace('|', '/')} |" for i, what, ok, said in rows]
    (REPO / "test-results").mkdir(exist_ok=True)
    (REPO / "test-results" / "unprivileged-attacks.md").write_text("\n".join(lines) + "\n")

