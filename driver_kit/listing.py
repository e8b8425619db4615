"""What a backend holds, volume by volume: the records behind ``driver-kit list`` and
``show``.

A driver that can list its backend implements ``backend_list_volumes()`` (the
``ListsVolumes`` protocol); the kit's front ends ask for it only when present, so
a driver without it still gets everything else. Each record says who made the
volume: the driver (its own tag on the backend) or someone else (an operator, out
of band), because only the driver's may be deleted by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, Sequence, runtime_checkable

from driver_kit.units import bytes_to_gb_up

__all__ = ["ListsVolumes", "VolumeRecord"]


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeRecord:
    """One volume or snapshot as the backend has it (``size_bytes``: exact bytes).

    ``provisioning`` is ``thin`` or ``thick`` for volumes, and for snapshots how
    their space is held (``thin``, or ``cow`` for an old-style copy-on-write
    snapshot that takes thick space); ``origin`` is the volume it was taken or
    copied from, as the backend records it (None: none, or no longer known); ``owner`` is ``driver`` for what this
    driver made and ``operator`` for anything made outside it.
    """

    name: str
    kind: Literal["volume", "snapshot"]
    provisioning: str
    size_bytes: int
    pool_name: str
    origin: str | None = None
    owner: Literal["driver", "operator"]

    @property
    def size_gb(self) -> float:
        """The size in GiB, rounded up to 2 decimals (never shown smaller than it is)."""
        return bytes_to_gb_up(self.size_bytes)

    def to_dict(self) -> dict[str, Any]:
        """The record for JSON and tables: GiB with 2 decimals beside the exact bytes."""
        return {"name": self.name, "kind": self.kind, "provisioning": self.provisioning,
                "size_gb": self.size_gb, "size_bytes": self.size_bytes,
                "pool": self.pool_name, "origin": self.origin, "owner": self.owner}


@runtime_checkable
class ListsVolumes(Protocol):
    """A driver that can list every volume and snapshot its backend holds."""

    def backend_list_volumes(self) -> Sequence[VolumeRecord]:
        """Every volume and snapshot on the backend's pools, the operator's too, by name,
        from one fresh read of the backend."""
