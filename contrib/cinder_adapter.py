"""Run any driver_kit driver inside OpenStack Cinder, as a Cinder volume driver.

In a backend section of cinder.conf::

    [kit-lvm]
    volume_driver = contrib.cinder_adapter.DriverKitVolumeDriver
    driver_kit_driver = lvm_driver.driver.ThinLVMDriver
    volume_backend_name = kit-lvm
    volume_group = stack-volumes-kit
    max_over_subscription_ratio = 20.0
    reserved_percentage = 5

Cinder's volume manager builds the adapter with its ``Configuration`` object for
that section; the adapter registers the kit's options and the wrapped driver's
``OPTIONS`` in it (Cinder's ``[backend_defaults]`` fallback included), reads
them and hands them to ``load_backend_config`` as overrides, so the wrapped
driver sees exactly the values Cinder does. Volumes are named and sized by
Cinder's volume objects (``volume.name``, ``volume.size``), the pool comes from
the scheduler's choice in ``volume.host`` and the provisioning type from the
volume type's ``provisioning:type`` extra spec. The kit's admission guard runs
on every create, extend, snapshot and clone, so the ratio holds even when the
scheduler's view is stale. Across hosts its lock follows Cinder's coordination
settings: when cinder.conf sets ``[coordination] backend_url`` or the service is
in an active-active cluster (``cluster``, which Cinder allows when the wrapped
driver declares ``SUPPORTS_ACTIVE_ACTIVE``), the admission lock is a tooz lock
on that URL, shared by every ``cinder-volume`` of the cluster; the section's own
``coordination_backend_url`` wins over it.

Errors, as Cinder's volume manager expects them:

* ``CapacityExceeded`` on create, snapshot or clone ->
  ``VolumeBackendAPIException``: the create flow reschedules on it (it is not
  one of the flow's no-reschedule errors), so another backend can take the
  volume, which is what "this backend is out of room" should do; on extend ->
  ``ExtendVolumeError`` (as Cinder's NFS-family drivers report "insufficient
  space to extend"), which the manager turns into ``error_extending`` and a
  quota rollback. Either carries the admission breakdown as its message and
  as ``.decision``.
* ``VolumeNotFound`` -> ``exception.VolumeNotFound(volume_id=...)``;
  ``SnapshotNotFound`` -> ``exception.SnapshotNotFound(snapshot_id=...)``.
* ``InvalidInput`` (bad name, bad size, shrinking) -> ``exception.InvalidInput``.
* ``ConfigError`` -> ``exception.VolumeDriverException`` naming the section,
  option and value (raised by ``do_setup()``, so the manager leaves the backend
  uninitialized and logs why).
* ``BackendError`` and any other kit error -> ``VolumeBackendAPIException``.

The data path goes through Cinder's own target helpers, wired as Cinder's LVM
driver wires them: ``target_helper`` (``tgtadm``, ``lioadm``, ``nvmet``, ...)
picks a class from Cinder's target map, built with the backend's configuration
and the driver's executor; exports, connections and extends hand it the
volume's local device from the wrapped driver's ``backend_device_path`` hook
(``/dev/<vg>/<lv>`` for the LVM driver, activated first). Terminating one of
several attachments of a multiattach volume on the same host leaves the target
alone, as Cinder's LVM driver does. Images are copied to and from that device
with Cinder's ``image_utils``/``volume_utils``: sparse on thin volumes, every
block written on thick ones (their extents may hold old data). Backups need
nothing more: cinder-backup's generic path attaches through the target.
A target helper that cannot be built (``cinder-rtstool`` missing for
``lioadm``, a shared target on a helper without it) is a configuration error
at ``do_setup()``, like the others.

Manage and unmanage (volumes and snapshots), the manageable listings, retype
and revert to snapshot come from ``contrib.cinder_manage`` (see there).
``volume_clear`` and ``volume_clear_size`` are Cinder's own options, read from
the section and handed to the wrapped driver (the LVM driver wipes thick
volumes with them on delete).

At ``do_setup()`` each option the section sets that nothing registered there
(Cinder, the adapter, the kit, the driver) is logged as a warning with the
nearest known name: oslo.config would ignore it silently.

The module imports without Cinder (``CINDER_AVAILABLE`` is then False and the
class cannot be instantiated), so documentation and tests can load it anywhere.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import socket
from typing import Any, Iterator

from oslo_config import cfg

from driver_kit import (BackendError, CapacityExceeded, ConfigError, DriverKitError,
                        InvalidInput, SnapshotNotFound, VolumeDriver, VolumeNotFound,
                        load_backend_config, make_conf)
from driver_kit.config import KIT_OPTS, read_option
from driver_kit.config_files import unknown_options
from driver_kit.loading import driver_class

from contrib.cinder_conf import (_cinder_coordination_url, _cinder_lock_path,
                                 _registered_names)
from contrib.cinder_manage import ManageAdapterMixin

try:
    from cinder import exception as cinder_exception
    from cinder.image import image_utils
    from cinder.volume import driver as cinder_driver
    from cinder.volume import volume_utils
    from oslo_utils import importutils
except ImportError:  # Cinder is an optional extra: pip install 'driver-kit[cinder]'
    cinder_exception = cinder_driver = volume_utils = image_utils = importutils = None

LOG = logging.getLogger(__name__)

__all__ = ["ADAPTER_OPTS", "CINDER_AVAILABLE", "DriverKitVolumeDriver"]

CINDER_AVAILABLE = cinder_driver is not None

ADAPTER_OPTS = [
    cfg.StrOpt("driver_kit_driver", default="lvm_driver.driver.ThinLVMDriver",
               help="Dotted path (module.Class or module:Class) of the driver_kit "
                    "VolumeDriver this Cinder backend runs."),
    cfg.BoolOpt("lvm_share_target", default=False,
                help="One target per host for all of this backend's volumes instead of "
                     "one per volume; only target helpers that can share (nvmet). "
                     "Reported to the scheduler as shared_targets."),
]
#: options Cinder itself defines in every backend section: read, never re-registered
_CINDER_OWNED = frozenset({"volume_driver", "volume_backend_name",
                           "max_over_subscription_ratio", "reserved_percentage",
                           "volume_clear", "volume_clear_size"})
_KIT_ONLY_OPTS = [opt for opt in KIT_OPTS if opt.dest not in _CINDER_OWNED]

_Base: Any = cinder_driver.VolumeDriver if CINDER_AVAILABLE else object


class DriverKitVolumeDriver(ManageAdapterMixin, _Base):
    """A Cinder volume driver that delegates every operation to a driver_kit driver."""

    VERSION = "1.0.0"
    SUPPORTS_ACTIVE_ACTIVE = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not CINDER_AVAILABLE:
            raise RuntimeError("Cinder is not installed: pip install 'driver-kit[cinder]'")
        super().__init__(*args, **kwargs)
        self.configuration.append_config_values(ADAPTER_OPTS)
        self.configuration.append_config_values(_KIT_ONLY_OPTS)
        self.kit: VolumeDriver | None = None
        self.hostname = socket.gethostname()
        self.target_driver: Any = None
        self.protocol: str | None = None
        self._driver_class: type[VolumeDriver] | None = None
        try:
            self._driver_class = driver_class(
                self.configuration.safe_get("driver_kit_driver"),
                f"[{self._backend_name()}] driver_kit_driver")
        except ConfigError as exc:
            # Cinder starts every backend's manager even when one is misconfigured;
            # do_setup() raises this, and the manager keeps the backend uninitialized.
            self._config_error: ConfigError | None = exc
        else:
            self._config_error = None
            self.configuration.append_config_values(
                [opt for opt in self._driver_class.OPTIONS if opt.dest not in _CINDER_OWNED])
            self.VERSION = self._driver_class.DRIVER_VERSION
            # Cinder refuses `cluster` for a driver without it (checked after __init__)
            self.SUPPORTS_ACTIVE_ACTIVE = self._driver_class.SUPPORTS_ACTIVE_ACTIVE
        if self._config_error is None:
            try:
                self.target_driver = self._build_target()
            except ConfigError as exc:
                self._config_error = exc

    @staticmethod
    def get_driver_options() -> list[cfg.Opt]:
        """The options this adapter adds to a Cinder backend section."""
        return list(ADAPTER_OPTS) + list(_KIT_ONLY_OPTS)

    # ------------------------------------------------------------ config
    def _backend_name(self) -> str:
        return self.configuration.config_group or \
            self.configuration.safe_get("volume_backend_name") or "default"

    def _overrides(self, driver_class: type[VolumeDriver]) -> dict[str, Any]:
        """Every option the wrapped driver reads, with the value Cinder resolved."""
        get = self.configuration.safe_get
        overrides: dict[str, Any] = {"volume_driver": get("driver_kit_driver")}
        opts = {opt.dest: opt for opt in (*KIT_OPTS, *driver_class.OPTIONS)}
        for name in sorted(set(opts) - {"volume_driver"}):
            try:
                value = get(name)
            except (cfg.ConfigFileValueError, ValueError):
                # a value oslo.config refuses (choices, bounds): say it as the kit does
                read_option(cfg.CONF, self._backend_name(), opts[name], {})
                raise
            if value is not None:
                overrides[name] = value
        if "max_over_subscription_ratio" in overrides:
            overrides["max_over_subscription_ratio"] = str(
                overrides["max_over_subscription_ratio"])
        if "lock_path" not in overrides and (lock_path := _cinder_lock_path()):
            overrides["lock_path"] = lock_path
        if "coordination_backend_url" not in overrides and (
                url := _cinder_coordination_url(bool(getattr(self, "cluster_name", None)))):
            overrides["coordination_backend_url"] = url
        return overrides

    def _build(self) -> VolumeDriver:
        if self._config_error is not None:
            raise self._config_error
        assert self._driver_class is not None
        config = load_backend_config(make_conf(), self._backend_name(),
                                     extra_opts=self._driver_class.OPTIONS,
                                     overrides=self._overrides(self._driver_class))
        return self._driver_class(config)

    def _build_target(self) -> Any:
        """Cinder's target helper for ``target_helper``, built as Cinder's LVM driver builds it."""
        get = self.configuration.safe_get
        helper = get("target_helper")
        where = f"[{self._backend_name()}]"
        try:
            target = importutils.import_object(self.target_mapping[helper],
                                               configuration=self.configuration,
                                               executor=self._execute)
        except Exception as exc:  # noqa: BLE001 - e.g. lioadm without cinder-rtstool
            raise ConfigError(f"{where} target_helper = {helper!r}: cannot set up the "
                              f"target helper: {type(exc).__name__}: {exc}") from exc
        if get("lvm_share_target") and not target.SHARED_TARGET_SUPPORT:
            raise ConfigError(f"{where} lvm_share_target = true: target_helper "
                              f"{helper!r} cannot share targets (nvmet can)")
        if get("target_secondary_ip_addresses") and not target.SECONDARY_IP_SUPPORT:
            raise ConfigError(f"{where} target_secondary_ip_addresses: target_helper "
                              f"{helper!r} takes no secondary addresses")
        self.protocol = target.storage_protocol or target.protocol
        return target

    @property
    def _driver(self) -> VolumeDriver:
        if self.kit is None:
            raise cinder_exception.DriverNotInitialized()
        return self.kit

    # ------------------------------------------------------------ errors
    @contextlib.contextmanager
    def _translated(self, *, volume_id: Any = None, snapshot_id: Any = None,
                    extend: bool = False) -> Iterator[None]:
        """Raise each kit error as the Cinder exception the volume manager expects."""
        try:
            yield
        except CapacityExceeded as exc:
            reason = exc.decision.explain()
            error = (cinder_exception.ExtendVolumeError(reason=reason) if extend
                     else cinder_exception.VolumeBackendAPIException(data=reason))
            error.decision = exc.decision
            raise error from exc
        except VolumeNotFound as exc:
            raise cinder_exception.VolumeNotFound(volume_id=volume_id) from exc
        except SnapshotNotFound as exc:
            raise cinder_exception.SnapshotNotFound(snapshot_id=snapshot_id) from exc
        except InvalidInput as exc:
            raise cinder_exception.InvalidInput(reason=str(exc)) from exc
        except ConfigError as exc:
            raise cinder_exception.VolumeDriverException(
                message=f"invalid configuration: {exc}") from exc
        except (BackendError, DriverKitError) as exc:
            raise cinder_exception.VolumeBackendAPIException(data=str(exc)) from exc

    # ------------------------------------------------------------ setup
    def do_setup(self, context: Any) -> None:
        """Build the wrapped driver from this backend's options, then its do_setup()."""
        with self._translated():
            self.kit = self._build()
            self._warn_unknown_options()
            self.kit.do_setup()

    def _warn_unknown_options(self) -> None:
        """Log each option this backend's section sets that no one registered there
        (Cinder, the adapter, the kit, the driver): oslo.config ignores it silently."""
        group = self.configuration.config_group
        if not group:
            return
        known: set[str] = set()
        for section in (group, "backend_defaults"):  # Cinder's fallback of every backend
            if section in cfg.CONF:
                known |= _registered_names(cfg.CONF[section])
        files = list(cfg.CONF.config_file or ()) + sorted(
            os.path.join(directory, name) for directory in cfg.CONF.config_dir or ()
            if os.path.isdir(directory) for name in os.listdir(directory)
            if name.endswith(".conf"))
        try:
            unknown = unknown_options(files, {group: known})
        except ConfigError as exc:  # Cinder read the files already; this is advice only
            LOG.warning("cannot check [%s] for unknown options: %s", group, exc)
            return
        for option in unknown:
            LOG.warning("%s", option)

    def check_for_setup_error(self) -> None:
        with self._translated():
            self._driver.check_for_setup_error()

    # ------------------------------------------------------------ stats
    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        """The wrapped driver's report; a copy, as the manager adds its own keys to it."""
        with self._translated():
            stats = copy.deepcopy(self._driver.get_volume_stats(refresh=refresh))
        self._stats = self._with_data_path(stats)
        return self._stats

    def _with_data_path(self, stats: dict[str, Any]) -> dict[str, Any]:
        """What Cinder's LVM driver reports about its data path, added to the kit's report.

        The protocol is the target helper's; every pool can multiattach and names
        this host in ``location_info``; copies into a new volume may skip zeros
        (``sparse_copy_volume``) only when every pool is thin, since a new thick
        volume's extents may hold old data.
        """
        stats["storage_protocol"] = self.protocol or stats["storage_protocol"]
        stats["shared_targets"] = bool(self.configuration.safe_get("lvm_share_target"))
        pools = stats["pools"]
        stats["sparse_copy_volume"] = bool(pools) and all(
            p["thin_provisioning_support"] and not p["thick_provisioning_support"]
            for p in pools)
        for pool in pools:
            pool["multiattach"] = True
            if pool["location_info"]:  # a pool reported down has none
                kind, _, rest = pool["location_info"].partition(":")
                pool["location_info"] = f"{kind}:{self.hostname}:{rest}"
        return stats

    def _update_volume_stats(self) -> None:
        self.get_volume_stats(refresh=True)

    def get_pool(self, volume: Any) -> str | None:
        """The pool holding ``volume`` on the backend, or None if it is not there."""
        with self._translated(volume_id=volume.id):
            found = self._driver.backend_find_volume(volume.name)
        return None if found is None else found.pool_name

    # ------------------------------------------------------------ volumes
    @staticmethod
    def _extra_specs(volume: Any) -> dict[str, Any]:
        if volume.obj_attr_is_set("volume_type") and volume.volume_type is not None:
            return dict(volume.volume_type.extra_specs or {})
        if volume.volume_type_id:
            from cinder.volume import volume_types
            return dict(volume_types.get_volume_type_extra_specs(volume.volume_type_id))
        return {}

    def create_volume(self, volume: Any) -> dict[str, Any]:
        """Create ``volume`` in the pool the scheduler chose (``volume.host``); a thick
        request sent to a thin-only pool is made in the backend's thick pool, and the
        volume's host says so."""
        pool = volume_utils.extract_host(volume.host, "pool") if volume.host else None
        with self._translated(volume_id=volume.id):
            made = self._driver.create_volume(volume.name, volume.size,
                                              extra_specs=self._extra_specs(volume),
                                              pool_name=pool)
        return self._placed(volume, made.pool_name)

    @staticmethod
    def _placed(volume: Any, pool_name: str) -> dict[str, Any]:
        """The model update naming the pool a new volume is in, when not the scheduler's."""
        if not volume.host or volume_utils.extract_host(volume.host, "pool") == pool_name:
            return {}
        return {"host": volume_utils.append_host(
            volume_utils.extract_host(volume.host, "backend"), pool_name)}

    def delete_volume(self, volume: Any) -> None:
        """Delete ``volume``; a volume already gone is not an error (Cinder retries deletes)."""
        with self._translated(volume_id=volume.id):
            self._driver.delete_volume(volume.name)

    def extend_volume(self, volume: Any, new_size: int) -> None:
        """Grow ``volume``, then let the target show the new size to attached hosts."""
        with self._translated(volume_id=volume.id, extend=True):
            self._driver.extend_volume(volume.name, new_size, growth_from_whole_gib=True)
        try:
            self.target_driver.extend_target(volume)
        except Exception as exc:
            raise cinder_exception.TargetUpdateFailed(volume_id=volume.id) from exc

    def snapshot_name(self, snapshot: Any) -> str:
        """The backend name of a Cinder snapshot.

        Cinder names snapshots ``snapshot-<id>``; LVM reserves names starting
        with "snapshot", so when the wrapped driver refuses the name, the
        snapshot is stored as ``_snapshot-<id>`` (the same rule Cinder's own
        LVM driver applies), and found again by the same rule.
        """
        name = snapshot.name
        try:
            return self._driver.validate_name(name)
        except InvalidInput:
            try:
                return self._driver.validate_name(f"_{name}")
            except InvalidInput:
                return name  # the operation reports the original name's problem

    def create_snapshot(self, snapshot: Any) -> None:
        with self._translated(volume_id=snapshot.volume_id, snapshot_id=snapshot.id):
            self._driver.create_snapshot(self.snapshot_name(snapshot), snapshot.volume_name)

    def delete_snapshot(self, snapshot: Any) -> None:
        with self._translated(volume_id=snapshot.volume_id, snapshot_id=snapshot.id):
            self._driver.delete_snapshot(self.snapshot_name(snapshot))

    def create_volume_from_snapshot(self, volume: Any, snapshot: Any) -> dict[str, Any]:
        """A new volume in the snapshot's pool; the volume's host names that pool."""
        with self._translated(volume_id=volume.id, snapshot_id=snapshot.id):
            made = self._driver.create_volume_from_snapshot(
                volume.name, self.snapshot_name(snapshot), volume.size)
        return self._placed(volume, made.pool_name)

    def create_cloned_volume(self, volume: Any, src_vref: Any) -> dict[str, Any]:
        """A copy in the source's pool; the volume's host names that pool."""
        with self._translated(volume_id=src_vref.id):
            made = self._driver.create_cloned_volume(volume.name, src_vref.name, volume.size)
        return self._placed(volume, made.pool_name)

    # ------------------------------------------------------------ data path
    def local_path(self, volume: Any) -> str:
        """The volume's device on this host, from the wrapped driver (activated first)."""
        with self._translated(volume_id=volume.id):
            try:
                return self._driver.backend_device_path(self._driver.validate_name(volume.name))
            except NotImplementedError as exc:
                raise cinder_exception.VolumeDriverException(message=str(exc)) from exc

    def create_export(self, context: Any, volume: Any, connector: Any) -> dict[str, Any]:
        """Export the volume's device through the target helper; Cinder saves the location."""
        export = self.target_driver.create_export(context, volume, self.local_path(volume))
        return {"provider_location": export["location"], "provider_auth": export["auth"]}

    def ensure_export(self, context: Any, volume: Any) -> Any:
        """Recreate the export at start-up (the device is activated again first)."""
        return self.target_driver.ensure_export(context, volume, self.local_path(volume))

    def remove_export(self, context: Any, volume: Any) -> None:
        self.target_driver.remove_export(context, volume)

    def validate_connector(self, connector: dict[str, Any]) -> Any:
        return self.target_driver.validate_connector(connector)

    def initialize_connection(self, volume: Any, connector: dict[str, Any],
                              **kwargs: Any) -> dict[str, Any]:
        """Let the connector's host in and say how to reach the volume."""
        return self.target_driver.initialize_connection(volume, connector)

    def terminate_connection(self, volume: Any, connector: dict[str, Any],
                             **kwargs: Any) -> bool:
        """End one attachment; True when others remain, so the manager keeps the export.

        A multiattach volume attached more than once on the connector's host
        keeps its target (the other attachments on that host still use the
        same session and ACL), as Cinder's LVM driver does.
        """
        same_host = [a for a in volume.volume_attachment if a.connector and
                     self.target_driver.are_same_connector(a.connector, connector)]
        if volume.multiattach and len(same_host) > 1:
            return True
        self.target_driver.terminate_connection(volume, connector, **kwargs)
        return len(volume.volume_attachment) > 1

    def copy_image_to_volume(self, context: Any, volume: Any, image_service: Any,
                             image_id: str, disable_sparse: bool = False) -> None:
        """Write an image onto the volume's device with Cinder's ``fetch_to_raw``.

        Zeros are skipped (the volume stays sparse) on thin volumes only.
        """
        path = self.local_path(volume)
        with self._translated(volume_id=volume.id):
            found = self._driver.backend_find_volume(volume.name)
        thick = found is not None and not found.thin
        image_utils.fetch_to_raw(context, image_service, image_id, path,
                                 self.configuration.volume_dd_blocksize, size=volume.size,
                                 disable_sparse=disable_sparse or thick)

    def copy_volume_to_image(self, context: Any, volume: Any, image_service: Any,
                             image_meta: dict[str, Any]) -> None:
        """Upload the volume's device as an image with Cinder's ``upload_volume``."""
        volume_utils.upload_volume(context, image_service, image_meta,
                                   self.local_path(volume), volume)
