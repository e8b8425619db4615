"""Listing, adopting and releasing LVs, retype and revert for ``ThinLVMDriver`` (a mixin).

The listing (``backend_list_volumes``) shows every volume and snapshot of the pools
with who made it: the driver (its tag) or an operator.
Manage adopts an operator's LV as a volume (or a thin snapshot as a snapshot):
``lvrename`` to the name Cinder gives it, then ``lvchange --addtag`` of the
driver's tag, after which the driver may delete it. Capacity-neutral: the
pools' provisioned capacity counts every LV already, whoever made it, so no
admission runs. Unmanage removes the driver's tags (the LV keeps its name and
data) and the driver never deletes it again. An LV the driver already owns
is "already managed"; an open one (attached, mounted, exported) is "in use",
as Cinder's LVM driver says; both are refused, and listed with Cinder's
``reason_not_safe``. A volume with snapshots may be adopted (its snapshots
after it); the driver then refuses to delete it while they exist. An
unmanaged copy that still has its origin counts as a snapshot from then on,
as any operator's thin LV with an origin does.

Revert follows Cinder's LVM driver: ``lvconvert --merge`` of the snapshot,
the volume deactivated and activated again, the snapshot made anew.

"Open" is the kernel's word, asked again for up to ``OPEN_GRACE_S`` before a
refusal: udev opens a new LV for a moment to probe it, and that is no user of
the volume.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Mapping

from driver_kit import (AlreadyExists, InvalidInput, NotFound, SnapshotNotFound, VolumeBusy,
                        VolumeInfo, VolumeNotFound, VolumeRecord)
from driver_kit.driver import provisioning_type
from driver_kit.units import GiB
from lvm_driver.commands.lvm import LogicalVolume, VGReport
from lvm_driver.policy.tags import REQUEST_TAG_PREFIX, SNAPSHOT_TAG, VOLUME_TAG

LOG = logging.getLogger(__name__)

__all__ = ["ManageMixin", "REFERENCE_KEY"]

#: the key of Cinder's existing_ref that names the LV, as for Cinder's LVM driver
REFERENCE_KEY = "source-name"

_VOLUME = "a volume"
_SNAPSHOT = "a snapshot"

#: how long an LV seen open is watched for its close before a refusal (udev's probe)
OPEN_GRACE_S = 3.0
_OPEN_RECHECK_S = 0.2


class ManageMixin:
    """Manage, unmanage, manageable listings, retype and revert on LVM."""

    # Uses ThinLVMDriver's vg, vg_name, offer_thick, _read, _kind, _info,
    # _snapshots_of, backend_find_volume, validate_name and the kit's _invalidate.

    # ------------------------------------------------------------ checks
    @staticmethod
    def _tag_of(kind: str) -> str:
        return VOLUME_TAG if kind == _VOLUME else SNAPSHOT_TAG

    def _live_unless_closing(self, name: str) -> LogicalVolume | None:
        """LV ``name`` as the kernel shows it now (None: gone); if open, asked again
        until it closes or ``OPEN_GRACE_S`` passes after the first answer (a udev
        probe closes within it; however slow ``lvs`` is, there is a second look)."""
        live = self.vg.lv_report(name)
        deadline = time.monotonic() + OPEN_GRACE_S
        while live is not None and live.attr.device_open and time.monotonic() < deadline:
            time.sleep(_OPEN_RECHECK_S)
            live = self.vg.lv_report(name)
        return live

    def _referenced(self, existing_ref: Any) -> str:
        """The LV name in ``existing_ref`` (``{"source-name": <lv>}``), or InvalidInput."""
        if not isinstance(existing_ref, Mapping) or REFERENCE_KEY not in existing_ref:
            raise InvalidInput(f"the reference must be a mapping with {REFERENCE_KEY!r} "
                               f"naming the LV, got {existing_ref!r}")
        return self.validate_name(existing_ref[REFERENCE_KEY])

    def _why_not(self, lv: LogicalVolume, kind: str, is_open: bool | None) -> str | None:
        """Why ``lv`` cannot be adopted as a ``kind`` ("already managed", "... in use");
        ``is_open``: whether the kernel has it open (a live read's ``lv_attr``)."""
        what = self._kind(lv)
        if what != kind:
            return f"it is {what}, not {kind}"
        if self._tag_of(kind) in lv.tags:
            return "already managed"
        if is_open:
            return f"{'volume' if kind == _VOLUME else 'snapshot'} in use"
        if not lv.is_thin_volume and not self.offer_thick:
            return "a thick LV, and lvm_offer_thick is false (no thick pool to hold it)"
        return None

    def _adoptable(self, existing_ref: Any, kind: str) -> tuple[VGReport, LogicalVolume]:
        """The LV ``existing_ref`` names, checked adoptable as a ``kind``, or a clear error."""
        name = self._referenced(existing_ref)
        report = self._read()
        lv = report.find_lv(name)
        if lv is None:
            raise (VolumeNotFound if kind == _VOLUME else SnapshotNotFound)(
                f"no logical volume {self.vg_name}/{name} to manage")
        live = self._live_unless_closing(name)
        reason = self._why_not(lv, kind, live is not None and live.attr.device_open)
        if reason == "already managed":
            raise AlreadyExists(f"logical volume {self.vg_name}/{name} is already managed "
                                f"by this driver")
        if reason is not None and reason.endswith("in use"):
            raise VolumeBusy(f"logical volume {self.vg_name}/{name}: {reason} (open: "
                             f"attached, mounted or exported): nothing was changed")
        if reason is not None:
            raise InvalidInput(f"logical volume {self.vg_name}/{name} cannot be managed: "
                               f"{reason}")
        return report, lv

    # ------------------------------------------------------------ manage
    def manage_existing_get_size(self, existing_ref: Any) -> int:
        """Size in GiB (rounded up) of the LV ``existing_ref`` names, checked adoptable."""
        return self._info(self._adoptable(existing_ref, _VOLUME)[1]).size_gb

    def manage_existing_snapshot_get_size(self, existing_ref: Any) -> int:
        """Size in GiB (rounded up) of the thin snapshot ``existing_ref`` names."""
        return self._info(self._adoptable(existing_ref, _SNAPSHOT)[1]).size_gb

    def manage_existing(self, name: str, existing_ref: Any, *,
                        pool_name: str | None = None,
                        extra_specs: Mapping[str, Any] | None = None) -> VolumeInfo:
        """Adopt the LV ``existing_ref`` names as volume ``name``: renamed, then tagged.

        ``pool_name`` (the pool Cinder placed the volume in) and the type's
        ``provisioning:type`` must be the LV's; nothing changes otherwise.
        """
        name = self.validate_name(name)
        _, lv = self._adoptable(existing_ref, _VOLUME)
        info = self._info(lv)
        if pool_name is not None and pool_name != info.pool_name:
            raise InvalidInput(f"logical volume {self.vg_name}/{lv.name} is in pool "
                               f"{info.pool_name!r}, not {pool_name!r}")
        wanted = provisioning_type(extra_specs)
        if wanted is not None and (wanted == "thin") != info.thin:
            raise InvalidInput(f"logical volume {self.vg_name}/{lv.name} is "
                               f"{'thin' if info.thin else 'thick'}, the volume type asks "
                               f"for {wanted}")
        self._adopt(lv.name, name, _VOLUME)
        return VolumeInfo(name=name, size_gb=info.size_gb, size_bytes=info.size_bytes,
                          pool_name=info.pool_name, thin=info.thin)

    def manage_existing_snapshot(self, name: str, existing_ref: Any,
                                 volume_name: str) -> VolumeInfo:
        """Adopt the thin snapshot ``existing_ref`` names as snapshot ``name`` of
        ``volume_name`` (which must be its origin)."""
        name, volume_name = self.validate_name(name), self.validate_name(volume_name)
        _, lv = self._adoptable(existing_ref, _SNAPSHOT)
        if lv.origin != volume_name:
            raise InvalidInput(f"logical volume {self.vg_name}/{lv.name} is a snapshot of "
                               f"{lv.origin or 'a removed volume'}, not of {volume_name!r}")
        self._adopt(lv.name, name, _SNAPSHOT)
        info = self._info(lv)
        return VolumeInfo(name=name, size_gb=info.size_gb, size_bytes=info.size_bytes,
                          pool_name=info.pool_name, thin=True)

    def _adopt(self, old: str, new: str, kind: str) -> None:
        """Rename, then tag: a failed tag leaves an untagged LV the driver never deletes
        (renamed back when LVM lets it)."""
        if old != new:
            if self._read().find_lv(new) is not None:
                raise AlreadyExists(f"logical volume {self.vg_name}/{new} already exists: "
                                    f"{old} was not renamed")
            self.vg.rename(old, new)
        try:
            self.vg.add_tags(new, (self._tag_of(kind),))
        except Exception:
            if old != new:
                try:
                    self.vg.rename(new, old)
                except Exception:  # report the tag's failure, not this one's
                    LOG.exception("renaming %s back to %s after a failed tag failed", new, old)
            raise
        LOG.info("managing logical volume %s/%s as %s %s", self.vg_name, old, kind, new)
        self._invalidate()

    def unmanage(self, name: str) -> None:
        """Release volume ``name``: its driver tags go, the LV and its data stay."""
        self._release(name, _VOLUME, VolumeNotFound(f"no volume {name!r}"))

    def unmanage_snapshot(self, name: str) -> None:
        """Release snapshot ``name``: its driver tags go, the LV stays."""
        self._release(name, _SNAPSHOT, SnapshotNotFound(f"no snapshot {name!r}"))

    def _release(self, name: str, kind: str, missing: NotFound) -> None:
        lv = self._read().find_lv(self.validate_name(name))
        if lv is None or self._kind(lv) != kind:
            raise missing
        tag = self._tag_of(kind)
        if tag not in lv.tags:
            raise InvalidInput(f"logical volume {self.vg_name}/{name} is not managed by "
                               f"this driver: nothing to unmanage")
        ours = [t for t in lv.tags if t == tag or t.startswith(REQUEST_TAG_PREFIX)]
        self.vg.remove_tags(name, ours)
        self._invalidate()

    # ------------------------------------------------------------ listings
    def manageable_volumes(self) -> list[dict[str, Any]]:
        """Every volume-like LV, in Cinder's ``get_manageable_volumes`` entry shape."""
        return self._manageable(_VOLUME)

    def manageable_snapshots(self) -> list[dict[str, Any]]:
        """Every thin snapshot LV, in Cinder's ``get_manageable_snapshots`` entry shape."""
        return self._manageable(_SNAPSHOT)

    def backend_list_volumes(self) -> list[VolumeRecord]:
        """Every volume and snapshot of the driver's pools, the operator's too, by name,
        from one read of the VG (no live read: nothing asks the kernel per LV).

        What counts is what the pools count (``_kind``), plus an operator's COW
        snapshots, whose extents are thick space in the VG."""
        records = []
        for lv in self._read().lvs:
            kind = self._kind(lv)
            if kind in (_VOLUME, _SNAPSHOT):
                info = self._info(lv)
                records.append(VolumeRecord(
                    name=lv.name, kind="volume" if kind == _VOLUME else "snapshot",
                    provisioning="thin" if info.thin else "thick",
                    size_bytes=lv.size_bytes, pool_name=info.pool_name, origin=lv.origin,
                    owner="driver" if self._tag_of(kind) in lv.tags else "operator"))
            elif lv.is_cow_snapshot:
                records.append(VolumeRecord(
                    name=lv.name, kind="snapshot", provisioning="cow",
                    size_bytes=lv.size_bytes, pool_name=self.vg_name,
                    origin=lv.origin, owner="operator"))
        return sorted(records, key=lambda record: record.name)

    def _manageable(self, kind: str) -> list[dict[str, Any]]:
        report = self._read()
        # which LVs are open: one lvs that asks the kernel about each LV (a rare listing)
        is_open = {lv.name: lv.attr.device_open for lv in self.vg.live_report().lvs}
        entries = []
        for lv in report.lvs:
            if self._kind(lv) != kind or (lv.is_thick and not self.offer_thick):
                continue
            reason = self._why_not(lv, kind, is_open.get(lv.name))
            info = self._info(lv)
            snapshots = self._snapshots_of(report, lv.name)
            entry = {"reference": {REFERENCE_KEY: lv.name}, "size": info.size_gb,
                     "safe_to_manage": reason is None, "reason_not_safe": reason,
                     "cinder_id": None,
                     "extra_info": f"{'thin' if info.thin else 'thick'} LV in pool "
                                   f"{info.pool_name}" + (
                                       f"; snapshots (manage them after it): "
                                       f"{', '.join(snapshots)}" if snapshots else "")}
            if kind == _SNAPSHOT:
                entry["source_reference"] = {REFERENCE_KEY: lv.origin}
            entries.append(entry)
        return entries

    # ------------------------------------------------------------ retype, revert
    def retype(self, name: str, extra_specs: Mapping[str, Any] | None,
               pool_name: str | None) -> bool:
        """True when volume ``name`` may keep its LV under the new type: the same pool and
        provisioning type; False asks Cinder to migrate it."""
        volume = self.backend_find_volume(self.validate_name(name))  # type: ignore[attr-defined]
        if volume is None:
            raise VolumeNotFound(f"no volume {name!r}")
        wanted = provisioning_type(extra_specs)
        same_type = wanted is None or (wanted == "thin") == volume.thin
        return same_type and pool_name in (None, volume.pool_name)

    def revert_to_snapshot(self, name: str, snapshot_name: str) -> None:
        """Give volume ``name`` the data of its snapshot ``snapshot_name``, as Cinder's LVM
        driver does: merge the snapshot, deactivate and activate the volume, make the
        snapshot anew (same name, same data). Capacity-neutral, so not admitted."""
        name, snapshot_name = self.validate_name(name), self.validate_name(snapshot_name)
        report = self._read()
        volume, snapshot = report.find_lv(name), report.find_lv(snapshot_name)
        if volume is None or self._kind(volume) != _VOLUME:
            raise VolumeNotFound(f"no volume {name!r}")
        if snapshot is None or self._kind(snapshot) != _SNAPSHOT:
            raise SnapshotNotFound(f"no snapshot {snapshot_name!r}")
        if snapshot.origin != name:
            raise InvalidInput(f"snapshot {snapshot_name!r} is not a snapshot of {name!r}")
        if snapshot.size_bytes != volume.size_bytes:
            raise InvalidInput(f"volume {name!r} was resized since snapshot "
                               f"{snapshot_name!r} was taken: nothing was reverted")
        live = self._live_unless_closing(name)
        if live is None:
            raise VolumeNotFound(f"no volume {name!r}")
        if live.attr.device_open:
            raise VolumeBusy(f"volume {name!r} is open (attached or exported): detach it "
                             f"first; nothing was reverted")
        self.vg.merge_snapshot(snapshot_name)
        self.vg.deactivate(name)
        self.vg.activate(name)
        after = self._read().get_lv(name)
        stray = [t for t in after.tags if t == SNAPSHOT_TAG]
        if VOLUME_TAG not in after.tags:  # whichever tags LVM leaves after a merge
            self.vg.add_tags(name, (VOLUME_TAG,))
        if stray:
            self.vg.remove_tags(name, stray)
        marker = f"{REQUEST_TAG_PREFIX}{uuid.uuid4().hex}"
        self.vg.create_thin_snapshot(snapshot_name, name, tags=(SNAPSHOT_TAG, marker))
        self._invalidate()
        LOG.info("reverted volume %s to snapshot %s (%d GiB)", name, snapshot_name,
                 -(-volume.size_bytes // GiB))
