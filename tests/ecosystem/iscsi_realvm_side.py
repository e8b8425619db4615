"""The VM lane's data path, run apart: a real thin LV, LIO and open-iscsi.

    python tests/ecosystem/iscsi_realvm_side.py WORKDIR LIMIT_SECONDS

Cinder's volume manager does not run here: importing it takes minutes in the
VM (TCG, the root over 9p). What it would do is pinned by the host lane
(``test_lio_runs_the_commands_the_vm_lane_proves_on_a_real_target``): the
adapter makes Cinder's ``LioAdm`` run ``lio_commands``' ``cinder-rtstool``
commands on the device the driver gives and return ``lio_commands.connection``.
This script runs those very command lines on the kernel's LIO target through the
``main`` of Cinder's own ``cinder-rtstool`` console script, in this process (and
Debian's rtslib-fb), and hands the connection to
os-brick's iSCSI connector, as Nova's compute host does: attach, write a
pattern, detach, attach again, read it back. Steps and their seconds go to
``WORKDIR/answer.json``; progress to stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from driver_kit import load_backend_config  # noqa: E402
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver  # noqa: E402
from tests.ecosystem import lio_commands  # noqa: E402

MiB = 1024 * 1024
VOLUME_ID = "0b7e9f4c-5d1a-4c4e-9a57-3f1d2c0a0001"
VOLUME = f"volume-{VOLUME_ID}"
USER, PASSWORD = "kituser", "kitsecret0123456"  # CHAP secrets are 12-16 characters
PATTERN = [(0, 0x5A), (300 * MiB, 0xA5)]


def _run(argv: list[str]) -> dict[str, Any]:
    """One ``cinder-rtstool`` command line: its console script's ``main`` with that very
    argv, in this process (a fresh interpreter per command costs tens of seconds in
    the VM, eight times a run); stdout captured, a non-zero exit raised."""
    from cinder.cmd import rtstool  # what the cinder-rtstool console script runs

    if argv[0] != "cinder-rtstool":
        raise ValueError(f"not a cinder-rtstool command: {argv}")
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = rtstool.main(list(argv))
    except SystemExit as exc:
        code = exc.code
    if code not in (None, 0):
        raise RuntimeError(f"{' '.join(argv)} exited {code}: {out.getvalue()}"[-1500:])
    return {"out": out.getvalue()}


def _read(path: str) -> list[list[int]]:
    """The distinct byte values of the MiB at each pattern offset."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return [sorted(set(os.pread(fd, MiB, offset))) for offset, _ in PATTERN]
    finally:
        os.close(fd)


def _write(path: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        for offset, byte in PATTERN:
            os.pwrite(fd, bytes([byte]) * MiB, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def main(workdir: Path) -> dict[str, Any]:
    answer: dict[str, Any] = {"seconds": {}, "steps": {}}

    def step(name: str, call: Callable[[], Any]) -> Any:
        print(f"step {name} ...", file=sys.stderr, flush=True)
        start = time.monotonic()
        try:
            result = call()
        except Exception as exc:  # noqa: BLE001 - the answer says which step failed
            result = {"error": f"{type(exc).__name__}: {exc}"}
        answer["steps"][name] = result
        answer["seconds"][name] = round(time.monotonic() - start, 1)
        print(f"step {name}: {answer['seconds'][name]} s {result}", file=sys.stderr,
              flush=True)
        return result

    def brick() -> tuple[Any, str]:
        from oslo_concurrency import lockutils

        from os_brick import privileged
        # os-brick serialises connect/disconnect with external locks, as on Nova's host
        lockutils.set_defaults(str(workdir / "brick-locks"))
        from os_brick.initiator import connector
        privileged.default.set_client_mode(False)  # root in the VM: no privsep daemon
        props = connector.get_connector_properties(None, "127.0.0.1", False, False)
        iscsi = connector.InitiatorConnector.factory("ISCSI", None, use_multipath=False,
                                                     device_scan_attempts=3)
        return iscsi, props["initiator"]

    started = step("import_os_brick", brick)
    if isinstance(started, dict):
        return answer
    iscsi, initiator = started
    answer["steps"]["import_os_brick"] = answer["initiator"] = initiator
    driver = ThinLVMDriver(load_backend_config(extra_opts=LVM_OPTS, overrides={
        "lvm_backend": "real", "volume_group": os.environ["DK_REAL_LVM_VG"],
        "lvm_thin_pool_name": "attachpool", "lvm_thin_pool_size_percent": 60,
        "lvm_command_timeout": 120.0, "lock_path": str(workdir / "locks")}))

    def create() -> dict[str, Any]:
        driver.do_setup()
        driver.check_for_setup_error()
        driver.create_volume(VOLUME, 1)
        return {"device": driver.backend_device_path(VOLUME)}

    created = step("create", create)
    if "device" not in created:
        return answer
    device = created["device"]
    data = lio_commands.connection(VOLUME_ID, VOLUME, USER, PASSWORD, "127.0.0.1")
    target = Path("/sys/kernel/config/target/iscsi") / data["target_iqn"]

    def attach_cycle(write: bool) -> dict[str, Any]:
        _run(lio_commands.export(device, VOLUME, USER, PASSWORD, "127.0.0.1"))
        try:  # whatever fails, the target goes, so the LV is not left in use
            _run(lio_commands.allow(VOLUME, USER, PASSWORD, initiator))
            attached = iscsi.connect_volume(dict(data))
            try:
                result = {"path": attached["path"], "read": _read(attached["path"])}
                if write:
                    _write(attached["path"])
                    result["read_after_write"] = _read(attached["path"])
            finally:
                iscsi.disconnect_volume(dict(data), attached)
                _run(lio_commands.deny(VOLUME, initiator))
        finally:
            _run(lio_commands.remove(VOLUME))
        sessions = subprocess.run(["iscsiadm", "-m", "session"], capture_output=True,
                                  text=True, timeout=60)
        result.update(sessions_after=sessions.returncode, target_after=target.exists())
        return result

    step("attach_write", lambda: attach_cycle(True))
    step("attach_read", lambda: attach_cycle(False))
    step("delete", lambda: {"found": (driver.delete_volume(VOLUME),
                                      driver.backend_find_volume(VOLUME))[1] is not None})
    return answer


def _print_stacks() -> None:
    """Every thread's stack to stderr, taken with the GIL held.

    Not ``faulthandler.dump_traceback_later``: its watchdog walks the other
    threads' frames without the GIL, and in CI that walk crashed this script
    (SIGSEGV in libpython) while the main thread was in ``communicate``.
    """
    for ident, frame in sys._current_frames().items():
        if ident != threading.get_ident():
            print(f"--- thread {ident}\n" + "".join(traceback.format_stack(frame)),
                  file=sys.stderr, flush=True)


def _watch(every_s: float, limit_s: float) -> None:
    """Show every thread's stack each ``every_s``; end the run at ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() + every_s < deadline:
        time.sleep(every_s)
        print(f"still running after {every_s:.0f} s more:", file=sys.stderr, flush=True)
        _print_stacks()
    time.sleep(max(0.0, deadline - time.monotonic()))
    print(f"limit of {limit_s:.0f} s reached", file=sys.stderr, flush=True)
    _print_stacks()
    os._exit(3)


if __name__ == "__main__":
    workdir, limit_s = Path(sys.argv[1]), float(sys.argv[2])
    # a step that hangs (a login, a device that never shows up) shows where every
    # minute, and the run ends at the limit instead of at the VM's timeout
    threading.Thread(target=_watch, args=(60.0, limit_s), daemon=True).start()
    result = main(workdir)
    (workdir / "answer.json").write_text(json.dumps(result, indent=1, default=str))
