"""Inside a process eventlet has patched (Cinder's services), reads start a process each.

Seen in the VM lane: cinder-volume, run as root on real LVM, hung for good at its
first report, waiting on the long-lived lvm shell's pipes under eventlet's select.
"""

import shutil
import subprocess
import sys

import pytest

from tests.ecosystem.support import REPO

CODE = """
import sys
if sys.argv[1] == "green":
    import eventlet
    eventlet.monkey_patch()
from driver_kit import load_backend_config
from lvm_driver.backends import make_executor
from lvm_driver.driver import LVM_OPTS
executor = make_executor(load_backend_config(extra_opts=LVM_OPTS, overrides={
    "lvm_backend": "real", "volume_group": "dk-no-such-vg", "lvm_command_timeout": 20}))
result = executor.run(["lvs", "--reportformat", "json"], readonly=True)
print(executor.session is not None, result.exit_code)
"""


@pytest.mark.skipif(shutil.which("lvs") is None, reason="needs LVM's lvs (lvm2)")
@pytest.mark.parametrize("process, shell", [("green", False), ("plain", True)])
def test_a_report_answers_in_an_eventlet_process(process: str, shell: bool) -> None:
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", CODE, process], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[0] == str(shell)
