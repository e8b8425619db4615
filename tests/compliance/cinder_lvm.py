"""A Cinder LVM host for the harness's Cinder front end: cinder.conf for Cinder's own
``LVMVolumeDriver`` (thin), Cinder's root helper and rootwrap filters, and LVM.

Cinder's LVM code runs ``sudo cinder-rootwrap CONF env LC_ALL=C lvs ...`` (its root
helper is fixed: ``cinder.utils.get_root_helper``). Here ``cinder-rootwrap`` is
Cinder's own, with Cinder's ``volume.filters``; ``sudo`` is a pass-through in a
directory put first on PATH (on the host lane nothing runs as root; in the VM the
harness already is root). On the simulator, ``exec_dirs`` and PATH lead the LVM
commands to stand-ins running ``python -m lvm_driver.simulator --state FILE``; on
real LVM, to the system's.
"""

from __future__ import annotations

import os
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable

from driver_kit.compliance import BackendTruth, ComplianceHooks
from lvm_driver.compliance import hooks as kit_lvm_hooks
from lvm_driver.compliance.cinder_hooks import cinder_lvm_hooks
from lvm_driver.simulator import LVMSimulator

REPO = Path(__file__).resolve().parents[2]
DRIVER = "cinder.volume.drivers.lvm.LVMVolumeDriver"
BACKEND = "lvm"
VG = "cinder-volumes"
#: the simulator's state file the hooks read (set by the test that makes the host)
STATE_ENV = "DK_TEST_CINDER_LVM_STATE"
_LVM_COMMANDS = ("lvs", "vgs", "pvs", "lvdisplay", "lvcreate", "lvextend", "lvremove",
                 "lvchange", "lvrename", "lvconvert", "lvm")


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def make_host(workdir: Path, *, state: Path | None, vg: str = VG,
              passthrough_rootwrap: bool = False) -> dict[str, str]:
    """Write the host into ``workdir``; return the environment the harness runs in.
    ``state``: the simulator's state file (its VG ``vg`` made here), or None for real
    LVM (``vg`` exists); ``passthrough_rootwrap``: on real LVM, as root, run the
    commands without cinder-rootwrap's filters."""
    bin_dir = workdir / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "sudo", 'exec "$@"')
    exec_dirs = "/usr/sbin,/usr/bin,/sbin,/bin"
    if state is None and passthrough_rootwrap:
        # a Python start per LVM command costs ~4 s under the VM's TCG; the filters are
        # proven on the host lane, and the harness is root here already
        _script(bin_dir / "cinder-rootwrap", 'shift\nexec "$@"')
    if state is not None:
        LVMSimulator(str(state)).create_vg(vg, 10 * 1024 ** 3)
        for command in _LVM_COMMANDS:
            _script(bin_dir / command, f'PYTHONPATH="{REPO}" exec "{sys.executable}" '
                                       f'-m lvm_driver.simulator --state "{state}" '
                                       f'{command} "$@"')
        exec_dirs = f"{bin_dir},{exec_dirs}"
    filters = Path(sys.prefix) / "etc" / "cinder" / "rootwrap.d"
    (workdir / "rootwrap.conf").write_text(
        f"[DEFAULT]\nfilters_path={filters}\nexec_dirs={exec_dirs}\nuse_syslog=False\n")
    (workdir / "cinder.conf").write_text(f"""\
[DEFAULT]
enabled_backends = {BACKEND}
rootwrap_config = {workdir / 'rootwrap.conf'}
state_path = {workdir}
lock_path = {workdir / 'locks'}

[{BACKEND}]
volume_driver = {DRIVER}
volume_group = {vg}
lvm_type = thin
volume_backend_name = {BACKEND}
target_helper = fake
""")
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}:{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    env.pop("PYTHONWARNINGS", None)
    if state is not None:
        env[STATE_ENV] = str(state)
    return env


def simulator_hooks() -> ComplianceHooks:
    """The Cinder LVM hooks reading the simulator's state file named by STATE_ENV."""
    state = os.environ[STATE_ENV]
    return cinder_lvm_hooks(lambda: LVMSimulator(state).executor())


def make_adapter_host(workdir: Path) -> dict[str, str]:
    """cinder.conf for this project's Cinder adapter around the LVM driver on its
    simulator (in the harness's process); the environment to run the harness in."""
    (workdir / "cinder.conf").write_text(f"""\
[DEFAULT]
enabled_backends = kit-lvm
state_path = {workdir}
lock_path = {workdir / 'locks'}

[kit-lvm]
volume_driver = contrib.cinder_adapter.DriverKitVolumeDriver
driver_kit_driver = lvm_driver.driver.ThinLVMDriver
volume_backend_name = kit-lvm
lvm_backend = simulator
lvm_simulator_state_file = {workdir / 'state.json'}
volume_group = kitvg
lvm_thin_pool_name = pool
target_helper = fake
""")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env.pop("PYTHONWARNINGS", None)
    return env


def _on_kit(hook: Callable[..., Any]) -> Callable[..., Any]:
    return lambda driver, *args: hook(driver.cinder_driver.kit, *args)


def adapter_hooks() -> ComplianceHooks:
    """The LVM driver's own hooks, on the driver inside the adapter, with the backend's
    names of Cinder's volumes given back as the checks' names."""
    base = kit_lvm_hooks.COMPLIANCE_HOOKS

    def read_truth(driver: Any) -> BackendTruth:
        truth = base.read_truth(driver.cinder_driver.kit)
        return replace(truth, volumes=tuple(
            replace(v, name=driver.check_name(v.name),
                    snapshot_of=v.snapshot_of and driver.check_name(v.snapshot_of))
            for v in truth.volumes))
    wrapped = {f.name: _on_kit(getattr(base, f.name)) for f in fields(base)
               if getattr(base, f.name) is not None}
    # these name one of the checks' volumes (renamed when Cinder manages one)
    for name in ("write_data", "read_data", "resize_out_of_band", "delete_out_of_band"):
        if getattr(base, name) is not None:
            wrapped[name] = _named(getattr(base, name))
    wrapped["read_truth"] = read_truth
    return replace(base, **wrapped)


def _named(hook: Callable[..., Any]) -> Callable[..., Any]:
    return lambda driver, name, *args: hook(driver.cinder_driver.kit,
                                            driver.cinder_name(name), *args)
