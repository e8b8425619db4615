"""Manage, unmanage, retype and revert for the Cinder adapter (a mixin of
``contrib.cinder_adapter.DriverKitVolumeDriver``).

Each call goes to the wrapped driver's method of the same purpose
(``manage_existing``, ``manageable_volumes``, ``unmanage``, ``retype``,
``revert_to_snapshot``, ...; the LVM driver has them all); a wrapped driver
without it raises ``NotImplementedError``, which Cinder's volume manager
takes as "not supported" (for revert: Cinder's generic copy instead).
"Already managed" is told as Cinder's LVM driver tells it, from the Cinder id
in the LV's name, and also from the wrapped driver's own tag.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from driver_kit import AlreadyExists, InvalidInput, NotFound, VolumeBusy

try:
    from cinder import exception as cinder_exception
    from cinder.volume import volume_utils
except ImportError:  # the adapter says what is missing
    cinder_exception = volume_utils = None

__all__ = ["ManageAdapterMixin"]


class ManageAdapterMixin:
    """Cinder's manage/unmanage, manageable listings, retype and revert, on a kit driver."""

    # from DriverKitVolumeDriver: _driver, _translated, _extra_specs, snapshot_name

    def _kit_method(self, name: str) -> Callable[..., Any]:
        method = getattr(self._driver, name, None)  # type: ignore[attr-defined]
        if method is None:
            raise NotImplementedError(f"{type(self._driver).__name__} has no "  # type: ignore[attr-defined]
                                      f"{name}(): not supported by this backend")
        return method

    @contextlib.contextmanager
    def _reference(self, existing_ref: Any, name: str) -> Iterator[None]:
        """Kit errors about the LV a reference names, as Cinder's manage flow expects."""
        try:
            with self._translated():  # type: ignore[attr-defined]
                try:
                    yield
                except AlreadyExists as exc:
                    if "already managed" in str(exc):
                        raise cinder_exception.ManageExistingAlreadyManaged(
                            volume_ref=name) from exc
                    raise InvalidInput(str(exc)) from exc
                except (NotFound, VolumeBusy) as exc:
                    raise InvalidInput(str(exc)) from exc
        except cinder_exception.InvalidInput as exc:
            raise cinder_exception.ManageExistingInvalidReference(
                existing_ref=existing_ref, reason=exc.msg) from exc

    @staticmethod
    def _lv_name(existing_ref: Any) -> str:
        return existing_ref.get("source-name", "") if isinstance(existing_ref, dict) else ""

    # ------------------------------------------------------------ volumes
    def manage_existing_get_size(self, volume: Any, existing_ref: Any) -> int:
        """GiB (rounded up) of the LV to adopt, checked adoptable first."""
        with self._reference(existing_ref, self._lv_name(existing_ref)):
            return self._kit_method("manage_existing_get_size")(existing_ref)

    def manage_existing(self, volume: Any, existing_ref: Any) -> None:
        """Adopt the LV as ``volume``: renamed to ``volume.name`` and tagged; no capacity
        taken (the pool counted it already). A name carrying the id of another Cinder
        volume is already managed, as for Cinder's LVM driver."""
        name = self._lv_name(existing_ref)
        vol_id = volume_utils.extract_id_from_volume_name(name)
        if vol_id and vol_id != volume.id and volume_utils.check_already_managed_volume(vol_id):
            raise cinder_exception.ManageExistingAlreadyManaged(volume_ref=name)
        pool = volume_utils.extract_host(volume.host, "pool") if volume.host else None
        with self._reference(existing_ref, name):
            self._kit_method("manage_existing")(
                volume.name, existing_ref, pool_name=pool,
                extra_specs=self._extra_specs(volume))  # type: ignore[attr-defined]

    def get_manageable_volumes(self, cinder_volumes: list, marker: Any, limit: Any,
                               offset: Any, sort_keys: Any, sort_dirs: Any) -> list:
        with self._translated():  # type: ignore[attr-defined]
            entries = self._kit_method("manageable_volumes")()
        return self._paginated(entries, cinder_volumes, marker, limit, offset, sort_keys,
                               sort_dirs, volume_utils.extract_id_from_volume_name)

    def unmanage(self, volume: Any) -> None:
        """Release the volume: the driver's tags go, the LV and its data stay."""
        with self._translated(volume_id=volume.id):  # type: ignore[attr-defined]
            self._kit_method("unmanage")(volume.name)

    # ------------------------------------------------------------ snapshots
    def manage_existing_snapshot_get_size(self, snapshot: Any, existing_ref: Any) -> int:
        with self._reference(existing_ref, self._lv_name(existing_ref)):
            return self._kit_method("manage_existing_snapshot_get_size")(existing_ref)

    def manage_existing_snapshot(self, snapshot: Any, existing_ref: Any) -> None:
        """Adopt a thin snapshot of the snapshot's volume as that snapshot."""
        with self._reference(existing_ref, self._lv_name(existing_ref)):
            self._kit_method("manage_existing_snapshot")(
                self.snapshot_name(snapshot), existing_ref,  # type: ignore[attr-defined]
                snapshot.volume_name)

    def get_manageable_snapshots(self, cinder_snapshots: list, marker: Any, limit: Any,
                                 offset: Any, sort_keys: Any, sort_dirs: Any) -> list:
        with self._translated():  # type: ignore[attr-defined]
            entries = self._kit_method("manageable_snapshots")()
        return self._paginated(entries, cinder_snapshots, marker, limit, offset, sort_keys,
                               sort_dirs, lambda name: volume_utils.
                               extract_id_from_snapshot_name(name.removeprefix("_")))

    def unmanage_snapshot(self, snapshot: Any) -> None:
        with self._translated(snapshot_id=snapshot.id):  # type: ignore[attr-defined]
            self._kit_method("unmanage_snapshot")(self.snapshot_name(snapshot))  # type: ignore[attr-defined]

    @staticmethod
    def _paginated(entries: list, known: list, marker: Any, limit: Any, offset: Any,
                   sort_keys: Any, sort_dirs: Any, id_of: Callable[[str], Any]) -> list:
        """Cinder's entries, each LV named after a known Cinder resource "already managed"
        with its ``cinder_id``, paginated by Cinder's own helper."""
        ids = {resource["id"] for resource in known}
        for entry in entries:
            potential = id_of(entry["reference"]["source-name"])
            if potential in ids:
                entry.update(safe_to_manage=False, reason_not_safe="already managed",
                             cinder_id=potential)
        return volume_utils.paginate_entries_list(entries, marker, limit, offset,
                                                  sort_keys, sort_dirs)

    # ------------------------------------------------------------ retype, revert
    def retype(self, context: Any, volume: Any, new_type: Any, diff: Any,
               host: dict[str, Any]) -> bool:
        """True (nothing to do) within the same backend, pool and provisioning type;
        False makes Cinder migrate the volume."""
        target = host.get("host", "") if isinstance(host, dict) else ""
        if volume_utils.extract_host(target, "backend") != \
                volume_utils.extract_host(volume.host, "backend"):
            return False
        specs = dict((new_type or {}).get("extra_specs") or {})
        with self._translated(volume_id=volume.id):  # type: ignore[attr-defined]
            return self._kit_method("retype")(volume.name, specs,
                                              volume_utils.extract_host(target, "pool"))

    def revert_to_snapshot(self, context: Any, volume: Any, snapshot: Any) -> None:
        """The volume gets the snapshot's data back (merge, as Cinder's LVM driver does)."""
        with self._translated(volume_id=volume.id,  # type: ignore[attr-defined]
                              snapshot_id=snapshot.id):
            self._kit_method("revert_to_snapshot")(volume.name,
                                                   self.snapshot_name(snapshot))  # type: ignore[attr-defined]
