"""Coordination URLs (checked, redacted) and admission locks through tooz, failing closed.

An ``etcd3+http(s)://`` URL admits through reservations in etcd
(driver_kit.reservations): no lock is held across a backend command. Any other
known scheme (redis://, zookeeper://, file://) keeps a tooz lock per backend,
as Cinder's active-active clusters use: the coordinator starts on first use
with heartbeats, so a killed holder's lock expires with its lease. Any failure
to reach the service, to get the lock in time, or to keep it is a
CoordinationError naming the URL with its secrets redacted.
"""

from __future__ import annotations

import logging
import math
import threading
import uuid
from typing import Any

from driver_kit.coordination_url import (CoordinationSettings, parse_coordination_url,
                                         redact_text, redact_url)
from driver_kit.etcd_session import close_sessions
from driver_kit.exceptions import CoordinationError
from driver_kit.stats import is_number

__all__ = ["CoordinatedLock", "CoordinationSettings", "coordinator_for",
           "parse_coordination_url", "redact_url", "stop_coordinators"]

LOG = logging.getLogger(__name__)

#: seconds to wait for a cross-host admission lock before refusing the request
ACQUIRE_TIMEOUT_S = 30.0

_COORDINATORS: dict[str, object] = {}
_COORDINATORS_LOCK = threading.Lock()


def coordinator_for(url: str) -> object:
    """The started tooz coordinator of ``url`` for this process (started once, lazily)."""
    from tooz import coordination  # imported on use: only deployments with a URL need tooz

    with _COORDINATORS_LOCK:
        coordinator = _COORDINATORS.get(url)
        if coordinator is None:
            member = f"driver_kit-{uuid.uuid4()}".encode()
            try:
                coordinator = coordination.get_coordinator(url, member)
                coordinator.start(start_heart=True)
            except Exception as exc:
                raise CoordinationError(
                    f"coordination backend {redact_url(url)} unreachable: "
                    f"{type(exc).__name__}: {redact_text(str(exc), url)}") from exc
            _COORDINATORS[url] = coordinator
        return coordinator


#: seconds to wait for one coordinator to stop before leaving it behind
STOP_TIMEOUT_S = 10.0


def stop_coordinators(url: str | None = None, *, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
    """Stop this process's coordinator of ``url`` (all when None), each within ``timeout_s``.

    tooz's stop waits for its heartbeat thread, and that thread retries a failed
    heartbeat without end, so against a service that is gone a plain stop never
    returns. Each stop runs in a daemon thread instead; one still running at its
    deadline is logged and left behind. Returns the URLs left behind.
    """
    if not (is_number(timeout_s) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    left_behind = close_sessions(url, timeout_s=timeout_s)  # etcd: our own lease
    with _COORDINATORS_LOCK:
        urls = [url] if url is not None else list(_COORDINATORS)
        stopping = [(u, _COORDINATORS.pop(u)) for u in urls if u in _COORDINATORS]
    for where, coordinator in stopping:
        stopper = threading.Thread(target=_stop_quietly, args=(coordinator,), daemon=True,
                                   name=f"stop-coordinator {where}")
        stopper.start()
        stopper.join(timeout_s)
        if stopper.is_alive():
            LOG.warning("coordinator of %s did not stop within %g s (its heartbeat is "
                        "retrying a service that does not answer); left behind",
                        redact_url(where), timeout_s)
            left_behind.append(where)
    return left_behind


def _stop_quietly(coordinator: Any) -> None:
    try:
        coordinator.stop()
    except Exception as exc:  # noqa: BLE001 - a service already gone stops nothing
        LOG.debug("coordinator stop: %s", exc)


def forget_coordinators() -> None:
    """Drop this process's coordinators (a forked child must start its own)."""
    with _COORDINATORS_LOCK:
        _COORDINATORS.clear()


def still_owner(lock: Any) -> bool:
    """Whether ``lock`` (a held tooz lock) is still ours, asking the service itself.

    tooz answers this for its file, Redis, ZooKeeper, memcached and Kubernetes
    locks (``is_still_owner``) but not for etcd3, whose ``heartbeat`` even says
    True after the lease has expired; there the lease is renewed and the lock's
    key compared with the token it was written with, in one etcd transaction.
    """
    import tooz  # imported on use: only deployments with a URL need tooz

    try:
        return bool(lock.is_still_owner())
    except tooz.NotImplemented:
        pass
    if not all(hasattr(lock, a) for a in ("_lease", "_coord", "_key_b64", "_uuid")):
        raise CoordinationError(f"cannot tell whether a {type(lock).__name__} is still held")
    if lock._lease.refresh() <= 0:  # -1: the lease is gone, and the key with it
        return False
    same_token = {"key": lock._key_b64, "result": "EQUAL", "target": "VALUE",
                  "value": lock._uuid}
    answer = lock._coord.client.transaction({"compare": [same_token], "success": [],
                                             "failure": []})
    return answer.get("succeeded", False) is True


class CoordinatedLock:
    """One backend's admission lock on the coordination service; acquire/release like a file lock."""

    def __init__(self, url: str, name: str, *, timeout_s: float = ACQUIRE_TIMEOUT_S) -> None:
        self.url = url
        self.name = name
        self.timeout_s = timeout_s
        self._lock = None
        self._shown = redact_url(url)

    def acquire(self) -> None:
        """Take the lock within the timeout, or raise CoordinationError naming the URL."""
        try:
            lock = coordinator_for(self.url).get_lock(self.name.encode())
            got = lock.acquire(blocking=self.timeout_s)
        except CoordinationError:
            raise
        except Exception as exc:
            raise CoordinationError(
                f"coordination backend {self._shown}: cannot take lock {self.name}: "
                f"{type(exc).__name__}: {redact_text(str(exc), self.url)}"
            ) from exc
        if not got:
            raise CoordinationError(f"coordination backend {self._shown}: lock {self.name} "
                                    f"not granted within {self.timeout_s:g} s")
        self._lock = lock

    def check(self) -> None:
        """Raise CoordinationError unless the lock is still ours, with its lease renewed.

        Called right before a backend command: a lease lost since the admission
        read (heartbeats failed, the service unreachable, the lock broken) means
        another host may have taken the lock and changed the backend, so the
        command must not run. After a successful check the lease has its whole
        timeout ahead, which is what covers the command itself.
        """
        lock = self._lock
        try:
            held = lock is not None and still_owner(lock)
        except Exception as exc:
            raise CoordinationError(
                f"coordination backend {self._shown}: lock {self.name} lost: {exc}") from exc
        if not held:
            raise CoordinationError(f"coordination backend {self._shown}: lock {self.name} lost "
                                    f"(its lease ended or the lock was broken)")

    def release(self) -> None:
        """Give the lock back; a lock already lost is only logged by the caller."""
        lock, self._lock = self._lock, None
        if lock is not None and not lock.release():
            raise CoordinationError(
                f"coordination backend {self._shown}: lock {self.name} was lost before release")
