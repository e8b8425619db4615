"""A privileged daemon of the LVM driver started for real, for the host-lane tests.

``privsep-helper`` runs as a separate process (the root helper is ``env``, which
only lets it import this checkout), with a root-owned config file whose sections
run on the simulator's state file. Several sections, each a case the daemon must
serve or refuse.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from driver_kit import load_backend_config, make_conf
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
from lvm_driver.privsep_runner import forget_helper, use_helper
from lvm_driver.simulator import LVMSimulator

REPO = Path(__file__).resolve().parents[2]
SECTION = "lvm1"
VG = "dkvg"
POOL = "dkvg-pool"
GiB = 1 << 30


@dataclass
class Lab:
    """The daemon's config file, its simulator state and the operator's view of it."""

    root: Path
    conf: Path
    state: Path
    sim: LVMSimulator

    def driver(self, section: str = SECTION) -> ThinLVMDriver:
        """A driver of ``section`` running everything through the daemon."""
        conf = load_backend_config(make_conf([str(self.conf)]), section, extra_opts=LVM_OPTS)
        return ThinLVMDriver(conf)

    def lv_names(self, vg: str = VG) -> set[str]:
        return set(self.sim.state()["vgs"][vg]["lvs"])


def root_helper() -> str:
    """``env``: the helper runs as this (root) user, seeing this checkout and venv."""
    return (f"env PYTHONPATH={REPO} PATH={Path(sys.executable).parent}:/usr/sbin:/usr/bin:"
            f"/sbin:/bin")


def config_text(root: Path, state: Path) -> str:
    return f"""[DEFAULT]
enabled_backends = {SECTION},notours,badconf

[{SECTION}]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = {VG}
lvm_backend = simulator
lvm_simulator_state_file = {state}
lvm_privilege = privsep
lvm_offer_thick = true
lvm_metadata_parse = true
lvm_thin_pool_size_percent = 50
lock_path = {root / 'locks'}
lvm_root_helper = {root_helper()}

[notours]
volume_driver = cinder.volume.drivers.lvm.LVMVolumeDriver
volume_group = othervg
lvm_backend = simulator
lvm_simulator_state_file = {state}

[disabled]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = othervg
lvm_backend = simulator
lvm_simulator_state_file = {state}

[badconf]
volume_driver = lvm_driver.driver.ThinLVMDriver
volume_group = {VG}
lvm_backend = simulator
lvm_simulator_state_file = {state}
lvm_conf_file = {root / 'userdir' / 'lvm.conf'}
"""


def make_lab(root: Path) -> Lab:
    """VGs dkvg (the backend's) and othervg (a decoy), the config, the daemon's helper."""
    root.mkdir(parents=True, exist_ok=True)
    state = root / "state.json"
    sim = LVMSimulator(state_file=str(state))
    sim.create_vg(VG, 20 * GiB)
    sim.create_vg("othervg", 4 * GiB)
    sim.run(["lvcreate", "-T", "-L", "1g", "-n", "otherpool", "othervg"])
    sim.run(["lvcreate", "-T", "-V", "1g", "-n", "precious", "othervg/otherpool"])
    (root / "userdir").mkdir()
    (root / "userdir" / "lvm.conf").write_text("global {}\n")
    os.chown(root / "userdir", 1000, 1000)
    conf = root / "driver.conf"
    conf.write_text(config_text(root, state))
    conf.chmod(0o644)
    use_helper(root_helper(), [str(conf)])
    return Lab(root=root, conf=conf, state=state, sim=sim)


def close_lab() -> None:
    forget_helper()
