"""Prometheus exporter: a driver's pools as gauges, read fresh on every scrape.

``DriverCollector`` is a prometheus-client custom collector. Each scrape calls
``get_volume_stats(refresh=True)`` (at most once per ``min_refresh_interval_s``;
concurrent scrapes share one refresh) and yields, per pool (labels ``backend``
and ``pool``):

* ``driver_kit_pool_up``: 1 when the pool can be read, 0 when it is reported down;
* the pool's capacities as reported (GiB, as in the stats dict):
  ``driver_kit_pool_{total,free,provisioned,total_used,snapshot}_capacity_gb``,
  ``driver_kit_pool_max_volume_size_gb``, ``..._reserved_percentage``,
  ``..._max_over_subscription_ratio``, ``..._total_volumes``;
* thin pools' ``driver_kit_pool_data_percent`` and ``..._metadata_percent``;
* every capacity factor (Zed spec) per provisioning type (label
  ``provisioned_type``): ``driver_kit_capacity_<factor>``, e.g.
  ``driver_kit_capacity_virtual_free_capacity_gb`` and
  ``driver_kit_capacity_provisioned_ratio``;

and per backend ``driver_kit_stats_last_refresh_timestamp_seconds``,
``driver_kit_stats_refresh_duration_seconds`` and
``driver_kit_stats_refresh_success``. Requires the ``exporter`` extra
(``pip install 'driver-kit[exporter]'``). ``serve_until_stopped`` runs a
server until SIGINT or SIGTERM, however the process was started.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterator

from prometheus_client import start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from driver_kit.stats import is_number

LOG = logging.getLogger(__name__)

__all__ = ["DriverCollector", "ExporterServer", "STOP_SIGNALS", "Stopped", "make_registry",
           "serve", "serve_until_stopped", "stop_on_signals"]

PREFIX: Final = "driver_kit"
# (stats key, help); the metric is driver_kit_pool_<stats key>
_POOL_GAUGES: Final = (
    ("total_capacity_gb", "Pool size in GiB (rounded down)."),
    ("free_capacity_gb", "Free space in GiB (rounded down)."),
    ("provisioned_capacity_gb",
     "Sum of the virtual sizes of all volumes in the pool, GiB (rounded up)."),
    ("total_used_capacity_gb", "Space physically used, GiB."),
    ("snapshot_capacity_gb", "Virtual size of snapshots, GiB."),
    ("max_volume_size_gb", "Largest whole-GiB volume admission would accept now."),
    ("reserved_percentage", "Reserved percentage of total."),
    ("max_over_subscription_ratio", "Effective max over-subscription ratio ('auto' resolved)."),
    ("total_volumes", "Volumes in the pool."),
    ("data_percent", "Thin pool data usage, percent."),
    ("metadata_percent", "Thin pool metadata usage, percent."),
)
# capacity factor keys; the metric is driver_kit_capacity_<key>, plus "_gb" for the
# capacities (units in the name, as the house style wants)
_FACTORS: Final = (
    "total_capacity", "free_capacity", "reserved_capacity",
    "total_reserved_available_capacity", "total_available_capacity", "provisioned_capacity",
    "calculated_free_capacity", "virtual_free_capacity", "free_percent", "provisioned_ratio",
    "max_over_subscription_ratio",
)


def _factor_suffix(key: str) -> str:
    return f"{key}_gb" if key.endswith("capacity") else key


class DriverCollector(Collector):
    """Collects one driver's stats per scrape (or per ``min_refresh_interval_s``)."""

    def __init__(self, driver: Any, *, min_refresh_interval_s: float = 0.0,
                 clock: Callable[[], float] = time.time) -> None:
        if not (is_number(min_refresh_interval_s) and math.isfinite(min_refresh_interval_s)
                and min_refresh_interval_s >= 0):  # NaN would freeze the figures for good
            raise ValueError(f"min_refresh_interval_s must be a finite number of seconds "
                             f">= 0, got {min_refresh_interval_s!r}")
        self.driver = driver
        self.min_refresh_interval_s = float(min_refresh_interval_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._stats: dict[str, Any] | None = None
        self._refreshed_at = 0.0
        self._duration_s = 0.0
        self._success = False

    def _refresh(self) -> tuple[dict[str, Any] | None, float, float, bool]:
        with self._lock:  # concurrent scrapes share one backend read
            now = self._clock()
            if self._stats is None or now - self._refreshed_at >= self.min_refresh_interval_s:
                started = time.monotonic()
                try:
                    self._stats = self.driver.get_volume_stats(refresh=True)
                    self._success = True
                except Exception:  # the scrape still answers: every pool down
                    LOG.exception("stats refresh failed")
                    self._success = False
                self._duration_s = time.monotonic() - started
                self._refreshed_at = now
            return self._stats, self._refreshed_at, self._duration_s, self._success

    def describe(self) -> list[Any]:
        """Nothing up front: registering must not read the backend."""
        return []

    def collect(self) -> Iterator[Any]:
        stats, refreshed_at, duration_s, success = self._refresh()
        conf = getattr(self.driver, "configuration", None)
        backend = str((stats or {}).get("volume_backend_name")
                      or getattr(conf, "volume_backend_name", None) or "unknown")
        pools = list((stats or {}).get("pools") or [])

        up = GaugeMetricFamily(f"{PREFIX}_pool_up", "1 when the pool can be read, 0 when "
                               "it is reported down (no capacity).",
                               labels=["backend", "pool"])
        gauges = {key: GaugeMetricFamily(f"{PREFIX}_pool_{key}", text,
                                         labels=["backend", "pool"])
                  for key, text in _POOL_GAUGES}
        factors = {key: GaugeMetricFamily(
            f"{PREFIX}_capacity_{_factor_suffix(key)}",
            f"Capacity factor {key} of the pool for one provisioning type (Zed spec).",
            labels=["backend", "pool", "provisioned_type"])
            for key in _FACTORS}
        for pool in pools:
            name = str(pool.get("pool_name"))
            is_up = success and pool.get("backend_state", "up") == "up"
            up.add_metric([backend, name], 1.0 if is_up else 0.0)
            if not success:
                continue  # a failed refresh: the last figures are stale, say nothing
            for key, gauge in gauges.items():
                if is_number(pool.get(key)):
                    gauge.add_metric([backend, name], float(pool[key]))
            for entry in pool.get("capacity_factors") or []:
                kind = str(entry.get("provisioned_type"))
                for key, gauge in factors.items():
                    if is_number(entry.get(key)):
                        gauge.add_metric([backend, name, kind], float(entry[key]))
        yield up
        yield from gauges.values()
        yield from factors.values()

        for suffix, text, value in (
                ("stats_refresh_success", "1 when the last stats refresh returned a report.",
                 1.0 if success else 0.0),
                ("stats_last_refresh_timestamp_seconds", "Unix time of the last stats "
                 "refresh.", refreshed_at),
                ("stats_refresh_duration_seconds", "Seconds the last stats refresh took.",
                 duration_s)):
            family = GaugeMetricFamily(f"{PREFIX}_{suffix}", text, labels=["backend"])
            family.add_metric([backend], value)
            yield family


def make_registry(driver: Any, *, min_refresh_interval_s: float = 0.0) -> CollectorRegistry:
    """A registry of its own holding one ``DriverCollector`` (never the global one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DriverCollector(driver, min_refresh_interval_s=min_refresh_interval_s))
    return registry


@dataclass
class ExporterServer:
    """A running exporter: where it listens, and how to stop it."""

    addr: str
    port: int
    server: Any
    thread: Any

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and free the port (idempotent)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.thread is not None:
            self.thread.join(timeout=5)
            self.thread = None


def serve(driver: Any, *, port: int, addr: str = "127.0.0.1",
          min_refresh_interval_s: float = 0.0) -> ExporterServer:
    """Serve ``/metrics`` for ``driver`` on ``addr:port`` (port 0: any free port).

    Binds to loopback unless told otherwise: the figures describe the storage
    backend, so exposing them is the operator's choice.
    """
    registry = make_registry(driver, min_refresh_interval_s=min_refresh_interval_s)
    started = start_http_server(port, addr=addr, registry=registry)
    if started is None:  # prometheus-client < 0.20 does not hand the server back
        return ExporterServer(addr=addr, port=port, server=None, thread=None)
    server, thread = started
    return ExporterServer(addr=addr, port=int(server.server_address[1]), server=server,
                          thread=thread)


#: the signals that stop ``serve_until_stopped``
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class Stopped(Exception):
    """A stop signal arrived; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals(signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within the block, each of ``signals`` raises ``Stopped`` in the main thread.

    The handlers are installed explicitly, whatever the process inherited: a
    non-interactive shell starts a background job (``&``) with SIGINT
    ignored, and Python then raises no KeyboardInterrupt. The previous
    handlers come back afterwards.
    """
    def stop(signum: int, frame: Any) -> None:
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve_until_stopped(server: ExporterServer,
                        ready: Callable[[], None] = lambda: None) -> int:
    """Keep ``server`` running until SIGINT or SIGTERM, then close it.

    ``ready`` runs once the handlers are in place (to announce the URL, so
    that whoever reads it may signal at once). Returns the signal's number.
    Main thread only, as Python runs signal handlers there.
    """
    try:
        with stop_on_signals():
            ready()
            while True:
                time.sleep(3600)
    except Stopped as stop:
        return stop.signum
    finally:
        server.close()
