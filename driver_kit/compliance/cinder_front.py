"""The harness's front end for existing Cinder volume drivers, judged as they are.

A Cinder driver (a ``cinder.volume.driver.VolumeDriver`` subclass) is built the
way ``cinder-volume`` builds it: Cinder's configuration loaded from the given
cinder.conf, the backend section as its ``Configuration``, a throwaway SQLite
database made by Cinder's own migrations (as Cinder's unit tests do), and its
own ``Volume`` and ``Snapshot`` objects. ``CinderDriver`` then speaks the kit's
operations API (names, GiB) to the checks and Cinder's driver interface
(``create_volume(volume)``, ``extend_volume(volume, new_size)``, ...) to the driver.

Cinder is imported only when such a driver is built: importing it imports
eventlet, which the rest of the kit never needs.
"""

from __future__ import annotations

import os
import tempfile
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from driver_kit.driver import VolumeInfo
from driver_kit.exceptions import ConfigError, VolumeNotFound

__all__ = ["ADMISSION_CHECKS", "CINDER_MANAGER_GUARDS", "CinderDriver", "CinderSettings",
           "build_cinder_driver", "prepare_cinder"]

#: the checks that rest on the kit's admission: for a Cinder driver, enforcing the cap
#: is the scheduler's job (cinder/scheduler/filters/capacity_filter.py), not the driver's
ADMISSION_CHECKS: tuple[str, ...] = (
    "admission.create-over-cap", "admission.extend-over-cap", "admission.snapshot-over-cap",
    "admission.copy-over-cap", "admission.fill-to-cap", "admission.parallel-threads",
    "admission.parallel-processes")

#: checks of requests Cinder's API or volume manager never sends a driver, and why
CINDER_MANAGER_GUARDS: Mapping[str, str] = {
    "ops.create-existing": "Cinder names every volume by a new id (volume_name_template), "
                           "so a driver is never asked to create a name twice",
    "ops.snapshot-existing": "Cinder names every snapshot by a new id "
                             "(snapshot_name_template), so a name is never reused",
    "ops.missing-volume": "Cinder's volume manager acts only on volumes its database holds; "
                          "a missing one fails there, before the driver",
    "ops.extend-smaller": "Cinder's API refuses an extend that does not grow the volume "
                          "(cinder/volume/api.py: API._extend)",
    "ops.device-path": "a Cinder driver's data path is its export (initialize_connection) "
                       "and os-brick's attach, which this front end does not drive",
    "failclosed.slow-backend": "Cinder's driver interface has no stats timeout: the volume "
                               "manager's periodic task waits for get_volume_stats",
    "hooks.required": "backend hooks are optional for a Cinder driver; the checks needing "
                      "one skip without it",
}

_QUIET = (r"\s*Eventlet is deprecated", r"Using fork\(\) is a bad idea",
          r".*deprecated without deprecated_reason", r"The 'oslo_service\.\w+' module",
          r"eventletutils module is deprecated", r"'cgi' is deprecated",
          r"Unnamed CHECK constraint on reflected table", r"The from_engine\(\) method",
          r"Passing item_cls to obj_make_list\(\)")


@dataclass(frozen=True, slots=True, kw_only=True)
class CinderSettings:
    """The capacity settings of the backend section, as the checks read a kit driver's."""

    max_over_subscription_ratio: float | str
    reserved_percentage: int
    over_provisioning_calculation: str = "cinder"


class _Cinder:
    """Cinder's process-wide state, set up once: CONF, the database, a context."""

    _lock = threading.Lock()
    _ready: "_Cinder | None" = None

    def __init__(self, config_files: Sequence[str], database: str | None) -> None:
        if database is None:
            # removed when the process ends (the object's finalizer)
            self._scratch = tempfile.TemporaryDirectory(prefix="driver-kit-cinder-")
            database = f"sqlite:///{os.path.join(self._scratch.name, 'cinder.sqlite')}"
        with warnings.catch_warnings():
            for message in _QUIET:
                warnings.filterwarnings("ignore", message=message)
            from oslo_config import cfg

            from cinder import objects
            objects.register_all()
            from cinder import context
            from cinder.db import migration
            from cinder.volume import configuration
            conf = cfg.CONF
            conf([arg for path in config_files for arg in ("--config-file", path)],
                 project="cinder", default_config_files=[])
            conf.set_override("connection", database, group="database")
            migration.db_sync()
        self.conf, self.objects, self.configuration = conf, objects, configuration
        self.context = context.RequestContext("driver-kit", "driver-kit", is_admin=True)
        self.files = tuple(config_files)

    @classmethod
    def get(cls, config_files: Sequence[str], database: str | None) -> "_Cinder":
        if not config_files:
            raise ConfigError("a Cinder driver needs its cinder.conf (--cinder-config)")
        for path in config_files:
            if not os.path.isfile(path):
                raise ConfigError(f"no cinder.conf at {path!r}")
        with cls._lock:
            if cls._ready is None:
                cls._ready = cls(config_files, database)
            elif cls._ready.files != tuple(config_files):
                raise ConfigError("Cinder's configuration is process-wide: one set of "
                                  "cinder.conf files per process")
            return cls._ready


def prepare_cinder(config_files: Sequence[str], database: str | None = None) -> None:
    """Import and set Cinder up now, in the calling thread: a front end calls it before
    the runner starts its threads (imported first in a worker thread, Cinder left the
    runner waiting for ever on that thread's end)."""
    _Cinder.get(config_files, database)


def build_cinder_driver(driver_path: str, config_files: Sequence[str], backend: str | None,
                        database: str | None = None, host: str = "driver-kit",
                        ) -> "CinderDriver":
    """A fresh ``CinderDriver`` around ``driver_path`` (dotted class path), configured
    by ``backend``'s section of ``config_files``, as ``cinder-volume`` builds it.

    ``database``: an SQLAlchemy URL; by default a throwaway SQLite file, made once per
    process by Cinder's own migrations.
    """
    cinder = _Cinder.get(config_files, database)
    if backend is None:
        enabled = list(cinder.conf.enabled_backends or [])
        if len(enabled) != 1:
            raise ConfigError(f"name the backend section (--backend): enabled_backends is "
                              f"{enabled or 'empty'}")
        backend = enabled[0]
    if backend not in cinder.conf.list_all_sections():
        raise ConfigError(f"no section [{backend}] in {', '.join(config_files)}")
    from oslo_utils import importutils
    from cinder.volume import manager
    configuration = cinder.configuration.Configuration(manager.volume_backend_opts,
                                                       config_group=backend)
    with warnings.catch_warnings():
        for message in _QUIET:
            warnings.filterwarnings("ignore", message=message)
        try:
            driver = importutils.import_object(driver_path, configuration=configuration,
                                               host=f"{host}@{backend}", cluster_name=None,
                                               is_vol_db_empty=True, active_backend_id=None)
        except ImportError as exc:
            raise ConfigError(f"cannot import Cinder driver {driver_path!r}: {exc}") from exc
    return CinderDriver(driver, cinder, backend=backend, host=f"{host}@{backend}")


class CinderDriver:
    """A Cinder volume driver behind the kit's operations API, with Cinder's objects.

    Names are the checks' own; each maps to the Cinder object made for it (whose
    backend name is Cinder's, e.g. ``volume-<id>``: ``cinder_name`` translates). A
    volume made outside Cinder is brought in as ``cinder manage`` does
    (``manage_existing_get_size``, ``manage_existing``) when first acted on.
    Cinder's exceptions pass through, except that a name neither made nor manageable
    raises the kit's ``VolumeNotFound``. Operations return the ``VolumeInfo`` Cinder's
    objects then hold (sizes whole GiB, as Cinder's API shows them).
    """

    def __init__(self, driver: Any, cinder: _Cinder, *, backend: str, host: str) -> None:
        self.cinder_driver = driver
        self._cinder = cinder
        self.backend = backend
        self.host = host
        conf = driver.configuration
        ratio = str(conf.safe_get("max_over_subscription_ratio") or "20.0")
        self.configuration = CinderSettings(
            max_over_subscription_ratio=ratio if ratio == "auto" else float(ratio),
            reserved_percentage=int(conf.safe_get("reserved_percentage") or 0))
        self._volumes: dict[str, Any] = {}
        self._snapshots: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        kind = type(self.cinder_driver)
        return f"<Cinder driver {kind.__module__}.{kind.__qualname__} [{self.backend}]>"

    # ------------------------------------------------------------ lifecycle
    def do_setup(self) -> None:
        """As the volume manager's ``init_host``: ``do_setup(context)``."""
        self.cinder_driver.do_setup(self._cinder.context)

    def check_for_setup_error(self) -> None:
        self.cinder_driver.check_for_setup_error()

    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        return self.cinder_driver.get_volume_stats(refresh=refresh)

    # ------------------------------------------------------------ names
    def cinder_name(self, name: str) -> str:
        """The backend's name of what the checks call ``name`` (itself if not ours)."""
        with self._lock:
            made = self._volumes.get(name) or self._snapshots.get(name)
        return made.name if made is not None else name

    def check_name(self, backend_name: str) -> str:
        """The checks' name of a backend volume or snapshot (itself if not ours). A
        snapshot stored as ``_snapshot-<id>`` is Cinder's ``snapshot-<id>`` (LVM reserves
        names starting with "snapshot"; Cinder's LVM driver escapes them so)."""
        cinder_name = backend_name[1:] if backend_name.startswith("_snapshot-") \
            else backend_name
        with self._lock:
            for name, made in (*self._volumes.items(), *self._snapshots.items()):
                if made.name == cinder_name:
                    return name
        return backend_name

    def _volume(self, name: str) -> Any:
        with self._lock:
            volume = self._volumes.get(name)
        return volume if volume is not None else self._manage(name)

    def _manage(self, name: str) -> Any:
        """Backend volume ``name`` as one of Cinder's, as ``cinder manage`` makes it."""
        driver = self.cinder_driver
        if not callable(getattr(driver, "manage_existing", None)):
            raise VolumeNotFound(f"no volume {name!r} was made through Cinder's objects, "
                                 f"and the driver cannot manage one")
        reference = {"source-name": name}
        # as an operator names it in `cinder manage HOST@BACKEND#POOL`: the one pool
        pools = [p.get("pool_name") for p in self.get_volume_stats().get("pools") or ()]
        volume = self._new_volume(name, 1, pools[0] if len(pools) == 1 else None)
        try:
            volume.size = driver.manage_existing_get_size(volume, reference)
            volume.save()
            update = driver.manage_existing(volume, reference)
        except Exception as exc:
            self._forget(self._volumes, name)
            if type(exc).__name__ == "ManageExistingInvalidReference":
                raise VolumeNotFound(f"no volume {name!r}: {exc}") from exc
            raise
        self._apply(volume, update, status="available")
        return volume

    def _info(self, name: str, volume: Any, size_gb: int | None = None) -> VolumeInfo:
        pool = volume.host.partition("#")[2] or self.backend
        return VolumeInfo(name=name, size_gb=int(size_gb or volume.size), pool_name=pool,
                          thin=True)

    # ------------------------------------------------------------ objects
    def _new_volume(self, name: str, size_gb: int, pool_name: str | None,
                    **fields: Any) -> Any:
        objects = self._cinder.objects
        pool = pool_name or self.backend
        volume = objects.Volume(self._cinder.context, size=size_gb,
                                host=f"{self.host}#{pool}", display_name=name,
                                status="creating", attach_status="detached",
                                project_id="driver-kit", user_id="driver-kit",
                                availability_zone="nova", **fields)
        volume.create()
        with self._lock:
            self._volumes[name] = volume
        return volume

    def _forget(self, table: dict[str, Any], name: str) -> None:
        with self._lock:
            made = table.pop(name, None)
        if made is not None:
            made.destroy()

    # ------------------------------------------------------------ operations
    def create_volume(self, name: str, size_gb: int, *,
                      extra_specs: Mapping[str, Any] | None = None,
                      pool_name: str | None = None) -> VolumeInfo:
        """``create_volume(volume)`` on a new Volume of ``size_gb`` GiB."""
        with self._lock:
            taken = name in self._volumes
        if taken:
            raise ConfigError(f"volume name {name!r} is taken")
        volume = self._new_volume(name, int(size_gb), pool_name)
        try:
            update = self.cinder_driver.create_volume(volume)
        except BaseException:
            self._forget(self._volumes, name)
            raise
        self._apply(volume, update, status="available")
        return self._info(name, volume)

    def _apply(self, made: Any, update: Any, *, status: str) -> None:
        if isinstance(update, dict):
            made.update(update)
        made.status = status
        made.save()

    def delete_volume(self, name: str) -> None:
        """``delete_volume(volume)``; a name never made through this front end is made a
        Volume first (so that deleting what is not there is asked of the driver too)."""
        with self._lock:
            volume = self._volumes.get(name)
        if volume is None:
            volume = self._new_volume(name, 1, None)
        self.cinder_driver.delete_volume(volume)
        self._forget(self._volumes, name)

    def extend_volume(self, name: str, new_size_gb: int, **_: Any) -> VolumeInfo:
        """``extend_volume(volume, new_size)``, then the volume's new size recorded, as the
        volume manager does."""
        volume = self._volume(name)
        self.cinder_driver.extend_volume(volume, int(new_size_gb))
        volume.size = int(new_size_gb)
        volume.save()
        return self._info(name, volume)

    def create_snapshot(self, name: str, volume_name: str) -> VolumeInfo:
        """``create_snapshot(snapshot)`` on a new Snapshot of ``volume_name``."""
        volume = self._volume(volume_name)
        snapshot = self._cinder.objects.Snapshot(
            self._cinder.context, volume_id=volume.id,
            volume_size=volume.size, display_name=name, status="creating",
            project_id="driver-kit", user_id="driver-kit")
        snapshot.create()
        snapshot = self._cinder.objects.Snapshot.get_by_id(self._cinder.context, snapshot.id)
        with self._lock:
            self._snapshots[name] = snapshot
        try:
            update = self.cinder_driver.create_snapshot(snapshot)
        except BaseException:
            self._forget(self._snapshots, name)
            raise
        self._apply(snapshot, update, status="available")
        return self._info(name, volume, snapshot.volume_size)

    def delete_snapshot(self, name: str) -> None:
        """``delete_snapshot(snapshot)``; a name never snapshotted here is asked of the
        driver as a Snapshot of a throwaway volume."""
        with self._lock:
            snapshot = self._snapshots.get(name)
        if snapshot is None:
            ghost = f"{name}-origin"
            volume = self._new_volume(ghost, 1, None)
            snapshot = self._cinder.objects.Snapshot(
                self._cinder.context, volume_id=volume.id,
                volume_size=1, display_name=name, status="deleting",
                project_id="driver-kit", user_id="driver-kit")
            snapshot.create()
            try:
                self.cinder_driver.delete_snapshot(snapshot)
            finally:
                snapshot.destroy()
                self._forget(self._volumes, ghost)
            return
        self.cinder_driver.delete_snapshot(snapshot)
        self._forget(self._snapshots, name)

    def create_volume_from_snapshot(self, name: str, snapshot_name: str,
                                    size_gb: int | None = None) -> VolumeInfo:
        """``create_volume_from_snapshot(volume, snapshot)``."""
        with self._lock:
            snapshot = self._snapshots.get(snapshot_name)
        if snapshot is None:
            raise VolumeNotFound(f"no snapshot {snapshot_name!r} was made through "
                                 f"Cinder's objects")
        origin = snapshot.volume
        pool = origin.host.partition("#")[2] or None
        volume = self._new_volume(name, int(size_gb or snapshot.volume_size), pool,
                                  snapshot_id=snapshot.id)
        try:
            update = self.cinder_driver.create_volume_from_snapshot(volume, snapshot)
        except BaseException:
            self._forget(self._volumes, name)
            raise
        self._apply(volume, update, status="available")
        return self._info(name, volume)

    def create_cloned_volume(self, name: str, source_name: str,
                             size_gb: int | None = None) -> VolumeInfo:
        """``create_cloned_volume(volume, src_vref)``."""
        source = self._volume(source_name)
        pool = source.host.partition("#")[2] or None
        volume = self._new_volume(name, int(size_gb or source.size), pool,
                                  source_volid=source.id)
        try:
            update = self.cinder_driver.create_cloned_volume(volume, source)
        except BaseException:
            self._forget(self._volumes, name)
            raise
        self._apply(volume, update, status="available")
        return self._info(name, volume)
