"""Coordination URLs: checked once at setup, and redacted wherever they are shown.

``coordination_backend_url`` is a secret (Cinder marks its own ``backend_url``
so): its user info and the values of password- or token-like query parameters
never reach a message or a log line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from driver_kit.exceptions import ConfigError

__all__ = ["CoordinationSettings", "parse_coordination_url", "redact_text", "redact_url"]

#: etcd's own schemes (reservations); the others are tooz locks
ETCD_SCHEMES = ("etcd3+http", "etcd3+https")
LOCK_SCHEMES = ("file", "redis", "zookeeper")
#: tooz's lease of etcd3 URLs, seconds, when ``?timeout=`` is not given
DEFAULT_LEASE_S = 30
#: query parameters whose values are secrets (credentials, tokens, keys)
_SECRET_PARAMS = ("password", "passwd", "pass", "token", "secret", "key", "auth",
                  "credential", "sentinel_password")


def redact_url(url: str | None) -> str:
    """``url`` fit for a message or a log: its user info and secret query values as ***.

    Cinder marks its own ``backend_url`` secret; every message of the kit that
    names a coordination URL goes through here so it never re-exposes it.
    """
    if not url:
        return str(url)
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
    except ValueError:
        return "<unparsable coordination URL>"
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = "&".join(
        f"{k}=***" if any(word in k.lower() for word in _SECRET_PARAMS) else f"{k}={v}"
        for k, v in parse_qsl(parts.query, keep_blank_values=True))
    rebuilt = f"{parts.scheme}://{netloc}{parts.path}"
    return rebuilt + (f"?{query}" if query else "") + ("#***" if parts.fragment else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinationSettings:
    """A checked coordination URL: where etcd answers, its lease, how long a call may take."""

    url: str
    scheme: str
    host: str
    port: int
    lease_s: int
    ca_cert: str | None = None
    cert_key: str | None = None
    cert_cert: str | None = None

    @property
    def uses_etcd(self) -> bool:
        """Whether admission goes through etcd reservations (else a tooz lock)."""
        return self.scheme in ETCD_SCHEMES

    @property
    def request_timeout_s(self) -> float:
        """One etcd call longer than this fails: a third of the lease (a heartbeat that
        times out leaves time for the next before the lease ends), 3 s at most."""
        return max(0.5, min(self.lease_s / 3, 3.0))

    @property
    def heartbeat_s(self) -> float:
        """How often the lease is renewed: a third of it, at least every 2 s, so a lease
        lost (etcd restarted empty, a pause) is found and written back soon."""
        return min(self.lease_s / 3, 2.0)

    @property
    def settle_s(self) -> int:
        """How long a new (or emptied) capacity group admits nothing: time for every
        host's heartbeat to find its lease gone and write back what it has in flight."""
        return min(self.lease_s, math.ceil(self.heartbeat_s + 3 * self.request_timeout_s + 1))

    @property
    def redacted(self) -> str:
        return redact_url(self.url)


def parse_coordination_url(url: str, *, command_timeout_s: float | None = None
                           ) -> CoordinationSettings:
    """Check ``url`` at setup; a ConfigError of one line for anything admission cannot use.

    Refused: an unknown scheme, a ``timeout`` that is not a positive whole
    number of seconds, and (for etcd) a lease shorter than ``command_timeout_s``:
    a reservation must outlive the longest backend command it covers. Without a
    ``timeout`` the lease is 30 s, or the command timeout when that is longer.
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        options = dict(parse_qsl(parts.query))
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"coordination_backend_url {shown}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ETCD_SCHEMES + LOCK_SCHEMES:
        raise ConfigError(
            f"coordination_backend_url {shown}: unknown scheme {parts.scheme!r} (use one of "
            f"{', '.join(s + '://' for s in ETCD_SCHEMES + LOCK_SCHEMES)})")
    # no timeout given (DevStack's and Cinder's usual URL): a lease long enough
    raw = options.get("timeout") or str(max(DEFAULT_LEASE_S, math.ceil(command_timeout_s or 0)))
    try:
        lease_s = int(raw)
    except ValueError:
        lease_s = 0
    if lease_s <= 0:
        raise ConfigError(f"coordination_backend_url {shown}: timeout={raw!r} must be a "
                          f"positive whole number of seconds")
    if scheme in ETCD_SCHEMES and command_timeout_s is not None and lease_s < command_timeout_s:
        raise ConfigError(
            f"coordination_backend_url {shown}: the lease (timeout={lease_s} s) is shorter "
            f"than the backend command timeout ({command_timeout_s:g} s); a reservation must "
            f"outlive its command: set timeout={math.ceil(command_timeout_s)} or more")
    return CoordinationSettings(
        url=url, scheme=scheme, host=parts.hostname or "localhost", port=port or 2379,
        lease_s=lease_s, ca_cert=options.get("ca_cert"), cert_key=options.get("cert_key"),
        cert_cert=options.get("cert_cert"))


def redact_text(text: str, url: str) -> str:
    """``text`` (a library's error) with ``url``'s secrets taken out wherever they appear."""
    parts = urlsplit(url)
    secrets = [parts.password, parts.username if parts.password else None]
    secrets += [v for k, v in parse_qsl(parts.query)
                if any(word in k.lower() for word in _SECRET_PARAMS)]
    for secret in filter(None, secrets):
        text = text.replace(secret, "***")
    return text


