"""The wipe of a thick volume on delete (Cinder's ``volume_clear``): its extents go
back to the VG only after zeros overwrote it, so the next volume made on them cannot
read this one's data.

Thin volumes are never wiped: a thin pool hands out zeroed blocks. The wipe is one
``dd`` (``VolumeGroup.zero``) with a timeout that grows with the bytes wiped: the
LVM command timeout plus one second per MiB.
"""

from __future__ import annotations

import logging

from oslo_config import cfg

from driver_kit import BackendConfig
from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.read.report import LogicalVolume

__all__ = ["WIPE_OPTS", "WIPE_MIN_BYTES_PER_S", "wipe_thick"]

LOG = logging.getLogger(__name__)

#: the slowest a wipe may write before it is stopped: lvm_command_timeout plus one
#: second per MiB wiped
WIPE_MIN_BYTES_PER_S = 1024 * 1024

WIPE_OPTS = [
    cfg.StrOpt("volume_clear", default="zero",
               choices=[("none", "no wipe"), ("zero", "overwrite with zeros")],
               help="Method used to wipe a thick volume before its extents are freed on "
                    "delete (Cinder's option of the same name): 'zero' overwrites it with "
                    "zeros, 'none' does not wipe. Thin volumes are never wiped (a thin "
                    "pool hands out zeroed blocks). A wipe takes time proportional to the "
                    "size; the space is freed only once it completes."),
    cfg.IntOpt("volume_clear_size", default=0, min=0, max=1024,
               help="MiB to wipe at the start of a thick volume on delete (Cinder's "
                    "option of the same name); 0 wipes the whole volume."),
]


def wipe_thick(vg: VolumeGroup, lv: LogicalVolume, conf: BackendConfig) -> None:
    """Zero thick LV ``lv`` of ``vg`` as ``conf``'s ``volume_clear`` and
    ``volume_clear_size`` say (activating it first if a live read of that one LV says
    it is inactive); a wipe that fails
    raises, so the delete fails and the LV stays."""
    if conf.get("volume_clear", "zero") == "none":
        return
    clear_mib = conf.get("volume_clear_size", 0)
    nbytes = lv.size_bytes if not clear_mib else min(lv.size_bytes, clear_mib * 1024 ** 2)
    live = vg.lv_report(lv.name)  # active or not: the kernel's word, now
    if live is None or not live.is_active:
        vg.activate(lv.name)
    LOG.info("wiping %d bytes of thick volume %s/%s before removing it", nbytes,
             vg.vg_name, lv.name)
    vg.zero(lv.name, nbytes, timeout_s=vg.executor.timeout_s + nbytes / WIPE_MIN_BYTES_PER_S)
