"""lvm_driver: the reference driver of driver_kit, on LVM thin pools.

``ThinLVMDriver`` reports one pool per thin pool (plus, optionally, a thick
pool of the VG's free extents) from one read of the VG per refresh (no LVM
process while the VG's metadata is unchanged, see ``report_cache``), and
enforces the over-subscription ratio on every create. ``LVMSimulator`` emulates the LVM
commands it issues and is the embedded default backend.
"""

from lvm_driver.commands.lvm import VolumeGroup, validate_lv_name, validate_vg_name
from lvm_driver.driver import LVM_OPTS, ThinLVMDriver, list_opts
from lvm_driver.run.executor import CommandResult, LVMExecutor

__all__ = ["CommandResult", "LVMExecutor", "LVMSimulator", "LVM_OPTS", "ThinLVMDriver",
           "VolumeGroup", "list_opts", "validate_lv_name", "validate_vg_name"]


def __getattr__(name: str) -> object:
    """``LVMSimulator`` is loaded on first use, so ``python -m lvm_driver.simulator``
    runs the module once (no runpy warning) and real-LVM hosts never load it."""
    if name == "LVMSimulator":
        from lvm_driver.simulator import LVMSimulator
        return LVMSimulator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
