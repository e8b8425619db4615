"""What runs LVM for a backend: real LVM commands or the embedded simulator.

The one place that decides, from the backend's configuration, whether the
driver's commands reach the host's LVM or ``LVMSimulator``; the driver only
receives an ``LVMExecutor`` and never knows which. Composition roots (the
CLI, the Cinder adapter, tests) may also build their own executor and pass
it to ``ThinLVMDriver(executor=...)``.
"""

from __future__ import annotations

import os
import sys

from oslo_config import cfg

from driver_kit import BackendConfig, GiB
from lvm_driver.run.executor import LVMExecutor

BACKEND_OPTS = [
    cfg.StrOpt("lvm_privilege", default="auto",
               choices=[("auto", "direct as root or on the simulator, else privsep"),
                        ("direct", "run LVM and read the devices itself, as root"),
                        ("privsep", "through the driver's privileged daemon")],
               help="How the driver reaches LVM and the devices: 'direct' runs LVM and "
                    "reads the devices itself (it must be root); 'privsep' sends every "
                    "command and read to the driver's privileged daemon "
                    "(lvm_driver.privileged), which checks them against this section of "
                    "the root-owned config file; 'auto': direct as root or on the "
                    "simulator, privsep otherwise."),
    cfg.StrOpt("lvm_root_helper",
               help="With lvm_privilege = privsep outside a service that sets its own root "
                    "helper (Cinder does): the command prefix that starts privsep-helper "
                    "as root, e.g. 'sudo' (the default). Never used for LVM itself."),
    cfg.FloatOpt("lvm_command_timeout", default=120.0, min=0.01, max=86400.0,
                 help="Seconds an LVM command may run before it is stopped."),
    cfg.StrOpt("lvm_backend", default="real",
               choices=[("real", "the host's LVM"), ("simulator", "the embedded simulator")],
               help="'real' runs LVM; 'simulator' runs the embedded LVM simulator."),
    cfg.StrOpt("lvm_simulator_state_file",
               help="JSON state file of the simulator (shared by every process using it)."),
    cfg.BoolOpt("lvm_read_session",
                help="Run LVM's reports (the stats and admission reads) in one long-lived "
                     "lvm shell per backend instead of one process each; writes always "
                     "start their own process. Unset: on for real LVM, off for the "
                     "simulator (which offers it only with lvm_simulator_state_file) and "
                     "in a process eventlet has patched (cinder-volume), where the "
                     "shell's reads never return."),
    cfg.IntOpt("lvm_read_session_max_commands", default=10_000, min=1, max=10_000_000,
               help="Reports one lvm shell answers before it is replaced by a new one."),
    cfg.IntOpt("lvm_simulator_vg_size_gb", default=100, min=1, max=1024 ** 3,
               help="Size of the volume group the simulator creates when its state has "
                    "none (stands for the operator's vgcreate)."),
]


def privilege_of(conf: BackendConfig) -> str:
    """'direct' or 'privsep': ``lvm_privilege``, 'auto' resolved (direct as root or on
    the simulator)."""
    privilege = conf.get("lvm_privilege", "auto")
    if privilege == "auto":
        simulated = conf.get("lvm_backend", "real") == "simulator"
        return "direct" if os.geteuid() == 0 or simulated else "privsep"
    return privilege


def make_executor(conf: BackendConfig) -> LVMExecutor:
    """The executor ``conf`` asks for. Direct: LVM's environment (``lvm_conf_file``),
    timeout and read session, running real LVM or, with ``lvm_backend = simulator``,
    the simulator, which then also stands for the operator's ``vgcreate``. Privsep:
    every command through the privileged daemon (``lvm_driver.privsep_runner``), which
    takes the VG, pool, LVM configuration and backend from the section itself."""
    conf_file = conf.get("lvm_conf_file")
    simulated = conf.get("lvm_backend", "real") == "simulator"
    timeout_s = conf.get("lvm_command_timeout", 120.0)
    if privilege_of(conf) == "privsep":
        from lvm_driver.privsep_runner import PrivsepRunner, use_helper  # loaded when used
        use_helper(conf.get("lvm_root_helper"),
                   [os.path.abspath(path) for path in conf.config_files])
        return LVMExecutor(runner=PrivsepRunner(conf.backend,
                                                vg_name=conf.get("volume_group")),
                           timeout_s=timeout_s)
    session = conf.get("lvm_read_session")
    settings = {"lvm_system_dir": os.path.dirname(conf_file) if conf_file else None,
                "timeout_s": timeout_s,
                "read_session": (not simulated and not green_process()) if session is None
                else session,
                "session_max_commands": conf.get("lvm_read_session_max_commands", 10_000)}
    if not simulated:
        return LVMExecutor(**settings)
    from lvm_driver.simulator import LVMSimulator  # only simulated backends load it
    simulator = LVMSimulator(state_file=conf.get("lvm_simulator_state_file"))
    size_bytes = conf.get("lvm_simulator_vg_size_gb", 100) * GiB
    return LVMExecutor(runner=simulator,
                       create_missing_vg=lambda name: simulator.create_vg(name, size_bytes),
                       **settings)


def green_process() -> bool:
    """Whether eventlet has patched this process (Cinder's services do): the lvm shell's
    select and pipe reads then block for good (seen in cinder-volume on real LVM)."""
    patcher = sys.modules.get("eventlet.patcher")
    return patcher is not None and bool(patcher.is_monkey_patched("select"))
