"""The simulated kernel's device-mapper status of a thin pool: what
``lvm_driver.dm_status.thin_pool_status`` answers on a real host, computed from
the simulated state (the same used and total figures the simulator's ``lvs``
prints as the pool's data% and metadata%).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lvm_driver.simulator.session import MD_BLOCK_BYTES, Output, Session
from lvm_driver.simulator.sizes import percent_text

__all__ = ["SimThinPoolStatus", "thin_pool_status"]


@dataclass(frozen=True, slots=True)
class SimThinPoolStatus:
    """The fields of ``dm_status.ThinPoolStatus``, percentages as the simulator's lvs
    prints them."""

    transaction_id: int
    used_metadata_blocks: int
    total_metadata_blocks: int
    used_data_blocks: int
    total_data_blocks: int
    data_block_bytes: int
    mode: str
    needs_check: bool

    @property
    def data_percent(self) -> float:
        return float(percent_text(self.used_data_blocks, self.total_data_blocks))

    @property
    def metadata_percent(self) -> float:
        return float(percent_text(self.used_metadata_blocks, self.total_metadata_blocks))


def thin_pool_status(state: dict[str, Any], vg_name: str,
                     pool_name: str) -> SimThinPoolStatus | None:
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
    return SimThinPoolStatus(
        transaction_id=vg["seqno"], used_metadata_blocks=used_meta,
        total_metadata_blocks=total_meta, used_data_blocks=used_data,
        total_data_blocks=total_data, data_block_bytes=chunk,
        mode="out_of_data_space" if used_data >= total_data else "rw", needs_check=False)
