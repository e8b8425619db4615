"""The driver as Cinder runs it: an unprivileged user, root only through the root helper.

In the VM lane (``-m realvm``), on the guest's real VG. ``unprivileged_setup.sh``
makes the guest a Cinder host (user ``cinder``, sudo to ``oslo-rootwrap`` only,
the project's rootwrap filters); the driver runs as ``cinder`` in
``unprivileged_side.py`` and reaches root through ``sudo oslo-rootwrap ...
privsep-helper`` and the driver's privileged daemon. Root's own ``lvs``/``pvs``
checks each step from outside. Then the attack suite (``ATTACKS``): everything the
``cinder`` user can send to the root helper or to the daemon's entrypoints, aimed at
a decoy VG on a second loop device, a decoy raw device of known checksum and
root-owned files; each attempt must be refused and nothing else may change.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

pytestmark = pytest.mark.realvm

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable  # the venv's interpreter, as the guest sees it
VENV_BIN = str(Path(PYTHON).parent)
SETUP = REPO / "tests" / "realvm" / "unprivileged_setup.sh"
SIDE = REPO / "tests" / "functional" / "unprivileged_side.py"
ROOTWRAP = [f"{VENV_BIN}/oslo-rootwrap", "/etc/driver-kit/rootwrap.conf"]
CONFIG = "/etc/driver-kit/driver-kit.conf"
BACKEND = "lvm-unprivileged"
DECOY_SECTION = "decoy"  # a section of the same file, for the decoy VG, not enabled
DECOY_VG = "dkdecoy"
CONTEXT = "lvm_driver.privileged.default"
#: the root-owned file the privsep-helper rows aim their log at (R21-R26, S01-S02)
LOG_VICTIM = "/etc/driver-kit/log-victim"
MiB = 1024 ** 2
GiB = 1024 ** 3
PROGRESS = REPO / "test-results" / "realvm-unprivileged.log"


def _note(line: str) -> None:
    PROGRESS.parent.mkdir(exist_ok=True)
    with open(PROGRESS, "a") as log:
        log.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def root(*argv: str, check: bool = True, stdin: str | None = None) -> str:
    """A command as root (the operator), its output."""
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                          check=False, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} exited {proc.returncode}: {proc.stderr[-800:]}")
    return proc.stdout


def as_cinder(argv: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``argv`` as the ``cinder`` user, from a directory it owns."""
    return subprocess.run(["runuser", "-u", "cinder", "--", *argv], input=stdin,
                          capture_output=True, text=True, check=False, timeout=300,
                          cwd="/var/lib/cinder")


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            digest.update(chunk)
    return digest.hexdigest()


def lv_rows(vg: str) -> list[tuple[str, ...]]:
    """Root's view of ``vg``'s LVs: name, size in bytes, attributes, origin, pool, tags."""
    text = root("lvs", "--noheadings", "--units", "b", "--nosuffix", "--separator", "|",
                "-a", "-o", "lv_name,lv_size,lv_attr,origin,pool_lv,lv_tags", vg)
    return sorted(tuple(part.strip() for part in row.split("|"))
                  for row in text.splitlines() if row.strip())


def lv_names(vg: str) -> set[str]:
    return {row[0] for row in lv_rows(vg) if not row[0].startswith("[")}


def lv_row(vg: str, name: str) -> dict[str, str]:
    for row in lv_rows(vg):
        if row[0] == name:
            return dict(zip(("name", "size", "attr", "origin", "pool", "tags"), row))
    raise AssertionError(f"no LV {vg}/{name}: {lv_rows(vg)}")


def fill(path: str, byte: int, nbytes: int) -> None:
    with open(path, "r+b", buffering=0) as device:
        device.write(bytes([byte]) * nbytes)
        os.fsync(device.fileno())


def head(path: str, nbytes: int) -> bytes:
    return read_at(path, 0, nbytes)


def read_at(path: str, offset: int, nbytes: int) -> bytes:
    """What the device holds, not the page cache: the daemon writes with O_DIRECT
    through another device (the LV), so cached pages of ``path`` would be stale."""
    with open(path, "rb", buffering=0) as device:
        os.posix_fadvise(device.fileno(), offset, nbytes, os.POSIX_FADV_DONTNEED)
        device.seek(offset)
        return device.read(nbytes)


class Cinder:
    """The driver's process, as user ``cinder``: one request, one reply (JSON lines)."""

    def __init__(self, log: Path):
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            ["runuser", "-u", "cinder", "--", PYTHON, str(SIDE), CONFIG, BACKEND,
             "/var/lib/cinder/locks"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            cwd=str(REPO))

    def ask(self, op: str, **request: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the cinder process exited {self.proc.wait()}: "
                                 f"{Path(self.log.name).read_text()[-3000:]}")
        reply = json.loads(line)
        shown = dict(reply, ok={k: v for k, v in reply["ok"].items() if k != "stats"}) \
            if isinstance(reply.get("ok"), dict) else reply
        _note(f"{op} {request} -> {str(shown)[:600]}")
        return reply

    def ok(self, op: str, **request: Any) -> Any:
        reply = self.ask(op, **request)
        assert "error" not in reply, f"{op} {request}: {reply['error']}: " \
                                     f"{reply['message']}\n{reply.get('trace', '')}"
        return reply["ok"]

    def driver(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.ok("driver", method=method, args=list(args), kwargs=kwargs)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@dataclass
class Host:
    vg: str
    pv: str
    decoy_pv: str
    raw: str  # a decoy block device that is no PV
    tmp: Path  # a directory the cinder user owns (its links and files)
    cinder: Cinder
    watched: dict[str, str] = field(default_factory=dict)  # path -> sha256

    def untouched(self) -> dict[str, Any]:
        """What no attempt may change: the decoy VG, every PV, the raw device, the
        watched root-owned files, and the backend's own LVs."""
        pvs = root("pvs", "--noheadings", "-o", "pv_name,vg_name,pv_uuid,pv_size,pv_free")
        return {"decoy_lvs": lv_rows(DECOY_VG), "pvs": sorted(pvs.split("\n")),
                "own_lvs": lv_rows(self.vg),
                "files": {path: sha256(path) for path in [self.raw, *self.watched]}}


def _loop(tmp: Path, name: str, size: int, data: bytes = b"") -> str:
    image = tmp / f"{name}.img"
    with open(image, "wb") as f:
        f.truncate(size)
        f.write(data)
    return root("losetup", "--find", "--show", str(image)).strip()


def _write_config(vg: str) -> None:
    Path(CONFIG).write_text(f"""\
[DEFAULT]
enabled_backends = {BACKEND}

[{BACKEND}]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_backend_name = {BACKEND}
volume_group = {vg}
lvm_thin_pool_name = pool
lvm_create_thin_pool = false
lvm_privilege = privsep
lvm_root_helper = sudo {' '.join(ROOTWRAP)}
lvm_offer_thick = true
volume_clear_size = 16
lvm_command_timeout = 120
max_over_subscription_ratio = 2.0

[{DECOY_SECTION}]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = {DECOY_VG}
lvm_thin_pool_name = precious
""")
    os.chown(CONFIG, 0, grp.getgrnam("cinder").gr_gid)
    os.chmod(CONFIG, 0o640)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    if os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("runs inside the VM lane: tests/realvm/run_in_vm.sh -- .venv/bin/python "
                    "-m pytest tests/functional/test_unprivileged_realvm.py -m realvm")
    _note("set-up")
    root("bash", str(SETUP), PYTHON)
    vg, pv = os.environ["DK_REAL_LVM_VG"], os.environ["DK_REAL_LVM_PV"]
    root("lvremove", "-f", "-y", vg)
    root("lvcreate", "-q", "-T", "-L", "2g", f"{vg}/pool")
    scratch = Path(os.environ.get("DK_REALVM_GUEST_SCRATCH") or tmp_path_factory.mktemp("u"))
    decoy_pv = _loop(scratch, "decoy-pv", 64 * MiB)
    root("pvcreate", "-q", decoy_pv)
    root("vgcreate", "-q", DECOY_VG, decoy_pv)
    root("lvcreate", "-q", "-y", "-L", "8m", "-n", "precious", DECOY_VG)
    fill(f"/dev/{DECOY_VG}/precious", 0x77, MiB)
    raw = _loop(scratch, "decoy-raw", 4 * MiB, os.urandom(4 * MiB))
    cinder = pwd.getpwnam("cinder")
    tmp = Path("/var/lib/cinder/attack")
    tmp.mkdir(exist_ok=True)
    os.chown(tmp, cinder.pw_uid, cinder.pw_gid)
    locks = Path("/var/lib/cinder/locks")
    locks.mkdir(mode=0o700, exist_ok=True)
    os.chown(locks, cinder.pw_uid, cinder.pw_gid)
    _write_config(vg)
    watched = _plant_traps(tmp, raw, decoy_pv)
    side = Cinder(scratch / "cinder-side.log")
    host = Host(vg=vg, pv=pv, decoy_pv=decoy_pv, raw=raw, tmp=tmp, cinder=side,
                watched=watched)
    try:
        yield host
    finally:
        side.close()
        root("lvremove", "-f", "-y", vg, check=False)
        root("vgremove", "-f", "-y", DECOY_VG, check=False)
        for device in (decoy_pv, raw):
            root("losetup", "-d", device, check=False)
        _note("torn down")


def _plant_traps(tmp: Path, raw: str, decoy_pv: str) -> dict[str, str]:
    """What an attacker prepares as ``cinder``: links to devices, an lvm.conf of its
    own, config files; and root-owned files an attack would overwrite."""
    def as_user(*argv: str) -> None:
        done = as_cinder(list(argv))
        assert done.returncode == 0, done.stderr
    victim = Path("/etc/driver-kit/victim")
    victim.write_text("root's file\n")
    Path(LOG_VICTIM).write_text("root's file, aimed at by privsep-helper's log\n")
    as_user("ln", "-sf", raw, str(tmp / "raw-link"))
    as_user("ln", "-sf", decoy_pv, str(tmp / "decoy-pv-link"))
    as_user("ln", "-sf", raw, "/dev/shm/dk-raw-link")
    as_user("mkdir", "-p", str(tmp / "lvmconf"))
    (tmp / "evil.lvm.conf").write_text(
        f'log {{\n file = "{victim}"\n overwrite = 1\n level = 7\n}}\n'
        'global {\n thin_check_executable = "/usr/bin/touch"\n}\n')
    (tmp / "evil.conf").write_text(
        f"[DEFAULT]\nenabled_backends = {DECOY_SECTION}\nlog_file = {LOG_VICTIM}\ndebug = true\n"
        f"[{DECOY_SECTION}]\nvolume_driver = lvm_driver.driver.ThinLVMDriver\n"
        f"volume_group = {DECOY_VG}\nlvm_thin_pool_name = precious\n")
    as_user("cp", str(tmp / "evil.lvm.conf"), str(tmp / "lvmconf" / "lvm.conf"))
    for name in ("evil.lvm.conf", "evil.conf"):
        os.chown(tmp / name, pwd.getpwnam("cinder").pw_uid, -1)
    # a config under /etc that root forgot to take back: the cinder user owns it
    owned = Path("/etc/driver-kit/cinder-owned.conf")
    owned.write_text((tmp / "evil.conf").read_text())
    os.chown(owned, pwd.getpwnam("cinder").pw_uid, -1)
    return {str(victim): "", "/etc/shadow": "", "/etc/driver-kit/rootwrap.conf": "",
            CONFIG: ""}


# ---------------------------------------------------------------------------
# the driver as cinder

def test_the_driver_runs_as_cinder_and_reaches_root_only_through_the_daemon(host: Host):
    who = host.cinder.ok("whoami")
    assert who["uid"] == pwd.getpwnam("cinder").pw_uid != 0
    assert host.cinder.ok("setup") == {"runner": "PrivsepRunner"}
    helpers = root("ps", "-ww", "-eo", "user:12,args", "--no-headers")
    daemons = [line for line in helpers.splitlines()
               if "privsep-helper" in line and CONTEXT in line and "sudo" not in line]
    assert daemons and all(line.split()[0] == "root" for line in daemons), helpers
    assert any(f"--config-file {CONFIG}" in line for line in daemons), daemons


def test_lifecycle_through_the_daemon_as_cinder(host: Host):
    c, vg = host.cinder, host.vg
    c.driver("create_volume", "volume-a", 1)
    row = lv_row(vg, "volume-a")
    assert (row["size"], row["pool"], row["attr"][0]) == (str(GiB), "pool", "V")
    path = c.driver("backend_device_path", "volume-a")
    assert path == f"/dev/{vg}/volume-a"
    fill(path, 0x5A, MiB)
    c.driver("create_snapshot", "snap-a", "volume-a")
    assert lv_row(vg, "snap-a")["origin"] == "volume-a"
    fill(path, 0xA5, MiB)
    c.driver("revert_to_snapshot", "volume-a", "snap-a")
    path = c.driver("backend_device_path", "volume-a")
    assert head(path, MiB) == b"\x5a" * MiB  # the snapshot's data is back
    assert lv_row(vg, "snap-a")["origin"] == "volume-a"  # made anew, same name
    c.driver("create_cloned_volume", "clone-a", "volume-a")
    assert head(c.driver("backend_device_path", "clone-a"), MiB) == b"\x5a" * MiB
    c.driver("extend_volume", "volume-a", 2)
    assert lv_row(vg, "volume-a")["size"] == str(2 * GiB)
    root("lvcreate", "-q", "-T", "-V", "1g", "-n", "operator-thin", f"{vg}/pool")
    c.driver("manage_existing", "volume-m", {"source-name": "operator-thin"})
    assert "volume-m" in lv_names(vg) and "operator-thin" not in lv_names(vg)
    # the thick wipe: data left on the extents must be zero once they are freed
    c.driver("create_volume", "thick-a", 1, extra_specs={"provisioning:type": "thick"})
    start = _first_byte_on_pv(vg, "thick-a", host.pv)
    fill(f"/dev/{vg}/thick-a", 0xAB, 8 * MiB)
    assert read_at(host.pv, start, MiB) == b"\xab" * MiB
    c.driver("delete_volume", "thick-a")
    assert "thick-a" not in lv_names(vg)
    assert read_at(host.pv, start, 16 * MiB).count(0) == 16 * MiB  # volume_clear_size = 16
    for method, name in (("delete_snapshot", "snap-a"), ("delete_volume", "clone-a"),
                         ("delete_volume", "volume-a"), ("delete_volume", "volume-m")):
        c.driver(method, name)
    assert lv_names(vg) == {"pool"}


def _first_byte_on_pv(vg: str, lv: str, pv: str) -> int:
    """Where ``lv``'s first extent starts on ``pv``, in bytes."""
    ranges = root("lvs", "--noheadings", "-o", "seg_pe_ranges", f"{vg}/{lv}").split()
    device, extents = ranges[0].rsplit(":", 1)
    assert os.path.realpath(device) == os.path.realpath(pv), ranges
    pe_start = int(root("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o",
                        "pe_start", pv).strip())
    extent = int(root("vgs", "--noheadings", "--units", "b", "--nosuffix", "-o",
                      "vg_extent_size", vg).strip())
    return pe_start + int(extents.split("-")[0]) * extent


def test_a_refresh_after_an_operators_lvcreate_starts_no_lvm_process(host: Host):
    c, vg = host.cinder, host.vg
    c.ok("refresh")
    c.ok("refresh")
    before = c.ok("refresh")
    assert before["commands"] == 0, before
    root("lvcreate", "-q", "-T", "-V", "1g", "-n", "theirs", f"{vg}/pool")
    after = c.ok("refresh")
    assert "theirs" in after["lvs"]
    assert after["commands"] == 0, after  # the change read through the daemon's fast reads
    assert after["cache"]["misses"] == before["cache"]["misses"] + 1
    assert after["cache"]["parsed"] == before["cache"]["parsed"] + 1
    assert after["cache"]["unparsed"] == before["cache"]["unparsed"]
    pool = after["stats"]["pools"][0]
    assert pool["backend_state"] == "up", pool
    again = c.ok("refresh")
    assert again["commands"] == 0 and again["cache"]["hits"] > after["cache"]["hits"]
    assert again["cache"]["misses"] == after["cache"]["misses"]
    root("lvremove", "-q", "-f", f"{vg}/theirs")


# ---------------------------------------------------------------------------
# the attack suite: (id, what is tried, how); every one must be refused

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


def _fill(value: Any, host: Host) -> Any:
    if isinstance(value, str):
        return value.format(raw=host.raw, rawname=os.path.basename(host.raw),
                            decoy_pv=host.decoy_pv, pv=host.pv,
                            pvname=os.path.basename(host.pv), tmp=host.tmp, vg=host.vg)
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(v, host) for v in value)
    if isinstance(value, dict):
        return {k: _fill(v, host) for k, v in value.items()}
    return value


def _entry_request(entry: Entry, host: Host) -> dict[str, Any]:
    return {"module": entry.module, "name": entry.name, "args": [entry.section],
            "kwargs": _fill(entry.kwargs, host)}


def attempt(how: Any, host: Host) -> tuple[bool, str]:
    """Try one attack as cinder: (refused as expected, what happened)."""
    if isinstance(how, Helper):
        argv = list(_fill(how.argv, host))
        done = as_cinder(argv if how.bare else ["sudo", "-n", *ROOTWRAP, *argv],
                         _fill(how.stdin, host))
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
        reply = host.cinder.ask("raw", name=how.name, args=list(_fill(how.args, host)))
    else:
        reply = host.cinder.ask("helper", command=_fill(how.command, host),
                                then={"op": "entry", **_entry_request(how.then, host)})
    if "error" not in reply:
        return False, f"ran: {str(reply['ok'])[:240]}"
    said = f"{reply['error'].rsplit('.', 1)[-1]}: {reply['message'][:200]}"
    if isinstance(how, Start):
        return reply["error"].endswith(("PrivilegeRefused", "FailedToDropPrivileges")), said
    return reply["error"].endswith(how.expect), said


@pytest.fixture(scope="module")
def suite(host: Host) -> Iterator[dict[str, Any]]:
    """The state nothing may change, taken before the first attempt; the table after."""
    root("lvcreate", "-q", "-T", "-V", "4m", "-n", "victim-thin", f"{host.vg}/pool")
    fill(f"/dev/{host.vg}/victim-thin", 0x3C, MiB)
    host.watched[f"/dev/{host.vg}/victim-thin"] = ""
    host.cinder.ok("refresh")  # the daemon is up before the first attempt
    table: dict[str, Any] = {"before": host.untouched(), "rows": []}
    # the root helper's refusals are separate processes of a few seconds each under
    # TCG: they run four at a time up front (each row then reports its own outcome;
    # the checks after each row and after the suite still see any change)
    early = [row for row in ATTACKS
             if isinstance(row[2], Helper) and row[0] not in ROOTWRAP_LETS_THROUGH]
    with ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = pool.map(lambda row: attempt(row[2], host), early)
        table["early"] = dict(zip([row[0] for row in early], outcomes))
    yield table
    _write_table(table["rows"])


def _write_table(rows: list[tuple[str, str, bool, str]]) -> None:
    known = [r for r in rows if r[0] in ROOTWRAP_LETS_THROUGH]
    lines = [f"# Attack suite: {len(rows)} attempts, {sum(1 for r in rows if r[2])} refused; "
             f"{len(known)} through oslo.rootwrap's own privsep-helper filter\n",
             "| id | attempt | refused | what happened |", "|---|---|---|---|"]
    lines += [f"| {i} | {what} | "
              f"{'yes' if ok else 'no (oslo.rootwrap)' if i in ROOTWRAP_LETS_THROUGH else '**NO**'}"
              f" | {said.replace('|', '/')} |" for i, what, ok, said in rows]
    (REPO / "test-results").mkdir(exist_ok=True)
    (REPO / "test-results" / "unprivileged-attacks.md").write_text("\n".join(lines) + "\n")


def test_the_attack_suite_has_at_least_40_attempts():
    assert len(ATTACKS) - len(ROOTWRAP_LETS_THROUGH) >= 40
    assert len({row[0] for row in ATTACKS}) == len(ATTACKS)


#: rows the root helper lets through, whatever this project's filters say: oslo.rootwrap
#: (wrapper.load_filters) always adds ``CommandFilter privsep-helper root``, so
#: ``privsep-helper`` starts as root with any arguments, as on every Cinder host; its
#: oslo.log then writes wherever --log-file or the config's log_file says, before any
#: check of the driver's daemon. Kept as strict xfails: they fail the day that changes.
ROOTWRAP_LETS_THROUGH = {"R20", "R21", "R22", "R23", "R24", "R25", "R26"}
KNOWN = ("oslo.rootwrap always allows privsep-helper with any arguments "
         "(wrapper.load_filters): docs/privileges.md, what this does not protect against")


def _params() -> list[Any]:
    return [pytest.param(row, id=row[0], marks=pytest.mark.xfail(strict=True, reason=KNOWN))
            if row[0] in ROOTWRAP_LETS_THROUGH else pytest.param(row, id=row[0])
            for row in ATTACKS]


@pytest.mark.parametrize("attack", _params())
def test_attack_is_refused(host: Host, suite: dict[str, Any], attack: tuple[str, str, Any]):
    ident, what, how = attack
    log_before = sha256(LOG_VICTIM)
    early = suite["early"].pop(ident, None)
    refused, said = early if early is not None else attempt(how, host)
    if sha256(LOG_VICTIM) != log_before:
        said += f" [root's {LOG_VICTIM} written]"
    suite["rows"].append((ident, what, refused, said))
    files = {path: sha256(path) for path in [host.raw, *host.watched]}
    assert files == suite["before"]["files"], f"{ident} changed a watched file or device"
    assert refused, f"{ident} {what}: not refused: {said}"


def test_after_the_suite_nothing_else_changed(host: Host, suite: dict[str, Any]):
    assert len(suite["rows"]) == len(ATTACKS)
    assert host.untouched() == suite["before"]
    assert head(f"/dev/{DECOY_VG}/precious", MiB) == b"\x77" * MiB
