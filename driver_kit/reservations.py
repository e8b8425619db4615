"""Admission across hosts without a lock: reservations in etcd, committed by compare-and-swap.

Per capacity group (named by the array's identity, never a config section)
etcd holds a generation key and one reservation key per request in flight,
each bound to its host's lease. An admission reads the group (generation and
reservations at one revision), then asks the backend which reserved volumes
it already shows (those are counted by the backend itself, so they are
dropped), then reads the backend's facts afresh, decides with
``capacity.admit`` (in flight = the reservations left) and commits its own
reservation in ONE transaction that holds only if the generation is still the
one read (Placement's generation, etcd's compare-and-swap). A conflict reads
again at once (with jitter after the first, bounded by a deadline). The
backend command then runs outside any lock, in parallel across hosts, and the
reservation is deleted once a backend read shows the volume or the command's
failure is certain.

Why the order holds the cap: a reservation is read before the facts, so a
command that finishes between the two is counted at least once; one shown by
the backend before the facts are read is in the facts. "At least once" may be
twice (its reservation and its volume in the facts): before refusing on such
figures, an admission whose counted reservations the backend now shows reads
everything again, so a request that fits exactly is not refused for a race.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import socket
import time
import uuid
from typing import Any, Callable, Mapping, Protocol

from driver_kit.coordination_url import CoordinationSettings, parse_coordination_url
from driver_kit.etcd_session import (GENERATION, RESERVATIONS, ROOT, SETTLING, Reservation,
                                     b64, group_created, put, session_for, unb64)
from driver_kit.exceptions import CapacityExceeded, CoordinationError, InvalidInput

__all__ = ["ReservationAdmission", "ReservationHooks", "group_directory", "reservations_for"]

LOG = logging.getLogger(__name__)

#: commits tried before a request is refused; conflicts past the first wait a jitter
MAX_ATTEMPTS = 64
MAX_JITTER_S = 0.05
#: reads again before refusing, when a counted reservation's volume appeared meanwhile
MAX_REREADS = 8
#: how often a request looks again while a new group settles
SETTLE_POLL_S = 0.2


class _Planned(Protocol):
    """What a driver decided for one request from a fresh read."""

    def __call__(self, facts: Any) -> tuple[Any, bool, float]: ...


def reservations_for(url: str | None, *, command_timeout_s: float | None
                     ) -> "ReservationAdmission | None":
    """Admission through etcd reservations for an etcd URL; None for none or a tooz lock's.

    Any URL is checked here, at setup: ConfigError of one line if unusable.
    """
    if not url:
        return None
    settings = parse_coordination_url(url, command_timeout_s=command_timeout_s)
    return ReservationAdmission(settings) if settings.uses_etcd else None


class ReservationHooks:
    """What a driver tells cross-host admission: VolumeDriver's defaults, overridable
    (they use the driver's ``capacity_group`` and ``backend_find_*`` hooks)."""

    def capacity_group_identity(self: Any, pool: Any) -> str:
        """The array-wide name of the capacity ``pool`` draws on, as the backend gives it:
        hosts share reservations by it, whatever their config sections are called.
        Default: the pool's ``location_info`` (else the driver's class) and its group."""
        where = pool.location_info or type(self).__name__
        return f"{where}#{self.capacity_group(pool.pool_name)}"

    def backend_command_timeout_s(self) -> float | None:
        """The longest a backend command may run (None: unbounded or unknown); an
        etcd lease shorter than it is refused at setup."""
        return None

    def reservation_shown(self: Any, target: Mapping[str, Any]) -> bool:
        """Whether the backend shows what a reservation was for (a volume of at least
        its size, or the snapshot): then the backend's own figures count it."""
        try:  # names come from etcd: only a valid one reaches the backend
            name = self.validate_name(target["name"])
        except InvalidInput:
            return False  # never shown: it stays counted until its lease ends
        find = self.backend_find_snapshot if target["kind"] == "snapshot" \
            else self.backend_find_volume
        found = find(name)
        return found is not None and found.size_bytes >= target["size_bytes"]


def group_directory(identity: str) -> str:
    """The etcd directory of the capacity group ``identity`` names (hashed: any text is safe)."""
    return f"{ROOT}{hashlib.sha256(identity.encode()).hexdigest()[:40]}/"


class _GroupView:
    """One read of a group: its generation's revision and the reservations in it."""

    def __init__(self, kvs: list[dict[str, Any]], group: str) -> None:
        self.generation = 0
        self.settling = False
        self.reservations: list[Reservation] = []
        for kv in kvs:
            key = unb64(kv["key"])
            if key == group + GENERATION:
                self.generation = int(kv.get("mod_revision", 0))
            elif key == group + SETTLING:
                self.settling = True
            elif key.startswith(group + RESERVATIONS):
                self.reservations.append(Reservation(group, key, _checked(key, kv)))


def _checked(key: str, kv: dict[str, Any]) -> dict[str, Any]:
    """A reservation's value, or CoordinationError: one that cannot be counted refuses
    the admission (fail closed), whoever wrote it."""
    try:
        value = json.loads(unb64(kv["value"]))
        if not (isinstance(value["name"], str) and value["kind"] in ("volume", "snapshot")
                and type(value["size_bytes"]) is int and float(value["gb"]) >= 0):
            raise ValueError("unexpected fields")
        return value
    except (KeyError, TypeError, ValueError) as exc:
        raise CoordinationError(f"reservation {key} cannot be read ({exc}): refusing to "
                                f"admit past what it may hold") from None


class _InFlight:
    """The reservations still counted, as the admission math asks for them."""

    def __init__(self, total_gb: float) -> None:
        self.total_gb = total_gb

    def in_flight_gb(self, group: str) -> float:
        return self.total_gb


class ReservationAdmission:
    """Admits one driver's requests through reservations on the etcd of ``settings``."""

    def __init__(self, settings: CoordinationSettings) -> None:
        self.settings = settings
        self._facts: Any = None
        self.conflicts = 0

    @property
    def session(self) -> Any:
        return session_for(self.settings)

    def run(self, driver: Any, plan: _Planned, target: dict[str, Any],
            action: Callable[[Any, bool], None]) -> None:
        """Admit ``target`` (kind, name, size_bytes) as ``plan`` decides, then run ``action``.

        Raises CapacityExceeded (nothing reserved, nothing run) or CoordinationError
        (etcd unreachable, too slow, or the lease gone before the command).
        """
        session = self.session
        settings = self.settings
        deadline = time.monotonic() + settings.settle_s + 10 * settings.request_timeout_s
        if self._facts is None:
            self._facts = driver._read_pools_or_raise()  # which group: only the first time
        pool, _, _ = plan(self._facts)
        identity = driver.capacity_group_identity(pool)
        rereads = 0
        for attempt in range(MAX_ATTEMPTS):
            if attempt > 1:  # the second conflict in a row: let the others through first
                time.sleep(random.uniform(0, MAX_JITTER_S))
            if time.monotonic() > deadline:
                raise CoordinationError(f"coordination backend {self.settings.redacted}: "
                                        f"admission not committed within its deadline")
            group = group_directory(identity)
            view = self._read(session, group, identity, deadline)
            counted = [r for r in view.reservations if not driver.reservation_shown(r.value)]
            self._facts = facts = driver._read_pools_or_raise()
            pool, thin, needed = plan(facts)
            if driver.capacity_group_identity(pool) != identity:
                identity = driver.capacity_group_identity(pool)
                continue
            try:
                driver._admit(_InFlight(sum(r.gb for r in counted)), pool, needed, thin)
            except CapacityExceeded:
                if rereads < MAX_REREADS and any(driver.reservation_shown(r.value)
                                                  for r in counted):
                    rereads += 1  # a command ended between the two reads: the facts may
                    continue      # count it beside its reservation; read both again
                raise
            reservation = self._reservation(group, identity, target, needed)
            if self._commit(session, view, reservation):
                break
            self.conflicts += 1
        else:
            raise CoordinationError(
                f"coordination backend {self.settings.redacted}: no admission committed in "
                f"{MAX_ATTEMPTS} tries (every one conflicted with another host's)")
        self._run_reserved(driver, session, reservation, action, pool, thin)

    def _run_reserved(self, driver: Any, session: Any, reservation: Reservation,
                      action: Callable[[Any, bool], None], pool: Any, thin: bool) -> None:
        session.hold(reservation)
        try:
            session.renew()  # fail closed: a lease already gone protects nothing
        except BaseException:
            session.settle(reservation, lambda: True)
            raise
        failed = False
        try:
            action(pool, thin)
        except BaseException:
            failed = True
            raise
        finally:
            # a failed command leaves nothing (the driver contract): the reservation goes
            # once the backend answers; a done one once the backend shows it (a snapshot
            # is never provisioned capacity: once its command ended there is nothing to hold)
            value = reservation.value
            session.settle(reservation, lambda: driver.reservation_shown(value) or failed
                           or value["kind"] == "snapshot")

    def _read(self, session: Any, group: str, identity: str, deadline: float) -> _GroupView:
        """The group as etcd has it, started (and waited out while it settles) if new."""
        while True:
            _, kvs = session.read_group(group)
            view = _GroupView(kvs, group)
            if not view.generation:
                self._start_group(session, group, identity)
                continue
            if not view.settling:
                return view
            if time.monotonic() + SETTLE_POLL_S > deadline:
                raise CoordinationError(
                    f"coordination backend {self.settings.redacted}: capacity group "
                    f"{identity} still settling (new or emptied etcd: hosts write back "
                    f"what they had in flight)")
            time.sleep(SETTLE_POLL_S)

    def _start_group(self, session: Any, group: str, identity: str) -> None:
        LOG.warning("coordination backend %s: capacity group %s has no generation (new or "
                    "emptied etcd): admissions wait %d s for hosts to write back "
                    "reservations in flight", self.settings.redacted, identity,
                    self.settings.settle_s)
        settle_lease = session.grant(self.settings.settle_s)
        session.txn("starting a capacity group",
                    [{"key": b64(group + GENERATION), "result": "EQUAL", "target": "VERSION",
                      "version": "0"}], group_created(group, identity, settle_lease))

    def _reservation(self, group: str, identity: str, target: dict[str, Any],
                     needed_gb: float) -> Reservation:
        value = dict(target, gb=needed_gb, identity=identity, host=socket.gethostname())
        return Reservation(group, f"{group}{RESERVATIONS}{uuid.uuid4().hex}", value)

    def _commit(self, session: Any, view: _GroupView, reservation: Reservation) -> bool:
        """Write the reservation and bump the generation, if it is still the one read."""
        group = reservation.group
        same = {"key": b64(group + GENERATION), "result": "EQUAL", "target": "MOD",
                "mod_revision": str(view.generation)}
        lease = session.lease_id()
        try:
            return session.txn("committing a reservation", [same], [
                put(group + GENERATION, {"identity": reservation.value["identity"]}),
                put(reservation.key, reservation.value, lease)])
        except CoordinationError as exc:
            if "lease not found" not in str(exc):
                raise
            session.lease_lost(lease)  # ended since the last beat: the next try has a new one
            return False
