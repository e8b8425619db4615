"""Run any driver_kit driver inside OpenStack Cinder, as a Cinder volume driver.

In a backend section of cinder.conf::

    [kit-lvm]
    volume_driver = contrib.cinder_adapter.DriverKitVolumeDriver
    driver_kit_driver = lvm_driver.driver.ThinLVMDriver
    volume_backend_name = kit-lvm
    volume_group = stack-volumes-kit
    max_over_subscription_ratio = 20.0
    reserved_percentage = 5
    over_provisioning_calculation = cinder

Cinder's volume manager builds the adapter with its ``Configuration`` object for
that section; the adapter registers the kit's options and the wrapped driver's
``OPTIONS`` in it (Cinder's ``[backend_defaults]`` fallback included), reads
them and hands them to ``load_backend_config`` as overrides, so the wrapped
driver sees exactly the values Cinder does. Volumes are named and sized by
Cinder's volume objects (``volume.name``, ``volume.size``), the pool comes from
the scheduler's choice in ``volume.host`` and the provisioning type from the
volume type's ``provisioning:type`` extra spec. The kit's admission guard runs
on every create, extend, snapshot and clone, so the ratio holds even when the
scheduler's view is stale.

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

What it leaves out: the data path. ``create_export`` and friends do nothing and
``initialize_connection`` is not implemented; a production adapter would hand
the volume's device to one of Cinder's target helpers as Cinder's LVM driver does.

The module imports without Cinder (``CINDER_AVAILABLE`` is then False and the
class cannot be instantiated), so documentation and tests can load it anywhere.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterator

from oslo_config import cfg

from driver_kit import (BackendError, CapacityExceeded, ConfigError, DriverKitError,
                        InvalidInput, SnapshotNotFound, VolumeDriver, VolumeNotFound,
                        load_backend_config, make_conf)
from driver_kit.config import KIT_OPTS
from driver_kit.loading import driver_class

try:
    from cinder import exception as cinder_exception
    from cinder.volume import driver as cinder_driver
    from cinder.volume import volume_utils
except ImportError:  # Cinder is an optional extra: pip install 'driver-kit[cinder]'
    cinder_exception = cinder_driver = volume_utils = None

__all__ = ["ADAPTER_OPTS", "CINDER_AVAILABLE", "DriverKitVolumeDriver"]

CINDER_AVAILABLE = cinder_driver is not None

ADAPTER_OPTS = [
    cfg.StrOpt("driver_kit_driver", default="lvm_driver.driver.ThinLVMDriver",
               help="Dotted path (module.Class or module:Class) of the driver_kit "
                    "VolumeDriver this Cinder backend runs."),
]
#: options Cinder itself defines in every backend section: read, never re-registered
_CINDER_OWNED = frozenset({"volume_driver", "volume_backend_name",
                           "max_over_subscription_ratio", "reserved_percentage"})
_KIT_ONLY_OPTS = [opt for opt in KIT_OPTS if opt.dest not in _CINDER_OWNED]

_Base: Any = cinder_driver.VolumeDriver if CINDER_AVAILABLE else object


def _cinder_lock_path() -> str | None:
    """Cinder's own [oslo_concurrency] lock_path, so every Cinder process shares locks."""
    try:
        return cfg.CONF.oslo_concurrency.lock_path
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError, AttributeError):
        return None


class DriverKitVolumeDriver(_Base):
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
            self.configuration.append_config_values(self._driver_class.OPTIONS)
            self.VERSION = self._driver_class.DRIVER_VERSION

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
        names = {opt.dest for opt in KIT_OPTS} | {opt.dest for opt in driver_class.OPTIONS}
        for name in sorted(names - {"volume_driver"}):
            value = get(name)
            if value is not None:
                overrides[name] = value
        if "max_over_subscription_ratio" in overrides:
            overrides["max_over_subscription_ratio"] = str(
                overrides["max_over_subscription_ratio"])
        if "lock_path" not in overrides and (lock_path := _cinder_lock_path()):
            overrides["lock_path"] = lock_path
        return overrides

    def _build(self) -> VolumeDriver:
        if self._config_error is not None:
            raise self._config_error
        assert self._driver_class is not None
        config = load_backend_config(make_conf(), self._backend_name(),
                                     extra_opts=self._driver_class.OPTIONS,
                                     overrides=self._overrides(self._driver_class))
        return self._driver_class(config)

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
            self.kit.do_setup()

    def check_for_setup_error(self) -> None:
        with self._translated():
            self._driver.check_for_setup_error()

    # ------------------------------------------------------------ stats
    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        """The wrapped driver's report; a copy, as the manager adds its own keys to it."""
        with self._translated():
            self._stats = copy.deepcopy(self._driver.get_volume_stats(refresh=refresh))
        return self._stats

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

    def create_volume(self, volume: Any) -> None:
        """Create ``volume`` in the pool the scheduler chose (``volume.host``)."""
        pool = volume_utils.extract_host(volume.host, "pool") if volume.host else None
        with self._translated(volume_id=volume.id):
            self._driver.create_volume(volume.name, volume.size,
                                       extra_specs=self._extra_specs(volume),
                                       pool_name=pool)

    def delete_volume(self, volume: Any) -> None:
        """Delete ``volume``; a volume already gone is not an error (Cinder retries deletes)."""
        with self._translated(volume_id=volume.id):
            self._driver.delete_volume(volume.name)

    def extend_volume(self, volume: Any, new_size: int) -> None:
        with self._translated(volume_id=volume.id, extend=True):
            self._driver.extend_volume(volume.name, new_size)

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

    def create_volume_from_snapshot(self, volume: Any, snapshot: Any) -> None:
        with self._translated(volume_id=volume.id, snapshot_id=snapshot.id):
            self._driver.create_volume_from_snapshot(volume.name, self.snapshot_name(snapshot),
                                                     volume.size)

    def create_cloned_volume(self, volume: Any, src_vref: Any) -> None:
        with self._translated(volume_id=src_vref.id):
            self._driver.create_cloned_volume(volume.name, src_vref.name, volume.size)

    # ------------------------------------------- data path: not provided here
    def ensure_export(self, context: Any, volume: Any) -> None:
        return None

    def create_export(self, context: Any, volume: Any, connector: Any) -> None:
        return None

    def remove_export(self, context: Any, volume: Any) -> None:
        return None

    def initialize_connection(self, volume: Any, connector: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("driver_kit's Cinder adapter manages capacity and the "
                                  "control path only; attaching needs a target helper")

    def terminate_connection(self, volume: Any, connector: Any, **kwargs: Any) -> None:
        return None
