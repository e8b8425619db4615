"""Creates per second and per-create time with 1, 3, 6 hosts: etcd (tooz) vs the file lock.

Each host is a process creating into one shared backend file far from the cap
(no backend delay: the time is the lock, the fresh read and the append). With
the file lock all hosts share one lock_path (as processes on one machine do);
with etcd each has its own. Run: .venv/bin/python -m tests.benchmarks.coordination
"""

import multiprocessing
import sys
import tempfile
import time

from driver_kit import load_backend_config
from tests.etcd_server import run_etcd
from tests.unit.test_driver import FileDriver

CREATES_PER_HOST = 20
CTX = multiprocessing.get_context("fork")


def _host(workdir, index, url, barrier, queue):
    lock_path = f"{workdir}/locks-{index if url else 'shared'}"
    conf = load_backend_config(overrides={"lock_path": lock_path,
                                          "coordination_backend_url": url,
                                          "max_over_subscription_ratio": "100000"})
    driver = FileDriver(conf, f"{workdir}/vols")
    driver.create_volume(f"warm{index}", 1)  # connect before the clock starts
    barrier.wait()
    times = []
    for j in range(CREATES_PER_HOST):
        start = time.perf_counter()
        driver.create_volume(f"h{index}-{j}", 1)
        times.append(time.perf_counter() - start)
    queue.put(times)


def measure(hosts: int, url: str | None) -> tuple[float, float]:
    """(creates per second over all hosts, mean seconds per create)."""
    with tempfile.TemporaryDirectory() as workdir:
        open(f"{workdir}/vols", "w").close()
        barrier, queue = CTX.Barrier(hosts + 1), CTX.Queue()
        procs = [CTX.Process(target=_host, args=(workdir, i, url, barrier, queue))
                 for i in range(hosts)]
        for p in procs:
            p.start()
        barrier.wait()
        start = time.perf_counter()
        times = [t for _ in procs for t in queue.get(timeout=60)]
        elapsed = time.perf_counter() - start
        for p in procs:
            p.join()
    return len(times) / elapsed, sum(times) / len(times)


def main() -> None:
    rows = ["| hosts | lock | creates/s | mean ms per create (lock wait included) |",
            "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as data, run_etcd(data) as (client, _):
        for hosts in (1, 3, 6):
            for name, url in (("file lock", None), ("etcd", f"etcd3+{client}")):
                rate, mean_s = measure(hosts, url)
                rows.append(f"| {hosts} | {name} | {rate:.0f} | {mean_s * 1000:.1f} |")
    sys.stdout.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
