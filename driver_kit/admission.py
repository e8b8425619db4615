"""Per-backend admission gate: an inter-process lock, one fresh read, counted claims.

Two creates that each fit alone must not both pass when together they do not.
A request takes the backend's in-process lock and then its external file lock
(oslo.concurrency), reads fresh facts, decides, runs the backend command and
records its claim. While other threads of the same process are queued for the
same backend, the external lock is handed on without being released, so they may
share the fresh read: every claim made since the read is added as in flight
(Placement's generation idea), and no other process can have changed the pools.
With a redis/zookeeper/file coordination URL the external lock is a tooz lock
shared by every host (driver_kit.coordination), held the same way; without one,
the file lock. An etcd URL does not come here: it admits through reservations
(driver_kit.reservations), with no lock across hosts.
The lock covers every pool of a backend because one fresh read serves them all.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from oslo_concurrency import lockutils

from driver_kit.coordination import CoordinatedLock
from driver_kit.exceptions import ConfigError, CoordinationError
from driver_kit.lock_dir import default_lock_path, private_lock_dir

LOG = logging.getLogger(__name__)

__all__ = ["AdmissionGate"]

#: how many requests in a row may be handed the external lock without its release
#: (counting the one that took it); then it is released and taken anew, which
#: gives other processes a turn and discards the shared read
MAX_SHARED_READS = 32


@dataclass(slots=True)
class _PoolState:
    thread_lock: threading.Lock = field(default_factory=threading.Lock)
    meta: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0
    external: Any = None
    facts: Any = None
    reader: Any = None
    claims: dict[str, float] = field(default_factory=dict)
    shared_uses: int = 0


# One state per lock file for the whole process: fcntl locks belong to the
# process, so two gates (two driver instances) on the same lock file must
# also exclude each other through the same thread lock.
_STATES: dict[str, _PoolState] = {}
_STATES_LOCK = threading.Lock()


class AdmissionGate:
    """Serialises admissions per backend across threads, instances and processes."""

    def __init__(self, lock_path: str, *, prefix: str = "driver_kit-",
                 coordination_url: str | None = None) -> None:
        self._lock_path = lock_path
        self._prefix = prefix
        self._coordination_url = coordination_url or None

    def _external_lock(self, key: str) -> Any:
        """The cross-process lock of ``key``: tooz with a coordination URL, else a file lock."""
        if self._coordination_url:
            return CoordinatedLock(self._coordination_url, f"{self._prefix}{key}")
        if os.path.abspath(self._lock_path) == os.path.abspath(default_lock_path()):
            private_lock_dir(self._lock_path)  # in the shared temporary directory
        else:
            try:
                os.makedirs(self._lock_path, exist_ok=True)
            except OSError as exc:  # made a file, or unwritable, since the config was read
                raise ConfigError(f"lock_path {self._lock_path}: cannot be made or used: "
                                  f"{exc.strerror}") from None
        return lockutils.external_lock(key, lock_file_prefix=self._prefix,
                                       lock_path=self._lock_path)

    def lock_file(self, key: str) -> str:
        """Where the external lock of ``key`` lives (for operators and tests)."""
        return os.path.join(self._lock_path, f"{self._prefix}{key}")

    def _state(self, key: str) -> _PoolState:
        with _STATES_LOCK:
            return _STATES.setdefault(os.path.abspath(self.lock_file(key)), _PoolState())

    @contextlib.contextmanager
    def hold(self, key: str, read_facts: Callable[[], Any], *,
             owner: Any = None) -> Iterator["_Session"]:
        """Hold the lock of ``key``; yield a session with fresh facts and the claims since.

        Facts are shared only with later requests of the same ``owner`` (one
        driver instance); another owner reads anew while the lock stays held.
        """
        state = self._state(key)
        with state.meta:
            state.waiting += 1
        state.thread_lock.acquire()
        try:
            with state.meta:
                state.waiting -= 1
            if state.external is None or state.shared_uses >= MAX_SHARED_READS:
                self._release_external(state)
                lock = self._external_lock(key)
                lock.acquire()
                state.external = lock
            if state.facts is None or state.reader is not owner:
                try:
                    facts = read_facts()
                except BaseException:
                    self._release_external(state)  # also forgets the old facts and claims
                    raise
                # under a lock held all along, a fresh read already shows every claim
                state.facts, state.reader, state.claims = facts, owner, {}
            state.shared_uses += 1
            session = _Session(state.facts, state.claims, state.external)
            try:
                yield session
            finally:
                if session.uncertain:
                    # the backend may have changed in a way we cannot count
                    self._release_external(state)
                with state.meta:
                    if state.waiting == 0:
                        self._release_external(state)
        finally:
            state.thread_lock.release()

    @staticmethod
    def _release_external(state: _PoolState) -> None:
        if state.external is not None:
            try:
                state.external.release()
            except CoordinationError as exc:
                # lost after its command ran: that command was admitted on a fresh read
                # and started with the lease just renewed, so it stands; whoever holds
                # the lock next reads the backend afresh and sees what it made
                LOG.warning("%s: what ran under it stands, the next holder reads afresh", exc)
            except Exception:  # a lock we cannot release is logged, not fatal
                LOG.exception("could not release admission lock")
            state.external = None
        state.facts = None
        state.reader = None
        state.claims = {}
        state.shared_uses = 0


class _Session:
    """What one admission sees: the shared facts and the claims made since."""

    def __init__(self, facts: Any, claims: dict[str, float], lock: Any = None) -> None:
        self.facts = facts
        self._claims = claims
        self._lock = lock
        self.uncertain = False

    def confirm_held(self) -> None:
        """Right before the backend command: refuse if the cross-host lock was lost.

        A coordination lock whose lease ended since the fresh read (heartbeats
        failed, the service unreachable) may be another host's by now, and the
        read stale: CoordinationError, and nothing is run. File locks cannot be
        lost while the process lives.
        """
        if isinstance(self._lock, CoordinatedLock):
            try:
                self._lock.check()
            except BaseException:
                self.uncertain = True  # let the lock go and read afresh next time
                raise

    def in_flight_gb(self, pool_name: str) -> float:
        """GiB admitted on ``pool_name`` since the facts were read."""
        return self._claims.get(pool_name, 0.0)

    def record(self, pool_name: str, size_gb: float) -> None:
        """Count capacity taken by a command that succeeded after the read."""
        self._claims[pool_name] = self._claims.get(pool_name, 0.0) + size_gb

    def mark_uncertain(self) -> None:
        """A command failed midway: the next request must read the backend anew."""
        self.uncertain = True
