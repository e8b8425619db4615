"""``VolumeDriver``: the base class vendor drivers subclass.

A subclass implements a few backend hooks (read pool facts, create, delete,
extend, find a volume; snapshots and clones optionally). In return:

* ``get_volume_stats()`` is a template method whose report is compliant by
  construction: config applied ('auto' resolved, reserved), conservative
  rounding, capacity factors, validation, and fail-closed pools when the
  backend cannot be read or its facts break a rule;
* every create, extend, snapshot and clone goes through the admission guard
  (per-backend inter-process lock, fresh facts, in-flight claims, ``admit()``)
  before the backend command runs, so the ratio holds even when no scheduler
  was asked;
* capacity notifications (Kilo spec) go to a pluggable notifier.
"""

from __future__ import annotations

import abc
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from driver_kit import capacity
from driver_kit.admission import AdmissionGate
from driver_kit.config import BackendConfig, load_backend_config
from driver_kit.exceptions import (BackendTimeout, BackendUnavailable, CapacityExceeded,
                                   InvalidInput, InvalidSize, PoolNotFound,
                                   SnapshotNotFound, VolumeNotFound)
from driver_kit.reservations import ReservationHooks, reservations_for
from driver_kit.notifications import Notifier, log_notifier, notify_capacity
from driver_kit.provisioning import provisioned_thin, provisioning_type
from driver_kit.stats import (BackendStats, PoolFacts, PoolStats, build_pool_stats,
                              down_pool_stats, validate_stats)
from driver_kit.units import GiB, parse_size_gb

LOG = logging.getLogger(__name__)

__all__ = ["VolumeDriver", "VolumeInfo", "Notifier", "log_notifier", "validate_size_gb",
           "provisioning_type"]

@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeInfo:
    """A volume as the backend has it: name, size, pool, thin or thick.

    ``size_bytes`` is the exact size the backend reports (0 means exactly
    ``size_gb`` GiB, for backends that only deal in whole GiB); ``size_gb``
    is that size rounded up to whole GiB, the size Cinder's API shows.
    Admission of extends and copies works from ``size_bytes``.
    """

    name: str
    size_gb: int
    pool_name: str
    thin: bool
    size_bytes: int = 0

    def __post_init__(self) -> None:
        if not self.size_bytes:
            object.__setattr__(self, "size_bytes", self.size_gb * GiB)


def _exact_gib(size_bytes: int) -> str:
    """A byte size for a message: whole GiB as such, anything else with its bytes."""
    if size_bytes % GiB == 0:
        return f"{size_bytes // GiB} GiB"
    return f"{size_bytes / GiB:.2f} GiB ({size_bytes} bytes)"


def validate_size_gb(size_gb: Any, what: str = "size") -> int:
    """A volume size must be a whole number of GiB from 1 to 8 EiB, as in Cinder.

    Numbers only (``units.parse_size_gb``, which the command line shares).
    """
    return parse_size_gb(size_gb, what)


class VolumeDriver(ReservationHooks, abc.ABC):
    """Base class of every driver; subclasses implement the ``backend_*`` hooks.

    Sizes at this API are whole GiB; facts from the backend are integer bytes.
    No I/O happens in the constructor: call ``do_setup()`` and
    ``check_for_setup_error()`` first, as Cinder's volume manager does.
    """

    VENDOR_NAME: str = "Open Source"
    DRIVER_VERSION: str = "1.0.0"
    STORAGE_PROTOCOL: str = "iSCSI"
    #: driver-specific oslo.config options, registered in the backend's section
    OPTIONS: Sequence[Any] = ()
    #: hosts may serve it at once (an array all reach): Cinder may cluster it
    SUPPORTS_ACTIVE_ACTIVE: bool = False

    def __init__(self, configuration: BackendConfig | None = None, *,
                 notifier: Notifier | None = None) -> None:
        self.configuration = configuration or load_backend_config(
            extra_opts=self.OPTIONS)
        self.notifier: Notifier = notifier or log_notifier
        url = getattr(self.configuration, "coordination_backend_url", None)
        # etcd: reservations, no lock across hosts; another service: its tooz lock
        self._reservations = reservations_for(
            url, command_timeout_s=self.backend_command_timeout_s())
        self._gate = AdmissionGate(self.configuration.lock_path, coordination_url=None
                                   if self._reservations else url)
        self._stats: dict[str, Any] | None = None
        self._stats_lock = threading.Lock()
        self._known_pools: tuple[str, ...] = ()

    # ------------------------------------------------------------------ hooks
    def do_setup(self) -> None:
        """Prepare the backend (connect, create what config allows). Default: nothing."""

    def check_for_setup_error(self) -> None:
        """Raise a clear error if the backend is not usable. Default: nothing."""

    @abc.abstractmethod
    def backend_read_pools(self) -> Sequence[PoolFacts]:
        """Fresh facts of every pool, counted from the backend itself (never a ledger).

        Raise ``BackendError`` when the backend cannot be read.
        """

    @abc.abstractmethod
    def backend_find_volume(self, name: str) -> VolumeInfo | None:
        """The volume called ``name``, or None."""

    @abc.abstractmethod
    def backend_create_volume(self, name: str, size_gb: int, *, pool_name: str,
                              thin: bool) -> None:
        """Create a volume the kit has admitted; raise ``AlreadyExists`` if the name is taken.

        A failure must leave no volume behind (clean up what a failed command made).
        """

    @abc.abstractmethod
    def backend_delete_volume(self, name: str) -> None:
        """Delete a volume; raise ``VolumeNotFound`` if it does not exist."""

    @abc.abstractmethod
    def backend_extend_volume(self, name: str, new_size_gb: int) -> None:
        """Grow a volume to ``new_size_gb``; the kit has already admitted the growth."""

    def backend_create_snapshot(self, name: str, volume: VolumeInfo) -> None:
        """Snapshot ``volume``; raise ``AlreadyExists`` if the name is taken.

        Default: snapshots are not supported.
        """
        raise NotImplementedError(f"{type(self).__name__} does not support snapshots")

    def backend_delete_snapshot(self, name: str) -> None:
        """Delete a snapshot; raise ``SnapshotNotFound`` if it does not exist."""
        raise NotImplementedError(f"{type(self).__name__} does not support snapshots")

    def backend_find_snapshot(self, name: str) -> VolumeInfo | None:
        """The snapshot called ``name`` (its size is its origin's), or None."""
        return None

    def backend_create_volume_from_snapshot(self, name: str, snapshot: VolumeInfo,
                                            size_gb: int) -> None:
        """Create a volume from a snapshot (``AlreadyExists`` if taken). Default: none."""
        raise NotImplementedError(f"{type(self).__name__} cannot create from snapshots")

    def backend_clone_volume(self, name: str, source: VolumeInfo, size_gb: int) -> None:
        """Create a volume copying another (``AlreadyExists`` if taken). Default: none."""
        raise NotImplementedError(f"{type(self).__name__} cannot clone volumes")

    def backend_device_path(self, name: str) -> str:
        """The local path of volume ``name``, ready for I/O (``VolumeNotFound`` if missing).

        What the data path reads and writes on this host: the device a target
        helper exports (iSCSI, NVMe-oF) and the one image and backup copies
        use. Default: the driver offers no local path, so its volumes cannot
        be exported or copied on this host.
        """
        raise NotImplementedError(f"{type(self).__name__} gives no local device path: its "
                                  f"volumes cannot be exported or copied on this host")

    def allocation_unit_bytes(self, pool_name: str) -> int:
        """The backend gives volumes on ``pool_name`` whole units of this many bytes;
        admission counts requests at that size. Default: sizes are exact."""
        return 1

    def capacity_group(self, pool_name: str) -> str:
        """The physical capacity ``pool_name`` draws on; pools sharing one (one disk
        group) share in-flight claims. Default: every pool its own."""
        return pool_name

    def validate_name(self, name: Any) -> str:
        """Refuse names the backend cannot take; override with the backend's rules."""
        if not isinstance(name, str) or not name or name.startswith("-") \
                or any(c.isspace() or c in "/\\;&|$`'\"<>(){}*?!~#\0" for c in name):
            raise InvalidInput(f"invalid volume name {name!r}")
        return name

    # ------------------------------------------------------------------ stats
    def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
        """The Cinder-shaped report; cached unless ``refresh`` or never read."""
        with self._stats_lock:
            if self._stats is None or refresh:
                self._stats = self._build_stats()
            return self._stats

    def _read_pools_or_raise(self) -> list[PoolFacts]:
        try:
            facts = list(self.backend_read_pools())
        except BackendUnavailable:
            raise
        except Exception as exc:  # whatever broke, the backend cannot be read
            raise BackendUnavailable(f"cannot read the backend: {exc}") from exc
        if not facts:
            raise BackendUnavailable("the backend reported no pools")
        return facts

    def _pool_stats(self, facts: PoolFacts) -> PoolStats:
        conf = self.configuration
        try:
            pool = build_pool_stats(
                facts, max_over_subscription_ratio=conf.max_over_subscription_ratio,
                reserved_percentage=conf.reserved_percentage,
                calculation=conf.over_provisioning_calculation)
        except InvalidInput as exc:
            LOG.error("pool %s reported down: %s", facts.pool_name, exc)
            return down_pool_stats(str(facts.pool_name or "unknown"), str(exc),
                                   reserved_percentage=conf.reserved_percentage,
                                   thin=bool(facts.thin_provisioning_support),
                                   thick=bool(facts.thick_provisioning_support))
        if pool.backend_state == "down":  # the driver said why (unavailable_reason)
            LOG.warning("pool %s is down: %s", pool.pool_name, pool.down_reason)
        return pool

    def _read_pools_in_time(self) -> list[PoolFacts]:
        """``_read_pools_or_raise`` within ``stats_timeout`` (else ``BackendTimeout``); a
        read past it is left to finish on its own."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def read() -> None:
            try:
                box["facts"] = self._read_pools_or_raise()
            except BaseException as exc:  # handed to the caller
                box["error"] = exc
            finally:
                done.set()
        threading.Thread(target=read, daemon=True, name="stats-read").start()
        timeout_s = self.configuration.stats_timeout
        if not done.wait(timeout_s):
            raise BackendTimeout(f"the backend did not answer within stats_timeout = "
                                 f"{timeout_s:g} s")
        if "error" in box:
            raise box["error"]
        return box["facts"]

    def _build_stats(self) -> dict[str, Any]:
        conf = self.configuration
        try:
            pools = [self._pool_stats(f) for f in self._read_pools_in_time()]
            self._known_pools = tuple(p.pool_name for p in pools)
        except Exception as exc:  # fail closed, whatever went wrong
            reason = f"backend cannot be read: {exc}"
            LOG.error("%s: all pools reported down: %s", conf.backend, reason)
            names = self._known_pools or (conf.volume_backend_name,)
            pools = [down_pool_stats(n, reason, reserved_percentage=conf.reserved_percentage)
                     for n in names]
        report = BackendStats(volume_backend_name=conf.volume_backend_name,
                              vendor_name=self.VENDOR_NAME,
                              driver_version=self.DRIVER_VERSION,
                              storage_protocol=self.STORAGE_PROTOCOL,
                              pools=tuple(pools)).to_dict()
        violations = validate_stats(report)
        if violations:  # a bug in the driver's extras: never hand it to a scheduler
            reason = "report failed validation: " + "; ".join(map(str, violations))
            LOG.error("%s: %s", conf.backend, reason)
            report["pools"] = [down_pool_stats(p.pool_name, reason).to_dict() for p in pools]
        notify_capacity(self.configuration, pools, self.notifier)
        return report

    # -------------------------------------------------------------- admission
    def _choose_pool(self, facts: Sequence[PoolFacts], pool_name: str | None,
                     wanted: str | None) -> PoolFacts:
        if pool_name is not None:
            named = next((f for f in facts if f.pool_name == pool_name), None)
            if named is None:
                raise PoolNotFound(f"no pool {pool_name!r} on backend "
                                   f"{self.configuration.volume_backend_name}")
            if wanted == "thick" and not named.thick_provisioning_support:
                # no Cinder filter matches provisioning:type with a pool's capabilities,
                # so a thick request may be sent to a thin-only pool: the backend's
                # thick pool takes it (thin would be less than asked)
                return next((f for f in facts if f.thick_provisioning_support), named)
            return named
        for f in facts:  # thin is the default when a pool can do it (Queens spec)
            if wanted in (None, "thin") and f.thin_provisioning_support:
                return f
            if wanted == "thick" and f.thick_provisioning_support:
                return f
        if wanted is None:
            return facts[0]
        raise InvalidInput(f"no pool of backend {self.configuration.volume_backend_name} "
                           f"supports {wanted} provisioning")

    def _admit(self, session: Any, pool: PoolFacts, requested_gb: float, thin: bool,
               ) -> capacity.AdmissionDecision:
        stats = self._pool_stats(pool)
        if stats.backend_state != "up":
            raise BackendUnavailable(f"pool {pool.pool_name} is down: {stats.down_reason}")
        conf = self.configuration
        decision = capacity.admit(
            total_capacity=stats.total_capacity_gb, free_capacity=stats.free_capacity_gb,
            provisioned_capacity=stats.provisioned_capacity_gb, requested=requested_gb,
            in_flight=session.in_flight_gb(self.capacity_group(pool.pool_name)),
            max_over_subscription_ratio=stats.max_over_subscription_ratio,
            reserved_percentage=stats.reserved_percentage, thin=thin,
            calculation=conf.over_provisioning_calculation, pool_name=pool.pool_name)
        if not decision.admitted:
            LOG.warning("refused: %s", decision.explain())
            raise CapacityExceeded(decision)
        return decision

    def _allocated_gb(self, pool_name: str, size_bytes: int) -> float:
        """``size_bytes`` rounded up to the pool's allocation unit, in exact GiB."""
        unit = self.allocation_unit_bytes(pool_name)
        return -(-size_bytes // unit) * unit / GiB

    def _guarded(self, pool_key: str | None, extra_specs: Mapping[str, Any] | None,
                 target: tuple[str, str, int], action: Callable[[PoolFacts, bool], None], *,
                 from_bytes: int = 0) -> None:
        """Admit ``target`` (kind, name, size in bytes), growing from ``from_bytes`` (0: a
        new one), on the chosen pool in its allocation units, then run ``action``: under
        the backend's lock, or through a reservation in etcd. Exact bytes: an LV of
        500 MiB grown to 2 GiB takes 1.5 GiB more."""
        wanted = provisioning_type(extra_specs)
        kind, name, size_bytes = target

        def plan(facts: Sequence[PoolFacts]) -> tuple[PoolFacts, bool, float]:
            pool = self._choose_pool(facts, pool_key, wanted)
            thin = provisioned_thin(pool, wanted)
            return pool, thin, self._allocated_gb(pool.pool_name, size_bytes) \
                - self._allocated_gb(pool.pool_name, from_bytes)

        if self._reservations is not None:
            self._reservations.run(self, plan, {"kind": kind, "name": name,
                                                "size_bytes": size_bytes}, action)
            self._invalidate()
            return
        with self._gate.hold(self.configuration.backend, self._read_pools_or_raise,
                             owner=self) as session:
            pool, thin, needed = plan(session.facts)
            self._admit(session, pool, needed, thin)
            session.confirm_held()  # fail closed: a lock lost since the read runs nothing
            try:
                action(pool, thin)
            except BaseException:
                # whatever failed, the backend may differ from the shared read:
                # the next request reads it afresh (a refusal before any command
                # costs one read more, a wrong reuse could pass the cap)
                session.mark_uncertain()
                raise
            session.record(self.capacity_group(pool.pool_name), needed)
        self._invalidate()

    def _invalidate(self) -> None:
        with self._stats_lock:
            self._stats = None

    # ------------------------------------------------------- volume operations
    def create_volume(self, name: str, size_gb: int, *,
                      extra_specs: Mapping[str, Any] | None = None,
                      pool_name: str | None = None) -> VolumeInfo:
        """Create a volume of ``size_gb`` GiB if admission allows it, in ``pool_name`` (or,
        for a thick request there on a thin-only pool, the backend's thick pool: the
        returned record names the pool).

        Not idempotent: an existing name raises ``AlreadyExists`` (from the
        backend, so a create costs one fresh read plus one command); a refusal
        raises ``CapacityExceeded`` and creates nothing.
        """
        name = self.validate_name(name)
        size_gb = validate_size_gb(size_gb)
        chosen: list[VolumeInfo] = []

        def create(pool: PoolFacts, thin: bool) -> None:
            self.backend_create_volume(name, size_gb, pool_name=pool.pool_name, thin=thin)
            chosen.append(VolumeInfo(name=name, size_gb=size_gb, pool_name=pool.pool_name,
                                     thin=thin))

        self._guarded(pool_name, extra_specs, ("volume", name, size_gb * GiB), create)
        return chosen[0]

    def delete_volume(self, name: str) -> None:
        """Delete a volume. Idempotent: deleting a missing volume succeeds."""
        name = self.validate_name(name)
        try:
            self.backend_delete_volume(name)
        except VolumeNotFound:
            LOG.info("volume %s already gone", name)
        self._invalidate()

    def extend_volume(self, name: str, new_size_gb: int, *,
                      growth_from_whole_gib: bool = False) -> VolumeInfo:
        """Grow a volume to ``new_size_gb`` GiB if admission allows the growth.

        The new size must exceed the current one; a refusal changes nothing.
        ``growth_from_whole_gib``: counted from the size rounded up to whole GiB (Cinder's
        size of a volume managed at a part GiB), as Cinder's scheduler counts it.
        """
        name = self.validate_name(name)
        new_size_gb = validate_size_gb(new_size_gb, "new size")
        volume = self._get_volume(name)
        if new_size_gb * GiB <= volume.size_bytes:
            raise InvalidSize(f"new size {new_size_gb} GiB must exceed the current size "
                              f"{_exact_gib(volume.size_bytes)} of volume {name!r}")
        spec = {"provisioning:type": "thin" if volume.thin else "thick"}
        from_bytes = -(-volume.size_bytes // GiB) * GiB if growth_from_whole_gib else \
            volume.size_bytes
        self._guarded(volume.pool_name, spec, ("volume", name, new_size_gb * GiB),
                      lambda pool, thin: self.backend_extend_volume(name, new_size_gb),
                      from_bytes=from_bytes)
        return VolumeInfo(name=name, size_gb=new_size_gb, pool_name=volume.pool_name,
                          thin=volume.thin)

    def create_snapshot(self, name: str, volume_name: str) -> VolumeInfo:
        """Snapshot a volume, admitted for the volume's size as Cinder's scheduler does:
        Cinder's request carries no volume type, so it is counted thin where the pool
        can do thin (a thick volume's snapshot on a pool offering both included).

        Snapshots do not count as provisioned capacity (Queens spec). A taken
        name raises ``AlreadyExists`` from the backend.
        """
        name = self.validate_name(name)
        volume = self._get_volume(self.validate_name(volume_name))
        self._guarded(volume.pool_name, None, ("snapshot", name, volume.size_gb * GiB),
                      lambda pool, thin: self.backend_create_snapshot(name, volume))
        return VolumeInfo(name=name, size_gb=volume.size_gb, pool_name=volume.pool_name,
                          thin=volume.thin, size_bytes=volume.size_bytes)

    def delete_snapshot(self, name: str) -> None:
        """Delete a snapshot. Idempotent: deleting a missing snapshot succeeds.

        The backend decides what ``name`` is, so a volume's name is refused by
        ``backend_delete_snapshot``, never taken for a missing snapshot.
        """
        name = self.validate_name(name)
        try:
            self.backend_delete_snapshot(name)
        except SnapshotNotFound:
            LOG.info("snapshot %s already gone", name)
        self._invalidate()

    def create_volume_from_snapshot(self, name: str, snapshot_name: str,
                                    size_gb: int | None = None) -> VolumeInfo:
        """A new volume from a snapshot, at least the snapshot's size, admitted first."""
        name = self.validate_name(name)
        snapshot = self.backend_find_snapshot(self.validate_name(snapshot_name))
        if snapshot is None:
            raise SnapshotNotFound(f"no snapshot {snapshot_name!r}")
        return self._copy(name, snapshot, size_gb,
                          lambda size: self.backend_create_volume_from_snapshot(
                              name, snapshot, size))

    def create_cloned_volume(self, name: str, source_name: str,
                             size_gb: int | None = None) -> VolumeInfo:
        """A new volume copied from another, at least the source's size, admitted first."""
        name = self.validate_name(name)
        source = self._get_volume(self.validate_name(source_name))
        return self._copy(name, source, size_gb,
                          lambda size: self.backend_clone_volume(name, source, size))

    def _copy(self, name: str, source: VolumeInfo, size_gb: int | None,
              action: Callable[[int], None]) -> VolumeInfo:
        size = source.size_gb if size_gb is None else validate_size_gb(size_gb)
        if size * GiB < source.size_bytes:
            raise InvalidSize(f"size {size} GiB is smaller than the source's "
                              f"{_exact_gib(source.size_bytes)}")
        spec = {"provisioning:type": "thin" if source.thin else "thick"}
        self._guarded(source.pool_name, spec, ("volume", name, size * GiB),
                      lambda pool, thin: action(size))
        return VolumeInfo(name=name, size_gb=size, pool_name=source.pool_name,
                          thin=source.thin)

    def _get_volume(self, name: str) -> VolumeInfo:
        volume = self.backend_find_volume(name)
        if volume is None:
            raise VolumeNotFound(f"no volume {name!r} on backend "
                                 f"{self.configuration.volume_backend_name}")
        return volume

    # ------------------------------------------------------------------ misc
    def lock_file(self) -> str:
        """The inter-process admission lock file of this backend."""
        return self._gate.lock_file(self.configuration.backend)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend={self.configuration.backend!r}>"

