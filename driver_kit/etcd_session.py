"""This process's etcd session: one client and one lease, kept alive by a thread of our own.

Reservations (driver_kit.reservations) hang on the lease, so a dead host's
expire with it. The heartbeat is ours, not tooz's: every call is bounded by
the URL's request timeout, a lease found gone (etcd restarted without its
data, the host paused past it) is granted anew and this process's reservations
still in flight are written again under it, and reservations whose deletion
failed (etcd unreachable) are retried on each beat. ``close`` returns within
its bound whatever etcd does.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from driver_kit.coordination_url import CoordinationSettings, redact_text
from driver_kit.exceptions import CoordinationError

__all__ = ["EtcdSession", "Reservation", "session_for", "close_sessions"]

LOG = logging.getLogger(__name__)

#: key layout, one directory per capacity group (named by the array's identity)
ROOT = "/driver_kit/capacity/"
GENERATION, SETTLING, RESERVATIONS = "generation", "settling", "reservations/"


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def unb64(text: str) -> str:
    return base64.b64decode(text).decode()


def range_end(prefix: str) -> str:
    """The end of etcd's range holding every key that starts with ``prefix``."""
    raw = prefix.encode()
    return b64(raw[:-1] + bytes([raw[-1] + 1]))


@dataclass(frozen=True, slots=True)
class Reservation:
    """Capacity promised to one request in flight: its key and what it is for."""

    group: str  # the capacity group's directory (ROOT + digest + "/")
    key: str
    value: dict[str, Any]

    @property
    def gb(self) -> float:
        return float(self.value["gb"])


def put(key: str, value: Any, lease: int = 0) -> dict[str, Any]:
    request = {"key": b64(key), "value": b64(json.dumps(value, sort_keys=True))}
    if lease:
        request["lease"] = str(lease)
    return {"requestPut": request}


def delete(key: str) -> dict[str, Any]:
    return {"requestDeleteRange": {"key": b64(key)}}


def group_created(group: str, identity: str, settle_lease: int) -> list[dict[str, Any]]:
    """The writes that start a capacity group: its generation, and a settling mark
    that ends with its own lease (one TTL in which hosts write back what they had
    in flight before admissions resume)."""
    return [put(group + GENERATION, {"identity": identity}),
            put(group + SETTLING, {"until": "its lease ends"}, settle_lease)]


class EtcdSession:
    """One client and one heartbeated lease of this process on the etcd of ``settings``."""

    def __init__(self, settings: CoordinationSettings) -> None:
        import etcd3gw  # imported on use: only deployments with an etcd URL need it

        self.settings = settings
        self.client = etcd3gw.client(
            host=settings.host, port=settings.port,
            protocol="https" if settings.scheme.endswith("https") else "http",
            ca_cert=settings.ca_cert, cert_key=settings.cert_key,
            cert_cert=settings.cert_cert, timeout=settings.request_timeout_s)
        self._lock = threading.Lock()
        self._lease_id = 0
        self._in_flight: dict[str, Reservation] = {}
        self._unsettled: dict[str, tuple[Reservation, Callable[[], bool]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.regrants = 0

    # ------------------------------------------------------------- calls
    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` against etcd; any failure a CoordinationError with its cause, URL redacted."""
        try:
            return fn()
        except CoordinationError:
            raise
        except Exception as exc:  # connection refused, timeout, a 5xx, bad JSON
            cause = " ".join(filter(None, (str(exc), str(getattr(exc, "detail_text", "") or "")))
                             ) or f"no answer within {self.settings.request_timeout_s:g} s"
            raise CoordinationError(
                f"coordination backend {self.settings.redacted}: {what} failed: "
                f"{type(exc).__name__}: {redact_text(cause, self.settings.url)}") from exc

    def read_group(self, group: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(header, kvs) of every key of ``group``, read at one revision."""
        answer = self.call("reading reservations", lambda: self.client.post(
            self.client.get_url("/kv/range"),
            json={"key": b64(group), "range_end": range_end(group)}))
        return answer.get("header", {}), answer.get("kvs", [])

    def txn(self, what: str, compare: list[dict[str, Any]], success: list[dict[str, Any]],
            failure: list[dict[str, Any]] | None = None) -> bool:
        """One etcd transaction; whether its comparisons held."""
        answer = self.call(what, lambda: self.client.transaction(
            {"compare": compare, "success": success, "failure": failure or []}))
        return answer.get("succeeded", False) is True

    def grant(self, ttl_s: int) -> int:
        """A new lease of ``ttl_s`` seconds (not renewed by anyone)."""
        return int(self.call("granting a lease", lambda: self.client.lease(ttl_s)).id)

    # ------------------------------------------------------------- the lease
    def lease_id(self) -> int:
        """This process's lease, granted now if there is none; starts the heartbeat."""
        self._start_heartbeat()
        with self._lock:
            if not self._lease_id:
                self._lease_id = self.grant(self.settings.lease_s)
            return self._lease_id

    def renew(self) -> None:
        """Renew the lease now (right before a backend command), or raise CoordinationError.

        After it the lease has its whole TTL ahead, longer than the command's
        timeout, so the command's reservation outlives it even if no heartbeat
        gets through afterwards.
        """
        lease = self.lease_id()
        from etcd3gw.lease import Lease

        if self.call("renewing the lease", Lease(lease, self.client).refresh) <= 0:
            self.lease_lost(lease)
            raise CoordinationError(f"coordination backend {self.settings.redacted}: the "
                                    f"lease ended before the command (host paused or etcd "
                                    f"restarted): nothing was run")

    def lease_lost(self, lease: int) -> None:
        """``lease`` is gone: the next call grants a new one."""
        with self._lock:
            if self._lease_id == lease:
                self._lease_id = 0

    # ------------------------------------------------------------- reservations
    def hold(self, reservation: Reservation) -> None:
        """``reservation`` is committed, its command in flight: written back if the lease goes."""
        with self._lock:
            self._in_flight[reservation.key] = reservation

    def settle(self, reservation: Reservation, settled: Callable[[], bool]) -> None:
        """The command is over: delete the reservation once ``settled()`` (a backend read
        showing the volume, or a certain failure) says so; until then, or while etcd
        does not answer, the heartbeat tries again."""
        with self._lock:
            self._in_flight.pop(reservation.key, None)  # its command is over: never written back
            self._unsettled[reservation.key] = (reservation, settled)
        self._settle_one(reservation.key)

    def _settle_one(self, key: str) -> None:
        with self._lock:
            entry = self._unsettled.get(key)
        if entry is None:
            return
        reservation, settled = entry
        try:
            if not settled():
                return
            self.call("deleting a reservation",
                      lambda: self.client.delete(reservation.key))
        except Exception as exc:  # noqa: BLE001 - kept, and tried again on the next beat
            LOG.warning("reservation %s kept for now: %s", reservation.key, exc)
            return
        with self._lock:
            self._unsettled.pop(key, None)

    def pending(self) -> int:
        """Reservations of this process not yet deleted (in flight or unsettled)."""
        with self._lock:
            return len(set(self._in_flight) | set(self._unsettled))

    # ------------------------------------------------------------- heartbeat
    def _start_heartbeat(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._beat, daemon=True,
                                            name="driver_kit-etcd-heartbeat")
            self._thread.start()

    def _beat(self) -> None:
        period_s = self.settings.heartbeat_s
        failing_since = None
        while not self._stop.wait(period_s if failing_since is None else min(period_s, 0.5)):
            try:
                self.beat_once()
                if failing_since is not None:
                    LOG.warning("coordination backend %s answers again after %.1f s",
                                self.settings.redacted, time.monotonic() - failing_since)
                failing_since = None
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any outage
                if failing_since is None:
                    failing_since = time.monotonic()
                    LOG.warning("heartbeat: %s", exc)

    def beat_once(self) -> None:
        """Renew the lease (grant a new one and write back what is in flight if it is
        gone), then retry the reservations waiting to be deleted."""
        from etcd3gw.lease import Lease

        with self._lock:
            lease = self._lease_id
        if lease and self.call("renewing the lease", Lease(lease, self.client).refresh) <= 0:
            LOG.warning("coordination backend %s: lease %x ended (etcd restarted or this "
                        "host was paused): granting a new one", self.settings.redacted, lease)
            self.lease_lost(lease)
            lease = 0
        if not lease and self._in_flight:
            self._write_back(self.lease_id())
        for key in list(self._unsettled):
            self._settle_one(key)

    def _write_back(self, lease: int) -> None:
        """Write this process's reservations in flight again under ``lease``, each group's
        generation bumped (a group gone with etcd's data is started again, settling)."""
        self.regrants += 1
        with self._lock:
            by_group: dict[str, list[Reservation]] = {}
            for reservation in self._in_flight.values():
                by_group.setdefault(reservation.group, []).append(reservation)
        for group, reservations in by_group.items():
            identity = reservations[0].value.get("identity", "")
            writes = [put(r.key, r.value, lease) for r in reservations]
            settle_lease = self.grant(self.settings.settle_s)
            self.txn("writing back reservations",
                     [{"key": b64(group + GENERATION), "result": "EQUAL",
                       "target": "VERSION", "version": "0"}],
                     group_created(group, identity, settle_lease) + writes,
                     [put(group + GENERATION, {"identity": identity})] + writes)

    def close(self, timeout_s: float) -> bool:
        """Stop the heartbeat and give the lease back, within ``timeout_s``; whether it did."""
        self._stop.set()
        done = threading.Event()

        def revoke() -> None:
            from etcd3gw.lease import Lease

            try:
                if self._lease_id:
                    Lease(self._lease_id, self.client).revoke()
            except Exception as exc:  # noqa: BLE001 - a gone etcd ends the lease by itself
                LOG.debug("lease revoke: %s", exc)
            done.set()
        threading.Thread(target=revoke, daemon=True, name="driver_kit-etcd-close").start()
        return done.wait(timeout_s)


_SESSIONS: dict[tuple[int, str], EtcdSession] = {}
_SESSIONS_LOCK = threading.Lock()


def session_for(settings: CoordinationSettings) -> EtcdSession:
    """This process's session on ``settings``'s etcd (a forked child makes its own)."""
    key = (os.getpid(), settings.url)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            session = _SESSIONS[key] = EtcdSession(settings)
        return session


def close_sessions(url: str | None = None, *, timeout_s: float) -> list[str]:
    """Close this process's sessions on ``url`` (all when None); the URLs not closed in time."""
    with _SESSIONS_LOCK:
        chosen = [k for k in _SESSIONS if k[0] == os.getpid() and url in (None, k[1])]
        sessions = [(k[1], _SESSIONS.pop(k)) for k in chosen]
    return [where for where, session in sessions if not session.close(timeout_s)]
