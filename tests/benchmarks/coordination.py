"""Creates per second and per-create latency across hosts: the old etcd lock vs reservations.

Each host is a process creating 1 GiB volumes into one shared backend file far
from the cap, for a fixed time, with a simulated backend command of 0, 50 or
200 ms (a sleep, as a slow array or an lvcreate takes). "lock" is the admission
lock held across the command (a tooz lock on etcd, as before reservations);
"reservations" commits a reservation by compare-and-swap and runs the command
outside any lock. Both on one real etcd 3.4 on loopback, each host its own
lock_path. Run: .venv/bin/python -m tests.benchmarks.coordination
(``--hosts 1,3,6,12 --delays-ms 0,50,200 --seconds 4``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time

from driver_kit import load_backend_config
from driver_kit.admission import AdmissionGate
from driver_kit.coordination import stop_coordinators
from tests.etcd_server import run_etcd
from tests.unit.test_driver import FileDriver

CTX = multiprocessing.get_context("fork")
MODES = ("lock", "reservations")


class CommandDriver(FileDriver):
    """The shared-file backend with a create that takes ``command_s``."""

    command_s = 0.0

    def backend_create_volume(self, name, size_gb, *, pool_name, thin):
        time.sleep(self.command_s)
        super().backend_create_volume(name, size_gb, pool_name=pool_name, thin=thin)


def _host(workdir, index, url, mode, command_s, seconds, barrier, queue):
    conf = load_backend_config(overrides={"lock_path": f"{workdir}/locks-{index}",
                                          "coordination_backend_url": url,
                                          "max_over_subscription_ratio": "100000"})
    driver = CommandDriver(conf, f"{workdir}/vols")
    if mode == "lock":  # the admission lock on etcd held across the command, as before
        driver._reservations = None
        driver._gate = AdmissionGate(conf.lock_path, coordination_url=url)
    driver.create_volume(f"warm{index}", 1)  # connect (and settle a new group) first
    driver.command_s = command_s
    barrier.wait()
    start = time.monotonic()
    stop, times, j = start + seconds, [], 0
    while time.monotonic() < stop:
        began = time.monotonic()
        driver.create_volume(f"h{index}-{j}", 1)
        times.append(time.monotonic() - began)
        j += 1
    queue.put((times, time.monotonic() - start))
    stop_coordinators(timeout_s=2)


def measure(hosts: int, url: str, mode: str, command_s: float, seconds: float
            ) -> tuple[float, float, float]:
    """(creates per second over all hosts, p50 ms, p99 ms)."""
    with tempfile.TemporaryDirectory() as workdir:
        open(f"{workdir}/vols", "w").close()
        barrier, queue = CTX.Barrier(hosts), CTX.Queue()
        procs = [CTX.Process(target=_host, daemon=True, args=(
            workdir, i, url, mode, command_s, seconds, barrier, queue)) for i in range(hosts)]
        for p in procs:
            p.start()
        try:
            results = [queue.get(timeout=seconds + 120) for _ in procs]
        finally:
            for p in procs:
                p.join(10)
                if p.is_alive():
                    p.kill()
                    p.join(5)
    times = sorted(t for host_times, _ in results for t in host_times)
    elapsed = max(e for _, e in results)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return len(times) / elapsed, statistics.median(times) * 1000, p99 * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,3,6,12")
    parser.add_argument("--delays-ms", default="0,50,200")
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args(argv)
    hosts_list = [int(h) for h in args.hosts.split(",")]
    rows = ["| command ms | hosts | lock: creates/s | lock: p50 / p99 ms "
            "| reservations: creates/s | reservations: p50 / p99 ms |",
            "|---|---|---|---|---|---|"]
    rates: dict[tuple[int, int, str], float] = {}
    with tempfile.TemporaryDirectory() as data, run_etcd(data) as (client, _):
        url = f"etcd3+{client}/?timeout=5"
        for delay_ms in (int(d) for d in args.delays_ms.split(",")):
            for hosts in hosts_list:
                cells = []
                for mode in MODES:
                    rate, p50, p99 = measure(hosts, url, mode, delay_ms / 1000, args.seconds)
                    rates[delay_ms, hosts, mode] = rate
                    cells += [f"{rate:.1f}", f"{p50:.0f} / {p99:.0f}"]
                rows.append(f"| {delay_ms} | {hosts} | " + " | ".join(cells) + " |")
                sys.stderr.write(rows[-1] + "\n")
    lines = rows + [""]
    for delay_ms in (int(d) for d in args.delays_ms.split(",")):
        for mode in MODES:
            one = rates.get((delay_ms, hosts_list[0], mode))
            if one:
                growth = ", ".join(f"{h} hosts {rates[delay_ms, h, mode] / one:.1f}x"
                                   for h in hosts_list[1:])
                lines.append(f"- {delay_ms} ms command, {mode}: against {hosts_list[0]} "
                             f"host: {growth}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
