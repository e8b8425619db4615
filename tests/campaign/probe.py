"""A fresh process at the end of a campaign: each pool admits exactly its largest size.

``python -m tests.campaign.probe RUN_DIR`` prints one JSON object per pool:
the ``max_volume_size_gb`` its stats report, what a create of one GiB more
did (it must be refused: ``CapacityExceeded``) and what a create of exactly
that size did (it must succeed; the volume is deleted again). Its commands
are recorded like a worker's, so the cap rules apply to them too.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from driver_kit import CapacityExceeded, DriverKitError

from tests.campaign import audit
from tests.campaign.journal import Journal
from tests.campaign.worker import build_driver, load_config, set_up


def _attempt(driver: Any, name: str, size_gb: int, pool: str, thin: bool) -> str:
    """'admitted', 'refused' or the error's type and message; deletes what it made."""
    audit.set_current_op(f"probe-{name}")
    try:
        driver.create_volume(name, size_gb, pool_name=pool,
                             extra_specs={"provisioning:type": "thin" if thin else "thick"})
    except CapacityExceeded:
        return "refused"
    except DriverKitError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        audit.take_commands()
    try:
        driver.delete_volume(name)
    except DriverKitError as exc:
        return f"admitted, then its delete failed: {type(exc).__name__}: {exc}"
    finally:
        audit.set_current_op(None)
    return "admitted"


def probe(run_dir: str) -> list[dict[str, Any]]:
    cfg = load_config(run_dir)
    journal = Journal(os.path.join(run_dir, "probe.jsonl"))
    set_up(cfg, journal, "probe")
    driver = build_driver(cfg, journal, "probe", under_test=False)
    results = []
    for pool in driver.get_volume_stats(refresh=True)["pools"]:
        largest = pool.get("max_volume_size_gb")
        entry = {"pool": pool["pool_name"], "state": pool.get("backend_state"),
                 "max_volume_size_gb": largest}
        if isinstance(largest, int) and pool.get("backend_state") == "up":
            thin = bool(pool["thin_provisioning_support"])
            entry["one_more"] = _attempt(driver, f"probe-over-{pool['pool_name']}",
                                         largest + 1, pool["pool_name"], thin)
            if largest >= 1:
                entry["exact"] = _attempt(driver, f"probe-max-{pool['pool_name']}",
                                          largest, pool["pool_name"], thin)
        results.append(entry)
    return results


def main(argv: list[str]) -> int:
    print(json.dumps(probe(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
