"""The data path on real parts, in the VM lane (tests/realvm): LIO and open-iscsi.

A thin LV of the real LVM driver (``backend_device_path``) is exported on the
kernel's LIO target with Cinder's own ``cinder-rtstool`` (Debian's rtslib-fb
over configfs), running the commands Cinder's ``lioadm`` helper runs for the
adapter (pinned on the host lane by ``test_cinder_datapath.py``), and
os-brick's iSCSI connector logs in over loopback through open-iscsi
(``iscsid`` started here), as Nova's compute host does: write a pattern,
detach, attach again, read it back. The work runs in a child process
(``iscsi_realvm_side.py``); this module prepares the guest: kernel modules,
configfs, ``iscsid``, and rtslib for the venv's ``cinder-rtstool``. Progress
is kept in ``test-results/realvm-datapath.log`` on the host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.ecosystem.support import REPO

pytestmark = pytest.mark.realvm

MODULES = ["configfs", "target_core_mod", "target_core_iblock", "iscsi_target_mod",
           "iscsi_tcp", "sd_mod"]
#: Debian's rtslib-fb (python3-rtslib-fb), which cinder-rtstool imports
RTSLIB = Path("/usr/lib/python3/dist-packages/rtslib_fb")
#: seconds iscsi_realvm_side.py may take in the VM (TCG) before it dumps its stacks
LIMIT_S = 900  # a guard against a hang: a run takes 3-5 minutes under TCG


#: what the guest set-up and the side did, kept on the host (the repo is shared)
PROGRESS = REPO / "test-results" / "realvm-datapath.log"


def _note(line: str) -> None:
    PROGRESS.parent.mkdir(exist_ok=True)
    with open(PROGRESS, "a") as log:
        log.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def _spawn(argv: list[str], output: Path, timeout_s: float, **kwargs: Any) -> int:
    """Run ``argv`` with its output in a file, in a session of its own; on timeout the
    whole session is killed (children that kept the output open cannot hang us)."""
    _note(f"run {' '.join(argv)}")
    with open(output, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, **kwargs)
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        rc = -9
    _note(f"  rc={rc} {output.read_text()[-1500:]!r}")
    return rc


def _sh(*argv: str, timeout_s: float = 60) -> tuple[int, str]:
    """A guest command's exit code and output (kept in the progress log too)."""
    output = Path(os.environ.get("TMPDIR", "/tmp")) / f"dk-realvm-{os.getpid()}.out"
    return _spawn(list(argv), output, timeout_s), output.read_text()


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """LIO and open-iscsi ready in the guest; the environment cinder-rtstool needs."""
    if os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("the real data path runs inside the VM lane: tests/realvm/run_in_vm.sh "
                    "-- .venv/bin/python -m pytest tests/ecosystem/test_cinder_realvm.py")
    _note("guest set-up")
    for module in MODULES:
        rc, output = _sh("modprobe", module)
        assert rc == 0, f"modprobe {module}: {output}"
    assert _sh("ip", "link", "set", "lo", "up")[0] == 0  # the loopback portal
    if not os.path.ismount("/sys/kernel/config"):
        rc, output = _sh("mount", "-t", "configfs", "configfs", "/sys/kernel/config")
        assert rc == 0, output
    for tool in ("iscsid", "iscsiadm"):
        assert shutil.which(tool), f"{tool} missing: run tests/realvm/install_deps.sh"
    assert RTSLIB.is_dir(), "python3-rtslib-fb missing: run tests/realvm/install_deps.sh"
    pythonpath = tmp_path_factory.mktemp("rtslib")
    (pythonpath / "rtslib_fb").symlink_to(RTSLIB)
    log = pythonpath / "iscsid.log"
    _note("start iscsid -f")
    with open(log, "w") as out:
        iscsid = subprocess.Popen(["iscsid", "-f"], stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    for _ in range(10):  # iscsiadm talks to iscsid over its abstract socket
        if iscsid.poll() is not None or \
                _sh("iscsiadm", "-m", "session", timeout_s=20)[0] in (0, 21):
            break
        time.sleep(1)
    assert iscsid.poll() is None, f"iscsid exited: {log.read_text()}"
    venv_bin = str(Path(sys.executable).parent)
    env = dict(os.environ, PYTHONPATH=str(pythonpath), DK_ISCSID_LOG=str(log),
               PATH=os.pathsep.join([venv_bin, os.environ.get("PATH", "")]))
    try:
        yield env
    finally:
        iscsid.terminate()
        iscsid.wait(timeout=30)


@pytest.fixture(scope="module")
def realvm(guest: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("iscsi-realvm")
    side = REPO / "test-results" / "realvm-datapath-side.log"
    try:
        rc = _spawn([sys.executable, str(REPO / "tests/ecosystem/iscsi_realvm_side.py"),
                     str(tmp), str(LIMIT_S)], side, LIMIT_S + 60, cwd=REPO, env=guest)
        if rc != 0:  # say what the side, the kernel and iscsid saw
            pytest.fail(f"iscsi_realvm_side.py exited {rc}:\n{side.read_text()[-6000:]}\n"
                        f"--- dmesg ---\n{_sh('dmesg')[1][-3000:]}\n--- iscsid ---\n"
                        f"{Path(guest['DK_ISCSID_LOG']).read_text()[-2000:]}")
        answer = json.loads((tmp / "answer.json").read_text())
    finally:
        _sh("lvremove", "-f", "-y", os.environ["DK_REAL_LVM_VG"])
    _note(f"step seconds: {answer['seconds']}")
    print("data path step seconds:", answer["seconds"])
    return answer


FILLED = [[0x5A], [0xA5]]  # the pattern's two MiB, as iscsi_realvm_side.py writes them


def test_the_driver_gives_the_lv_device(realvm: dict[str, Any]) -> None:
    created = realvm["steps"]["create"]
    assert created == {"device": f"/dev/{os.environ['DK_REAL_LVM_VG']}/"
                                 f"volume-0b7e9f4c-5d1a-4c4e-9a57-3f1d2c0a0001"}


def test_attach_over_iscsi_keeps_what_was_written_across_detach(
        realvm: dict[str, Any]) -> None:
    first, second = realvm["steps"]["attach_write"], realvm["steps"]["attach_read"]
    assert "error" not in first, first
    assert first["path"].startswith("/dev/sd"), first
    assert first["read"] == [[0], [0]]  # a new thin volume reads as zeros
    assert first["read_after_write"] == FILLED
    assert "error" not in second, second
    assert second["read"] == FILLED  # after logout, a new target and a new login


def test_detach_logs_out_and_removes_the_target(realvm: dict[str, Any]) -> None:
    for name in ("attach_write", "attach_read"):
        step = realvm["steps"][name]
        assert step["sessions_after"] == 21, step  # iscsiadm: no active sessions
        assert step["target_after"] is False, step
    assert realvm["steps"]["delete"] == {"found": False}
