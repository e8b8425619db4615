"""The data path on real parts, in the VM lane (tests/realvm): LIO and open-iscsi.

A thin LV of the real LVM driver (``backend_device_path``) is exported on the
kernel's LIO target with Cinder's own ``cinder-rtstool`` (Debian's rtslib-fb
over configfs), running the commands Cinder's ``lioadm`` helper runs for the
adapter (pinned on the host lane by ``test_cinder_datapath.py``), and
os-brick's iSCSI connector logs in over loopback through open-iscsi
(``iscsid`` started here), as Nova's compute host does: write a pattern,
detach, attach again, read it back. The work runs in a child process
(``iscsi_realvm_side.py``); ``realvm_guest.py`` prepares the guest: kernel
modules, configfs, ``iscsid``, and rtslib for the venv's ``cinder-rtstool``.
Progress is kept in ``test-results/realvm-datapath.log`` on the host.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.ecosystem.realvm_guest import guest  # noqa: F401 - a fixture
from tests.ecosystem.realvm_guest import sh as _sh
from tests.ecosystem.realvm_guest import note as _note
from tests.ecosystem.realvm_guest import spawn as _spawn
from tests.ecosystem.support import REPO

pytestmark = pytest.mark.realvm

#: seconds iscsi_realvm_side.py may take in the VM (TCG) before it dumps its stacks
LIMIT_S = 900  # a guard against a hang: a run takes 3-5 minutes under TCG


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
