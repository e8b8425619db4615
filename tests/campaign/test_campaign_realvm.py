"""The fault campaign on real LVM, inside the VM lane (tests/realvm).

Two processes, a hundred requests, every LVM command under a timeout
short enough that some are killed mid-flight, one SIGKILL of the admission
lock's holder, and the operator working out of band with plain lvcreate and
lvremove. Real LVM has no command record, so the checks are the ones the final
state and the names allow (see tests/campaign/outcomes.py: check_real).
"""

from __future__ import annotations

import os

import pytest

from lvm_driver.run.executor import LVMExecutor
from tests.campaign.runner import Settings, replay_command, run_campaign

#: requests in the VM: mostly cheap ones (refusals, lookups, stats) on a 2 GiB pool
REAL_OPS = int(os.environ.get("DK_CAMPAIGN_REAL_OPS", "100"))


@pytest.mark.realvm
def test_campaign_on_real_lvm(tmp_path, capsys):
    if os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("the real-LVM campaign runs inside the VM lane: tests/realvm/run_in_vm.sh "
                    "-- .venv/bin/python -m pytest tests/campaign -m realvm")
    settings = Settings(seed=int(os.environ.get("DK_CAMPAIGN_SEED", "1")), ops=REAL_OPS,
                        procs=2, threads=2, kills=1, mode="real", pool_gb=2,
                        timeout_s=float(os.environ.get("DK_CAMPAIGN_REAL_TIMEOUT", "2")),
                        # DK_CAMPAIGN_RUN_DIR (e.g. under the repository) keeps the journals
                        run_dir=os.environ.get("DK_CAMPAIGN_RUN_DIR") or str(tmp_path / "run"))
    try:
        result = run_campaign(settings)
    finally:  # the next real-LVM test starts from an empty VG
        LVMExecutor(timeout_s=300).run(["lvremove", "-f", "-y", os.environ["DK_REAL_LVM_VG"]],
                                       readonly=False)
    with capsys.disabled():
        print("\n" + result.report)
    assert result.passed, (f"{len(result.violations)} invariant violations; replay with "
                           f"`{replay_command(settings)}` in the VM:\n{result.report}")
