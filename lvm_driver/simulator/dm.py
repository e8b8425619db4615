"""The simulated kernel's device-mapper status of a thin pool: what
``lvm_driver.read.dm_status.thin_pool_status`` answers on a real host (the same
record, its percentages computed as LVM prints them), from the simulated state.
"""

from __future__ import annotations

from typing import Any

from lvm_driver.read.dm_status import ThinPoolStatus
from lvm_driver.simulator.session import MD_BLOCK_BYTES, Output, Session

__all__ = ["thin_pool_status"]


def thin_pool_status(state: dict[str, Any], vg_name: str,
                     pool_name: str) -> ThinPoolStatus | None:
    """Pool ``vg_name/pool_name``'s status; None when it has no active device."""
    vg = state["vgs"].get(vg_name)
    pool = None if vg is None else vg["lvs"].get(pool_name)
    if pool is None or pool["kind"] != "thin-pool" or not pool["active"]:
        return None
    session = Session(state, Output())
    chunk = pool["chunk_bytes"]
    total_data = pool["extents"] * vg["extent_size"] // chunk
    used_data = -(-session.pool_used_bytes(vg, pool_name) // chunk)
    total_meta = pool["metadata_extents"] * vg["extent_size"] // MD_BLOCK_BYTES
    used_meta = session.pool_metadata_used(vg, pool_name) // MD_BLOCK_BYTES
    return ThinPoolStatus(
        transaction_id=vg["seqno"], used_metadata_blocks=used_meta,
        total_metadata_blocks=total_meta, used_data_blocks=used_data,
        total_data_blocks=total_data, data_block_bytes=chunk,
        mode="out_of_data_space" if used_data >= total_data else "rw", needs_check=False)
