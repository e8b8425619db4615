"""A Cinder volume host in the VM lane, for the unprivileged tests: the guest made one
(``tests/realvm/unprivileged_setup.sh``: user ``cinder``, sudo to the root helper), the
backend's root-owned config, a decoy VG, a decoy raw device and root-owned files an
attack would aim at, and the driver's process as ``cinder`` (``unprivileged_side.py``).

Used through the session fixture ``unprivileged_host`` (``tests/functional/conftest.py``)
by ``test_unprivileged_realvm.py`` (the driver as cinder),
``test_unprivileged_attacks_realvm.py`` (the attack suite through Cinder's rootwrap)
and ``test_unprivileged_pinned_realvm.py`` (the privsep-helper start pinned by sudoers).
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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

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

    def __init__(self, log: Path, config: str = CONFIG):
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            ["runuser", "-u", "cinder", "--", PYTHON, str(SIDE), config, BACKEND,
             "/var/lib/cinder/locks"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            # oslo.privsep's socket directory, where a pinned sudoers rule expects it
            cwd=str(REPO), env={**os.environ, "TMPDIR": "/tmp"})

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


def loop_device(tmp: Path, name: str, size: int, data: bytes = b"") -> str:
    image = tmp / f"{name}.img"
    with open(image, "wb") as f:
        f.truncate(size)
        f.write(data)
    return root("losetup", "--find", "--show", str(image)).strip()


def write_config(vg: str, path: str = CONFIG, extra: str = "") -> None:
    """The backend's config file, root's, readable by group cinder (``extra`` appended)."""
    write_privsep_config(path, BACKEND, vg=vg, pool="pool",
                         root_helper=f"sudo {' '.join(ROOTWRAP)}", more=f"""\
volume_backend_name = {BACKEND}
lvm_offer_thick = true
volume_clear_size = 16
lvm_command_timeout = 120
max_over_subscription_ratio = 2.0

[{DECOY_SECTION}]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = {DECOY_VG}
lvm_thin_pool_name = precious
{extra}""")


def write_privsep_config(path: str, section: str, *, vg: str, pool: str, root_helper: str,
                         more: str) -> None:
    """A config enabling one backend, ``section``, on the existing thin pool ``vg/pool``,
    every LVM command through the driver's daemon that ``root_helper`` starts; ``more``
    (the section's other options, other sections) follows. Root's, readable by group
    cinder: the driver running as cinder reads it and cannot change it."""
    Path(path).write_text(f"""\
[DEFAULT]
enabled_backends = {section}

[{section}]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = {vg}
lvm_thin_pool_name = {pool}
lvm_create_thin_pool = false
lvm_privilege = privsep
lvm_root_helper = {root_helper}
{more}""")
    os.chown(path, 0, grp.getgrnam("cinder").gr_gid)
    os.chmod(path, 0o640)


@contextmanager
def running_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    """The guest as a Cinder host with the driver's process running as cinder; every
    LV, VG and loop device made for it removed at the end."""
    if os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("runs inside the VM lane: tests/realvm/run_in_vm.sh -- .venv/bin/python "
                    "-m pytest tests/functional -k unprivileged -m realvm")
    _note("set-up")
    root("bash", str(SETUP), PYTHON)
    vg, pv = os.environ["DK_REAL_LVM_VG"], os.environ["DK_REAL_LVM_PV"]
    root("lvremove", "-f", "-y", vg)
    root("lvcreate", "-q", "-T", "-L", "2g", f"{vg}/pool")
    scratch = Path(os.environ.get("DK_REALVM_GUEST_SCRATCH") or tmp_path_factory.mktemp("u"))
    decoy_pv = loop_device(scratch, "decoy-pv", 64 * MiB)
    root("pvcreate", "-q", decoy_pv)
    root("vgcreate", "-q", DECOY_VG, decoy_pv)
    root("lvcreate", "-q", "-y", "-L", "8m", "-n", "precious", DECOY_VG)
    fill(f"/dev/{DECOY_VG}/precious", 0x77, MiB)
    raw = loop_device(scratch, "decoy-raw", 4 * MiB, os.urandom(4 * MiB))
    cinder = pwd.getpwnam("cinder")
    tmp = Path("/var/lib/cinder/attack")
    tmp.mkdir(exist_ok=True)
    os.chown(tmp, cinder.pw_uid, cinder.pw_gid)
    locks = Path("/var/lib/cinder/locks")
    locks.mkdir(mode=0o700, exist_ok=True)
    os.chown(locks, cinder.pw_uid, cinder.pw_gid)
    write_config(vg)
    watched = plant_traps(tmp, raw, decoy_pv)
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


def plant_traps(tmp: Path, raw: str, decoy_pv: str) -> dict[str, str]:
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

