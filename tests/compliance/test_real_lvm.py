"""The LVM driver on real LVM passes every check (inside the VM lane)::

    tests/realvm/run_in_vm.sh -- .venv/bin/python -m pytest tests/compliance -m realvm
"""

import os
from pathlib import Path

import pytest

from driver_kit.compliance import CATALOGUE, DriverSpec, run_checks
from driver_kit.compliance.report import write_json
from tests.compliance.drivers import LVM_HOOKS
from tests.compliance.test_reference_drivers import NO_DATA

pytestmark = pytest.mark.realvm

#: checks that need a 5 GiB volume: more than the VM lane's pool holds
ROOMY = {"ops.extend-readback", "ops.unaligned-size"}


def test_lvm_driver_on_real_lvm_passes_every_check(tmp_path):
    if os.environ.get("DK_REAL_LVM") != "1":
        why = ("real-LVM compliance runs inside the VM lane: tests/realvm/run_in_vm.sh "
               "-- .venv/bin/python -m pytest tests/compliance -m realvm")
        if os.environ.get("CI") == "true":
            pytest.fail(why)  # CI expects it: never a silent skip
        pytest.skip(why)
    from lvm_driver.run.executor import LVMExecutor
    vg = os.environ["DK_REAL_LVM_VG"]
    spec = DriverSpec(backend="lvm-real", overrides={
        "volume_driver": "lvm_driver.driver.ThinLVMDriver", "lvm_backend": "real",
        "volume_group": vg, "lvm_thin_pool_name": "compliance",
        "lvm_create_thin_pool": True, "lvm_thin_pool_size_percent": 50,
        "max_over_subscription_ratio": "2.0", "lock_path": str(tmp_path / "locks")})
    try:
        # a ceiling per check, not a duration: under TCG on a busy host, starting the
        # four child processes of admission.parallel-processes alone took over 300 s
        report = run_checks(spec=spec, hooks=LVM_HOOKS, timeout_s=900)
    finally:  # the pool do_setup made, and anything a failed check left in it
        LVMExecutor(timeout_s=120).run(["lvremove", "-f", "-y", vg], readonly=False)
    # every check's result and seconds, kept on the host (the repo is shared with the VM)
    results = Path(__file__).resolve().parents[2] / "test-results"
    results.mkdir(exist_ok=True)
    write_json(report, str(results / "realvm-compliance.json"))
    # the LVM hooks give no data path, stray object or injected write failure: those
    # checks skip (the functional scenarios cover the LVM side of each)
    every = {c.id for c in CATALOGUE} | {"driver.setup"}
    # the VM's 2 GiB pool at ratio 2.0 leaves no room for the 3 GiB + 2 GiB extend of
    # these two (they pass on the simulator's larger pool); they may skip for room here
    no_room = {r.id for r in report.results if r.status == "skipped"
               and r.id in ROOMY and "room" in r.reason}
    assert report.by_status("passed") == every - NO_DATA - no_room, [
        (r.id, r.status, r.reason) for r in report.results if r.status != "passed"]
    assert report.by_status("skipped") == NO_DATA | no_room and report.exit_code == 0
