"""What the VG holds, read from ``lvs`` by segment type and origin alone (never from
``lv_attr``, which the driver classifies by): the truth the COW-snapshot tests hold
the driver's figures to."""

from __future__ import annotations

from dataclasses import dataclass

from driver_kit import validate_stats
from lvm_driver.policy.tags import SNAPSHOT_TAG, VOLUME_TAG


@dataclass(frozen=True)
class VGTruth:
    """Bytes: the pool's volumes and snapshots, the VG's thick volumes, its COW
    snapshots' stores and its free extents."""

    thin_volumes: dict[str, int]
    thin_snapshots: dict[str, int]
    thick_volumes: dict[str, int]
    cow_snapshots: dict[str, int]
    vg_free: int


def vg_truth(lab, pool: str = "pool") -> VGTruth:
    out = lab.lvm("lvs", "--noheadings", "--units", "b", "--nosuffix", "--separator", "|",
                  "-o", "lv_name,lv_size,segtype,pool_lv,origin,lv_tags,vg_free",
                  lab.vg_name).stdout  # the pool is always there: never no row
    thin, snaps, thick, cow = {}, {}, {}, {}
    free = 0
    for line in filter(None, map(str.strip, out.splitlines())):
        name, size, segtype, pool_lv, origin, tags, vg_free = line.split("|")
        free = int(vg_free)
        tags = tags.split(",") if tags else []
        if segtype == "thin" and pool_lv == pool:
            snapshot = SNAPSHOT_TAG in tags or (origin and VOLUME_TAG not in tags)
            (snaps if snapshot else thin)[name] = int(size)
        elif segtype in ("linear", "striped"):
            (cow if origin else thick)[name] = int(size)
    return VGTruth(thin, snaps, thick, cow, free)


def pools_of(driver) -> dict[str, dict]:
    """The driver's freshly read pools by name, the report checked valid."""
    stats = driver.get_volume_stats(refresh=True)
    assert validate_stats(stats) == []
    return {pool["pool_name"]: pool for pool in stats["pools"]}
