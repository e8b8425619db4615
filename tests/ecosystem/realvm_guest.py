"""The VM lane's guest (tests/realvm) made an iSCSI host: LIO, open-iscsi, cinder-rtstool.

The ``guest`` fixture loads the target and initiator modules, mounts configfs,
brings up the loopback portal, starts ``iscsid`` and gives the environment in
which the venv's ``cinder-rtstool`` finds Debian's rtslib-fb. ``note`` keeps
progress in ``test-results/realvm-datapath.log`` on the host (the repository is
shared), ``sh`` runs a guest command with its output kept there too.
"""

from __future__ import annotations

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

MODULES = ["configfs", "target_core_mod", "target_core_iblock", "iscsi_target_mod",
           "iscsi_tcp", "sd_mod"]
#: Debian's rtslib-fb (python3-rtslib-fb), which cinder-rtstool imports
RTSLIB = Path("/usr/lib/python3/dist-packages/rtslib_fb")
#: what the guest set-up and the test did, kept on the host (the repo is shared)
PROGRESS = REPO / "test-results" / "realvm-datapath.log"


def note(line: str) -> None:
    PROGRESS.parent.mkdir(exist_ok=True)
    with open(PROGRESS, "a") as log:
        log.write(f"{time.strftime('%H:%M:%S')} {line}\n")


def spawn(argv: list[str], output: Path, timeout_s: float, **kwargs: Any) -> int:
    """Run ``argv`` with its output in a file, in a session of its own; on timeout the
    whole session is killed (children that kept the output open cannot hang us)."""
    note(f"run {' '.join(argv)}")
    with open(output, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, **kwargs)
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        rc = -9
    note(f"  rc={rc} {output.read_text()[-1500:]!r}")
    return rc


def sh(*argv: str, timeout_s: float = 60) -> tuple[int, str]:
    """A guest command's exit code and output (kept in the progress log too)."""
    output = Path(os.environ.get("TMPDIR", "/tmp")) / f"dk-realvm-{os.getpid()}.out"
    return spawn(list(argv), output, timeout_s), output.read_text()


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """LIO and open-iscsi ready in the guest; the environment cinder-rtstool needs."""
    if os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("the real data path runs inside the VM lane: tests/realvm/run_in_vm.sh "
                    "-- .venv/bin/python -m pytest <this module> -m realvm")
    note("guest set-up")
    for module in MODULES:
        rc, output = sh("modprobe", module)
        assert rc == 0, f"modprobe {module}: {output}"
    assert sh("ip", "link", "set", "lo", "up")[0] == 0  # the loopback portal
    if not os.path.ismount("/sys/kernel/config"):
        rc, output = sh("mount", "-t", "configfs", "configfs", "/sys/kernel/config")
        assert rc == 0, output
    for tool in ("iscsid", "iscsiadm"):
        assert shutil.which(tool), f"{tool} missing: run tests/realvm/install_deps.sh"
    assert RTSLIB.is_dir(), "python3-rtslib-fb missing: run tests/realvm/install_deps.sh"
    pythonpath = tmp_path_factory.mktemp("rtslib")
    (pythonpath / "rtslib_fb").symlink_to(RTSLIB)
    log = pythonpath / "iscsid.log"
    note("start iscsid -f")
    with open(log, "w") as out:
        iscsid = subprocess.Popen(["iscsid", "-f"], stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    for _ in range(10):  # iscsiadm talks to iscsid over its abstract socket
        if iscsid.poll() is not None or \
                sh("iscsiadm", "-m", "session", timeout_s=20)[0] in (0, 21):
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
