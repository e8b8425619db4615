"""The three stats-refresh paths measured side by side on the same real VG.

* this project: ``ThinLVMDriver.get_volume_stats(refresh=True)``;
* Cinder's LVM driver through os-brick's ``LVM`` class: ``update_volume_group_info()``
  then ``get_volumes()``, and the pool dict Cinder's ``_update_volume_stats`` builds;
* the floor: one bare ``lvs`` of the driver's report, nothing parsed.

Processes are counted where both paths start them: every ``subprocess.Popen``
(the driver's ``ProcessRunner`` starts its processes with it, os-brick's
``priv_rootwrap`` through ``oslo_concurrency.processutils.execute``, which uses
it too). The driver's own ``executor.commands_run`` is recorded too, as a
cross-check.

The restored VG's thin pool is inactive (no device-mapper here), so LVM prints
no data%. The driver reports such a pool down (usage unknown, fail closed) and
stops there; os-brick's ``_get_thin_pool_free_space`` raises ``ValueError``
on it (it only catches ``ProcessExecutionError``). So that both do their full
work, the "pool usage filled in" variants put a data%/metadata% into the pool's
row of the real ``lvs`` output, as an active pool prints it; the processes, the
LVs and everything else are real. The driver is also timed as is.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import warnings
from typing import Any, Callable

from driver_kit import load_backend_config
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.read import mda
from lvm_driver.read.dm_status import ThinPoolStatus
from lvm_driver.read.report_cache import DeviceSources
from lvm_driver.run.executor import CommandResult, LVMExecutor, ProcessRunner

#: the pool usage an active pool would print (same for both paths)
DATA_PERCENT = "37.21"
METADATA_PERCENT = "8.14"


class ProcessCounter:
    """Counts every process started through ``subprocess.Popen``, with its argv."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.argv: list[tuple[str, ...]] = []
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        counter = self

        class CountingPopen(subprocess.Popen):  # type: ignore[type-arg]
            def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
                super().__init__(args, *rest, **kwargs)  # counted once it started
                with counter._lock:
                    counter.count += 1
                    counter.argv.append(tuple(str(a) for a in args))

        subprocess.Popen = CountingPopen  # type: ignore[misc]
        self._installed = True

    def reset(self) -> None:
        with self._lock:
            self.count = 0
            self.argv = []


COUNTER = ProcessCounter()


class PoolUsageFiller:
    """A runner that runs the real process and fills the pool's empty usage fields."""

    def __init__(self, runner: Callable[[list[str], dict[str, str], float], CommandResult],
                 pool_name: str) -> None:
        self._runner = runner
        self._key = f'"lv_name":"{pool_name}",'

    def __call__(self, argv: list[str], env: dict[str, str], timeout_s: float) -> CommandResult:
        return self.fill(argv, self._runner(argv, env, timeout_s))

    def device_sources(self) -> DeviceSources:
        """The PVs' real headers (the unchanged-metadata check reads them as on any
        host), and a stand-in for the pool's device-mapper status: the restored pool
        is inactive and this machine has no device-mapper."""
        return DeviceSources(read_block=mda.read_block, thin_pool_status=standin_pool_status)

    def shell_command(self, env: dict[str, str]) -> Any:
        """The wrapped runner's lvm shell (for a read session; see ``make_driver``)."""
        return self._runner.shell_command(env)  # type: ignore[attr-defined]

    def fill(self, argv: list[str], result: CommandResult) -> CommandResult:
        """``result`` with the pool's usage filled in (an ``lvs`` of it only)."""
        if argv[0] != "lvs" or result.exit_code != 0:
            return result
        text = result.stdout
        start = text.find(self._key)
        if start < 0:
            return result
        end = text.find("}", start)
        row = text[start:end].replace('"data_percent":""', f'"data_percent":"{DATA_PERCENT}"')
        row = row.replace('"metadata_percent":""', f'"metadata_percent":"{METADATA_PERCENT}"')
        return CommandResult(result.argv, result.exit_code, text[:start] + row + text[end:],
                             result.stderr)


def standin_pool_status(vg_name: str, pool_name: str) -> ThinPoolStatus:
    """What device-mapper would answer for an active pool at DATA_PERCENT data and
    METADATA_PERCENT metadata use (the figures the filler puts into ``lvs``)."""
    return ThinPoolStatus(
        transaction_id=1, used_metadata_blocks=round(float(METADATA_PERCENT) * 100),
        total_metadata_blocks=10_000, used_data_blocks=round(float(DATA_PERCENT) * 100),
        total_data_blocks=10_000, data_block_bytes=65_536, mode="rw", needs_check=False)


# ---------------------------------------------------------------------------
# this project

def make_driver(*, vg_name: str, conf_dir: str, fill_pool_usage: bool,
                read_session: bool = False, metadata_parse: bool = False) -> ThinLVMDriver:
    """A ThinLVMDriver on the benchmark VG, configured as an operator would;
    ``read_session``: its reports through one lvm shell (``lvm_read_session``);
    ``metadata_parse``: after a change, read from the VG's metadata text
    (``lvm_metadata_parse``)."""
    overrides = {"volume_group": vg_name, "lvm_thin_pool_name": "pool",
                 "lvm_create_thin_pool": False,
                 "lock_path": tempfile.mkdtemp(prefix="dk-bench-locks-"),
                 "lvm_conf_file": os.path.join(conf_dir, "lvm.conf"),
                 "lvm_command_timeout": 600.0, "lvm_read_session": read_session,
                 "lvm_metadata_parse": metadata_parse}
    conf = load_backend_config(extra_opts=LVM_OPTS, overrides=overrides)
    executor = None
    if fill_pool_usage:
        filler = PoolUsageFiller(ProcessRunner(), "pool")
        executor = LVMExecutor(lvm_system_dir=conf_dir, timeout_s=600.0, runner=filler,
                               read_session=read_session)
        session = executor.session
        if session is not None:  # the shell's reports get the same pool usage
            shell_run = session.run

            def filled(argv: Any, env: Any, timeout_s: float) -> CommandResult | None:
                result = shell_run(argv, env, timeout_s)
                return None if result is None else filler.fill(list(argv), result)

            session.run = filled  # type: ignore[method-assign]
    return ThinLVMDriver(conf, executor=executor)


def driver_refresh(driver: ThinLVMDriver) -> dict[str, Any]:
    """A refresh as the volume manager asks for it: nothing changed since the last one,
    so the report is reused while the VG's metadata headers are unchanged."""
    return driver.get_volume_stats(refresh=True)


def driver_refresh_after_change(driver: ThinLVMDriver) -> dict[str, Any]:
    """A refresh right after a metadata change: the reused report forgotten (what a
    changed header does), so the VG is read again: with ``lvm_metadata_parse`` from
    its metadata text, else with one ``lvs``."""
    driver.vg.forget_report(ask_lvm=not driver.vg.parses_metadata)
    return driver.get_volume_stats(refresh=True)


# ---------------------------------------------------------------------------
# Cinder's path through os-brick

def make_brick(*, vg_name: str, lvm_conf: str, pool_name: str = "pool") -> Any:
    """os-brick's LVM for the VG, as Cinder's LVM driver builds it for lvm_type=thin.

    Its commands run in this process (privsep client mode off, so no privsep
    daemon round trip; Cinder pays that too, so this favours os-brick). The
    constructor's ``lvm_type='thin'`` would also run ``lvchange -ay`` on the pool,
    which needs device-mapper; it is built as 'default' and then given the pool,
    which is all the thin branch of the constructor does besides activating.
    """
    with warnings.catch_warnings():  # eventlet's deprecation notice, on import
        warnings.simplefilter("ignore")
        from os_brick import privileged
        from os_brick.local_dev import lvm as brick_lvm
        from os_brick.privileged import rootwrap

    privileged.default.set_client_mode(False)

    def execute(*cmd: str, **kwargs: Any) -> tuple[str, str]:
        out, err = rootwrap.execute(*cmd, **kwargs)
        if "size,data_percent" in cmd and out.strip().endswith(":"):
            out = out.rstrip() + DATA_PERCENT + "\n"  # as an active pool prints it
        return out, err

    vg = brick_lvm.LVM(vg_name, "sudo", lvm_type="default", executor=execute,
                       lvm_conf=lvm_conf, suppress_fd_warn=True)
    vg.vg_thin_pool = pool_name
    # os-brick keeps the LVM_SYSTEM_DIR prefix on the class, so the last LVM built
    # would decide for all; each refresh puts back its own (see cinder_refresh).
    vg.dk_cmd_prefix = list(brick_lvm.LVM.LVM_CMD_PREFIX)
    return vg


def cinder_refresh(vg: Any, *, backend_name: str = "lvm") -> dict[str, Any]:
    """What Cinder's ``LVMVolumeDriver._update_volume_stats`` does for lvm_type=thin."""
    type(vg).LVM_CMD_PREFIX = vg.dk_cmd_prefix
    vg.update_volume_group_info()
    total_volumes = len(vg.get_volumes())
    pool = {
        "pool_name": backend_name,
        "total_capacity_gb": vg.vg_thin_pool_size,
        "free_capacity_gb": vg.vg_thin_pool_free_space,
        "reserved_percentage": 0,
        "location_info": f"LVMVolumeDriver:host:{vg.vg_name}:thin:0",
        "QoS_support": False,
        "provisioned_capacity_gb": vg.vg_provisioned_capacity,
        "max_over_subscription_ratio": 20.0,
        "thin_provisioning_support": True,
        "thick_provisioning_support": False,
        "total_volumes": total_volumes,
        "multiattach": True,
        "backend_state": "up",
    }
    return {"volume_backend_name": backend_name, "vendor_name": "Open Source",
            "driver_version": "3.0.0", "storage_protocol": "iSCSI", "pools": [pool]}


# ---------------------------------------------------------------------------
# the floor

def bare_lvs(argv: list[str], env: dict[str, str]) -> str:
    """One ``lvs`` process of the same report, output read, nothing parsed."""
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed: {proc.stderr[-400:]!r}")
    return proc.stdout.decode()
