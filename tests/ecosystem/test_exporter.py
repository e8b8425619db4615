"""The Prometheus exporter, scraped over HTTP on loopback and read with
prometheus-client's own parser."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from driver_kit import load_backend_config
from driver_kit.exporter import DriverCollector, ExporterServer, make_registry, serve
from tests.ecosystem.support import REPO, SimBackend, make_backend
from tests.unit.memdriver import MemoryDriver

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return parse(text)


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def lvm(tmp_path: Path) -> SimBackend:
    backend = make_backend(tmp_path, "lvm-x", vg_gb=12, pool_gb=8,
                           max_over_subscription_ratio="3.0", reserved_percentage=5,
                           lvm_offer_thick=True)
    backend.driver.create_volume("v1", 5)
    backend.write("v1", 2)
    return backend


@pytest.fixture
def exporter(lvm: SimBackend) -> Iterator[ExporterServer]:
    server = serve(lvm.driver, port=0)
    try:
        yield server
    finally:
        server.close()


def test_every_pool_figure_and_capacity_factor_is_a_gauge(
        lvm: SimBackend, exporter: ExporterServer) -> None:
    samples = scrape(exporter.url)
    stats = lvm.driver.get_volume_stats(refresh=True)
    assert len(stats["pools"]) == 2
    for pool in stats["pools"]:
        labels = {"backend": "lvm-x", "pool": pool["pool_name"]}
        assert value(samples, "driver_kit_pool_up", **labels) == 1.0
        for key in ("total_capacity_gb", "free_capacity_gb", "provisioned_capacity_gb",
                    "total_used_capacity_gb", "snapshot_capacity_gb", "max_volume_size_gb",
                    "reserved_percentage", "max_over_subscription_ratio", "total_volumes"):
            assert value(samples, f"driver_kit_pool_{key}", **labels) == pool[key], key
        for factors in pool["capacity_factors"]:
            kind = {"provisioned_type": factors["provisioned_type"]}
            for key, figure in factors.items():
                if key == "provisioned_type" or figure is None:
                    continue
                suffix = key if key.endswith(("_percent", "_ratio")) else f"{key}_gb"
                assert value(samples, f"driver_kit_capacity_{suffix}", **labels,
                             **kind) == figure, key
    thin = {"backend": "lvm-x", "pool": "lvmxpool"}
    assert value(samples, "driver_kit_capacity_provisioned_ratio", **thin,
                 provisioned_type="thin") == stats["pools"][0]["capacity_factors"][0][
                     "provisioned_ratio"]
    assert value(samples, "driver_kit_pool_data_percent", **thin) > 0
    assert value(samples, "driver_kit_pool_metadata_percent", **thin) >= 0
    # the thick pool has no data or metadata usage of its own
    assert ("driver_kit_pool_data_percent",
            (("backend", "lvm-x"), ("pool", "lvmxvg"))) not in samples


def test_each_scrape_reads_the_backend_afresh(lvm: SimBackend,
                                             exporter: ExporterServer) -> None:
    before = scrape(exporter.url)
    lvm.driver.create_volume("v2", 7)
    after = scrape(exporter.url)
    pool = {"backend": "lvm-x", "pool": "lvmxpool"}
    assert value(before, "driver_kit_pool_provisioned_capacity_gb", **pool) == 5.0
    assert value(after, "driver_kit_pool_provisioned_capacity_gb", **pool) == 12.0
    stamp = value(after, "driver_kit_stats_last_refresh_timestamp_seconds", backend="lvm-x")
    assert abs(stamp - time.time()) < 60
    assert stamp >= value(before, "driver_kit_stats_last_refresh_timestamp_seconds",
                          backend="lvm-x")
    duration = value(after, "driver_kit_stats_refresh_duration_seconds", backend="lvm-x")
    assert 0 < duration < 30
    assert value(after, "driver_kit_stats_refresh_success", backend="lvm-x") == 1.0


def test_listens_on_loopback_only_and_stops(lvm: SimBackend) -> None:
    server = serve(lvm.driver, port=0)
    url = server.url
    assert server.server.server_address[0] == "127.0.0.1"
    assert url.startswith("http://127.0.0.1:")
    scrape(url)
    server.close()
    server.close()  # idempotent
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


def test_min_refresh_interval_reuses_one_read(lvm: SimBackend) -> None:
    now = [1000.0]
    collector = DriverCollector(lvm.driver, min_refresh_interval_s=30,
                                clock=lambda: now[0])
    first = {m.name: m for m in collector.collect()}
    lvm.driver.create_volume("v3", 1)
    now[0] += 10
    cached = {m.name: m for m in collector.collect()}
    now[0] += 30
    fresh = {m.name: m for m in collector.collect()}

    def provisioned(metrics: dict[str, Any]) -> float:
        family = metrics["driver_kit_pool_provisioned_capacity_gb"]
        return next(s.value for s in family.samples if s.labels["pool"] == "lvmxpool")

    assert provisioned(first) == provisioned(cached) == 5.0
    assert provisioned(fresh) == 6.0


def test_a_down_pool_is_up_zero_with_no_capacity(tmp_path: Path) -> None:
    driver = MemoryDriver(load_backend_config(overrides={"lock_path": str(tmp_path)}))
    registry = make_registry(driver)
    samples = parse(generate_latest(registry).decode())
    assert value(samples, "driver_kit_pool_up", backend="default", pool="mem") == 1.0
    driver.broken = True
    samples = parse(generate_latest(registry).decode())
    assert value(samples, "driver_kit_pool_up", backend="default", pool="mem") == 0.0
    assert value(samples, "driver_kit_pool_total_capacity_gb", backend="default",
                 pool="mem") == 0.0
    assert value(samples, "driver_kit_pool_free_capacity_gb", backend="default",
                 pool="mem") == 0.0


def test_a_failed_refresh_says_so_and_reports_no_stale_figures(tmp_path: Path) -> None:
    class Failing(MemoryDriver):
        fail = False

        def get_volume_stats(self, refresh: bool = False) -> dict[str, Any]:
            if self.fail:
                raise RuntimeError("stats crashed")
            return super().get_volume_stats(refresh)

    driver = Failing(load_backend_config(overrides={"lock_path": str(tmp_path)}))
    registry = make_registry(driver)
    parse(generate_latest(registry).decode())
    driver.fail = True
    samples = parse(generate_latest(registry).decode())
    assert value(samples, "driver_kit_stats_refresh_success", backend="default") == 0.0
    assert value(samples, "driver_kit_pool_up", backend="default", pool="mem") == 0.0
    assert not any(name == "driver_kit_pool_free_capacity_gb" for name, _ in samples)


@pytest.mark.parametrize("interval", [math.nan, math.inf, -1.0, -math.inf, "5", None, True])
def test_a_refresh_interval_must_be_finite_and_not_negative(lvm: SimBackend,
                                                            interval: Any) -> None:
    with pytest.raises(ValueError, match="min_refresh_interval_s must be a finite number"):
        DriverCollector(lvm.driver, min_refresh_interval_s=interval)


#: starts the command as a non-interactive shell starts a background job (``&``):
#: with SIGINT ignored, which the exec'd program inherits
_SIGINT_IGNORED = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                   "os.execv(sys.executable, [sys.executable] + sys.argv[1:])")


@pytest.mark.parametrize("stop, sigint_ignored", [
    pytest.param(signal.SIGINT, False, id="SIGINT"),
    pytest.param(signal.SIGINT, True, id="SIGINT-started-ignored"),
    pytest.param(signal.SIGTERM, True, id="SIGTERM")])
def test_driver_kit_exporter_command_stops_on_a_signal(tmp_path: Path, stop: int,
                                                       sigint_ignored: bool) -> None:
    conf = tmp_path / "kit.conf"
    conf.write_text(f"""[DEFAULT]
enabled_backends = sim

[sim]
volume_driver = lvm_driver.driver.ThinLVMDriver
lvm_backend = simulator
lvm_simulator_state_file = {tmp_path / 'sim.json'}
volume_group = dkvg
lvm_thin_pool_name = pool
lock_path = {tmp_path / 'locks'}
""")
    command = [sys.executable, "-m", "driver_kit.cli", "--config-file", str(conf), "exporter",
               "--port", "0", "--interval", "0.5"]
    if sigint_ignored:
        command = [sys.executable, "-c", _SIGINT_IGNORED, *command[1:]]
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("serving http://127.0.0.1:"), proc.stderr.read()  # type: ignore
        url = line.split()[1]
        samples = scrape(url)
        assert value(samples, "driver_kit_pool_up", backend="sim", pool="pool") == 1.0
        assert math.isfinite(value(samples, "driver_kit_pool_total_capacity_gb",
                                   backend="sim", pool="pool"))
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr.read() == ""  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
