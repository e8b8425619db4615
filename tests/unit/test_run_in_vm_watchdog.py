"""tests/realvm/run_in_vm.sh's boot watchdog, with a stand-in for virtme-ng: a guest
that never starts the command is stopped and booted once more, then given up on
with exit code 125 and a line saying where it hung."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "realvm" / "run_in_vm.sh"

# A stand-in for vng: the first boot (or every boot, with FAKE_VNG_ALWAYS_HANG)
# hangs before the guest runs anything; a later one "runs" the command by
# writing what guest_setup.sh writes in the scratch dir (the last --rwdir).
FAKE_VNG = r"""#!/usr/bin/env bash
scratch=""
while [ $# -gt 0 ]; do
    [ "$1" = --rwdir ] && scratch="$2"
    shift
done
n=$(cat "$FAKE_VNG_BOOTS" 2>/dev/null || echo 0)
echo $((n + 1)) > "$FAKE_VNG_BOOTS"
if [ "$n" = 0 ] || [ -n "${FAKE_VNG_ALWAYS_HANG:-}" ]; then
    exec sleep 600
fi
: > "$scratch/booted"; : > "$scratch/started"
echo "the guest ran the command"
echo 0 > "$scratch/rc"
"""


def _kernel_release() -> str | None:
    modules = Path("/lib/modules")
    releases = sorted(p.name for p in modules.iterdir()) if modules.is_dir() else []
    return releases[0] if releases else None


@pytest.fixture
def stand_in(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("run_in_vm.sh refuses to run without root")
    release = _kernel_release()
    if release is None:
        pytest.skip("run_in_vm.sh wants a /lib/modules/<release> for its kernel")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, body in [("vng", FAKE_VNG)] + [(t, "#!/bin/sh\nexit 0\n") for t in (
            "qemu-system-x86_64", "busybox", "lvm", "thin_check")]:
        (bin_dir / tool).write_text(body)
        (bin_dir / tool).chmod(0o755)
    kernel = tmp_path / f"vmlinuz-{release}"
    kernel.write_bytes(b"")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "DK_REALVM_PYTHON": str(bin_dir / "python"), "DK_REALVM_KERNEL": str(kernel),
           "DK_REALVM_BOOT_TIMEOUT": "2", "DK_REALVM_TIMEOUT": "60",
           "FAKE_VNG_BOOTS": str(tmp_path / "boots")}
    return env, tmp_path / "boots"


def run(env, timeout_s=120):
    return subprocess.run(["bash", str(SCRIPT), "--", sys.executable, "-c", "pass"], env=env,
                          capture_output=True, text=True, timeout=timeout_s)


def test_a_guest_hung_before_the_command_is_booted_once_more(stand_in):
    env, boots = stand_in
    done = run(env)
    assert done.returncode == 0, done.stderr
    assert "the guest ran the command" in done.stdout
    assert "hung before guest_setup.sh ran" in done.stderr
    assert "booting the VM once more" in done.stderr
    assert boots.read_text().strip() == "2"


def test_a_guest_that_hangs_twice_is_given_up_on_with_125(stand_in):
    env, boots = stand_in
    done = run({**env, "FAKE_VNG_ALWAYS_HANG": "1"})
    assert done.returncode == 125, done.stderr
    assert "never started the command" in done.stderr
    assert boots.read_text().strip() == "2"


def test_a_guest_that_starts_leaves_no_watchdog_holding_the_output_open(stand_in):
    env, boots = stand_in
    boots.write_text("1")  # the stand-in boots at once
    started = time.monotonic()
    done = run({**env, "DK_REALVM_BOOT_TIMEOUT": "60"}, timeout_s=50)  # pipes: a reader
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30, "the output stayed open after the run"
