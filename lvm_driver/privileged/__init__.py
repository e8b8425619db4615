"""The LVM driver's one privileged daemon, started through oslo.privsep.

A driver running unprivileged (Cinder's ``cinder-volume``) reaches everything
root through the entrypoints of ``default`` (``lvm_driver.privileged.commands``
for LVM's commands, ``lvm_driver.privileged.devices`` for the PV header reads,
the thin pool's device-mapper status and the thick wipe). Each entrypoint takes
the backend's config section name first and reads the VG, the thin pool and
LVM's configuration from that section of the root-owned config files the daemon
was started with (``lvm_driver.privileged.backend``); names, sizes and tags are
checked again here, and the argv is built here by the builders ``VolumeGroup``
uses (``lvm_driver.commands.lvm_argv``). The root helper is allowed to start nothing but
``privsep-helper`` for this context (``etc/driver-kit/rootwrap.d``).
"""

from __future__ import annotations

from typing import Final

from oslo_privsep import capabilities as caps
from oslo_privsep import priv_context

from lvm_driver.run.command import LVMError

__all__ = ["default", "CONTEXT_NAME", "CONFIG_SECTION", "PrivilegeRefused"]

#: the context's Python name, as privsep-helper's --privsep_context names it
CONTEXT_NAME: Final = "lvm_driver.privileged.default"
#: the oslo.config section of the context's own options (user, capabilities,
#: helper_command, thread_pool_size), as oslo.privsep defines them
CONFIG_SECTION: Final = "lvm_driver_privileged"

default = priv_context.PrivContext(
    "lvm_driver.privileged",
    cfg_section=CONFIG_SECTION,
    pypath=CONTEXT_NAME,
    # LVM and the daemon's own reads: device-mapper ioctls and device nodes
    # (SYS_ADMIN, MKNOD), devices, /etc/lvm and /run/lock/lvm whatever their modes
    # (DAC_*), LVM's memory locking and priority during a suspend (IPC_LOCK,
    # SYS_NICE), its lock and archive files (CHOWN, FOWNER)
    capabilities=[caps.CAP_SYS_ADMIN, caps.CAP_MKNOD, caps.CAP_DAC_OVERRIDE,
                  caps.CAP_DAC_READ_SEARCH, caps.CAP_IPC_LOCK, caps.CAP_SYS_NICE,
                  caps.CAP_CHOWN, caps.CAP_FOWNER],
)


class PrivilegeRefused(LVMError):
    """The privileged daemon refused a request (another VG, pool or device, a bad
    name, size or tag, a config section or file it does not trust); nothing ran."""

    def __init__(self, message: str):
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (str(self),))
