"""From one report of the VG to the LVM driver's pools: whether the report can be
right, and the facts (``PoolFacts``) of the thin pool and of the VG's thick pool.

Pure functions of a ``VGReport`` (no command runs here): ``ThinLVMDriver``
reads the report once and hands it over, so every figure of a stats refresh
comes from that one read. What does not depend on the thin pool's usage (the
check, the sums over every LV) is computed once per report (``VGReport.derived``):
a refresh reusing the report while the VG's metadata is unchanged only lays the
pool's usage from device-mapper over it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from driver_kit import PoolFacts
from lvm_driver.policy.tags import SNAPSHOT_TAG, VOLUME_TAG
from lvm_driver.read.report import LogicalVolume, VGReport

__all__ = ["implausible", "is_snapshot", "thin_pool_usage", "thick_space", "pool_facts",
           "pools_down"]

#: LVM counts extents in 32 bits (a VG's, a PV's and an LV's extent count) and an
#: extent's size in 32-bit sectors: no VG LVM can hold has figures beyond these.
MAX_EXTENT_COUNT: Final = 2 ** 32 - 1
MAX_EXTENT_BYTES: Final = (2 ** 32 - 1) * 512


def _beyond_lvm(report: VGReport) -> str | None:
    """The first figure of ``report`` no VG of LVM can have, named, or None."""
    extent = report.extent_size_bytes
    if not 0 < extent <= MAX_EXTENT_BYTES:
        return (f"extent size {_figure(extent)} bytes is not within 1..{MAX_EXTENT_BYTES} "
                f"(LVM counts it in 32-bit sectors)")
    largest = max(report.lvs, key=lambda lv: lv.size_bytes, default=None)
    for what, size in (("VG size", report.vg_size_bytes), ("VG free", report.vg_free_bytes),
                       *([(f"LV {largest.name!r} size", largest.size_bytes)] if largest else [])):
        if size // extent > MAX_EXTENT_COUNT:
            return (f"{what} {_figure(size)} bytes is more than the {MAX_EXTENT_COUNT} "
                    f"extents of {extent} bytes LVM can count (32 bits)")
    return None


def _figure(value: int) -> str:
    """A figure for a one-line message: its digits, or its size when they are many."""
    bits = value.bit_length()
    return str(value) if bits <= 128 else f"(a number of {bits} bits)"


def implausible(report: VGReport, pool_name: str) -> str | None:
    """What makes ``report`` impossible for a backend with thin pool ``pool_name``, or
    None (no such pool, a VG inconsistent with itself, a dangling pool or origin)."""
    return report.summary(f"implausible:{pool_name}", lambda r: _implausible(r, pool_name))


def _implausible(report: VGReport, pool_name: str) -> str | None:
    pool = report.find_lv(pool_name)
    if pool is None:
        return (f"thin pool {pool_name!r} not found in it ({len(report.lvs)} LVs "
                f"listed: an empty or truncated report, or the pool is gone)")
    if not pool.is_thin_pool:
        return f"{pool_name!r} is not a thin pool (lv_attr {pool.attr.raw!r})"
    beyond = report.summary("beyond_lvm", _beyond_lvm, _beyond_lvm_after)
    if beyond:
        return beyond
    if report.vg_free_bytes > report.vg_size_bytes:
        return (f"VG free {report.vg_free_bytes} bytes, size {report.vg_size_bytes} "
                f"bytes, extent {report.extent_size_bytes} bytes")
    return report.summary("inconsistent", _inconsistent, _inconsistent_after)


def _beyond_lvm_after(report: VGReport, value: str | None, before: tuple[LogicalVolume, ...],
                      after: tuple[LogicalVolume, ...]) -> tuple[str | None] | None:
    """Still nothing beyond LVM when no new row is (the VG's figures are the same)."""
    extent = report.extent_size_bytes
    if value is None and all(lv.size_bytes // extent <= MAX_EXTENT_COUNT for lv in after):
        return (None,)
    return None


def _holds_extents(lv: LogicalVolume) -> bool:
    return lv.is_thin_pool or lv.is_thick or lv.is_cow_snapshot


def _inconsistent_after(report: VGReport, value: str | None,
                        before: tuple[LogicalVolume, ...],
                        after: tuple[LogicalVolume, ...]) -> tuple[str | None] | None:
    """Still consistent when only thin volumes came or changed (none went: a row may
    name it) and the extents held are the same, each new row's pool and origin listed."""
    if value is not None or {lv.name for lv in before} - {lv.name for lv in after}:
        return None
    held = [lv for lv in (*before, *after) if _holds_extents(lv)]
    if sum(lv.size_bytes for lv in held if lv in before) != sum(
            lv.size_bytes for lv in held if lv in after):
        return None
    for lv in after:
        for name in (lv.pool_lv, lv.origin):
            if name is not None and report.find_lv(name) is None:
                return None
    return (None,)


def _inconsistent(report: VGReport) -> str | None:
    """Extents held beyond the VG's allocated ones, or a dangling pool or origin."""
    # what holds extents of its own: pools, thick volumes, COW snapshots (never the
    # virtual size of a thin LV, even one that is a COW snapshot's origin)
    allocated = sum(lv.size_bytes for lv in report.lvs
                    if lv.is_thin_pool or lv.is_thick or lv.is_cow_snapshot)
    if allocated > report.vg_size_bytes - report.vg_free_bytes:
        return (f"its LVs hold {allocated} bytes of extents but the VG has only "
                f"{report.vg_size_bytes - report.vg_free_bytes} bytes allocated")
    for lv in report.lvs:
        if lv.pool_lv is not None and report.find_lv(lv.pool_lv) is None:
            return f"LV {lv.name!r} names thin pool {lv.pool_lv!r}, which is not listed"
        if lv.origin is not None and report.find_lv(lv.origin) is None:
            return f"LV {lv.name!r} names origin {lv.origin!r}, which is not listed"
    return None


def is_snapshot(lv: LogicalVolume) -> bool:
    """A thin LV that is a snapshot, not a volume (not provisioned capacity).

    The driver's snapshots carry SNAPSHOT_TAG, which outlives the origin
    (LVM forgets the origin once it is removed); an operator's thin LV with
    an origin is a snapshot unless it carries the volume tag (a copy).
    """
    return SNAPSHOT_TAG in lv.tags or (lv.is_thin_snapshot and VOLUME_TAG not in lv.tags)


def thin_pool_usage(total_bytes: int, data_percent: float,
                    metadata_percent: float) -> tuple[int, int]:
    """Used and free bytes of a thin pool of ``total_bytes`` from its usage percentages;
    free is also bounded by metadata room (full metadata maps no new block)."""
    used = min(total_bytes, math.ceil(total_bytes * data_percent / 100))
    metadata_room = math.floor(total_bytes * (100 - metadata_percent) / 100)
    return used, max(0, min(total_bytes - used, metadata_room))


def pool_facts(report: VGReport, vg_name: str, pool_name: str, *,
               offer_thick: bool) -> list[PoolFacts]:
    """The thin pool's facts, then (``offer_thick``) the thick pool's, from ``report``
    (one that ``implausible`` passed)."""
    pools = [_thin_pool_facts(report, vg_name, pool_name)]
    if offer_thick:
        pools.append(report.summary(f"thick-pool:{vg_name}",
                                    lambda r: _thick_pool_facts(r, vg_name)))
    return pools


def pools_down(vg_name: str, pool_name: str, *, offer_thick: bool,
               reason: str) -> list[PoolFacts]:
    """The same pools as ``pool_facts``, each down for ``reason``."""
    pools = [_unavailable(pool_name, thin=True, reason=reason)]
    if offer_thick:
        pools.append(_unavailable(vg_name, thin=False, reason=reason))
    return pools


def _thin_sums(report: VGReport, pool_name: str) -> "_ThinSums":
    """A thin pool's sums, from the report alone (its usage aside)."""
    return _ThinSums.of(report, pool_name)


def _thin_pool_facts(report: VGReport, vg_name: str, pool_name: str) -> PoolFacts:
    pool = report.get_lv(pool_name)
    if pool.data_percent is None or pool.metadata_percent is None:
        return _unavailable(pool_name, thin=True,
                            reason=f"usage of thin pool {vg_name}/{pool_name} is unknown "
                                   f"(pool inactive?)")
    total = pool.size_bytes
    used, free = thin_pool_usage(total, pool.data_percent, pool.metadata_percent)
    sums = report.summary(f"thin-pool:{pool_name}", lambda r: _thin_sums(r, pool_name),
                          lambda r, value, before, after: value.after(pool_name, before,
                                                                      after))
    return PoolFacts(
        pool_name=pool_name, total_bytes=total, free_bytes=free,
        provisioned_bytes=sums.provisioned_bytes, snapshot_bytes=sums.snapshot_bytes,
        thin_provisioning_support=True, thick_provisioning_support=False,
        total_volumes=sums.volumes, used_bytes=used,
        driver_used_bytes=sums.driver_used_bytes,
        data_percent=pool.data_percent, metadata_percent=pool.metadata_percent,
        location_info=f"ThinLVMDriver:{vg_name}:{pool_name}",
        extra={"volume_group": vg_name, "snapshot_count": sums.snapshots})


@dataclass(frozen=True, slots=True)
class _ThinSums:
    """A thin pool's volumes and snapshots, counted and summed (bytes), and the driver's
    volumes whose usage is unknown (the bulk read asks the kernel nothing per LV) or
    known (their used bytes summed)."""

    volumes: int
    provisioned_bytes: int
    snapshots: int
    snapshot_bytes: int
    ours_unknown: int
    ours_used_bytes: int

    @property
    def driver_used_bytes(self) -> int | None:
        return None if self.ours_unknown else self.ours_used_bytes

    @classmethod
    def of(cls, report: VGReport, pool_name: str) -> "_ThinSums":
        return cls(0, 0, 0, 0, 0, 0).after(pool_name, (), report.thin_volumes(pool_name))[0]

    def after(self, pool_name: str, before: tuple[LogicalVolume, ...],
              after: tuple[LogicalVolume, ...]) -> tuple["_ThinSums"]:
        """The sums with the ``before`` rows taken out and the ``after`` rows put in."""
        sums = [self.volumes, self.provisioned_bytes, self.snapshots, self.snapshot_bytes,
                self.ours_unknown, self.ours_used_bytes]
        for rows, sign in ((before, -1), (after, 1)):
            for lv in rows:
                if not (lv.is_thin_volume and lv.pool_lv == pool_name):
                    continue
                snapshot = is_snapshot(lv)
                sums[2 * snapshot] += sign
                sums[2 * snapshot + 1] += sign * lv.size_bytes
                if not snapshot and VOLUME_TAG in lv.tags:
                    if lv.data_percent is None:
                        sums[4] += sign
                    else:
                        sums[5] += sign * math.ceil(lv.size_bytes * lv.data_percent / 100)
        return (_ThinSums(*sums),)


def thick_space(report: VGReport) -> tuple[int, int]:
    """The bytes of the VG's thick volumes and of its COW snapshots (the thick pool's
    volumes, and the thick space it holds besides them)."""
    return (sum(lv.size_bytes for lv in report.thick_volumes()),
            sum(lv.size_bytes for lv in report.cow_snapshots()))


def _thick_pool_facts(report: VGReport, vg_name: str) -> PoolFacts:
    provisioned, cow = thick_space(report)
    return PoolFacts(
        pool_name=vg_name, total_bytes=report.vg_free_bytes + provisioned + cow,
        free_bytes=report.vg_free_bytes, provisioned_bytes=provisioned,
        snapshot_bytes=cow, thin_provisioning_support=False,
        thick_provisioning_support=True, total_volumes=len(report.thick_volumes()),
        used_bytes=provisioned + cow, location_info=f"ThinLVMDriver:{vg_name}:thick",
        extra={"volume_group": vg_name, "snapshot_count": len(report.cow_snapshots())})


def _unavailable(name: str, *, thin: bool, reason: str) -> PoolFacts:
    return PoolFacts(pool_name=name, total_bytes=0, free_bytes=0, provisioned_bytes=0,
                     thin_provisioning_support=thin, thick_provisioning_support=not thin,
                     unavailable_reason=reason)
