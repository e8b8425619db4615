"""Capacity notifications (Kilo over-subscription spec): provisioned capacity over
its limit and used capacity over its threshold, sent to a pluggable notifier."""

from __future__ import annotations

import json
import logging
import math
from typing import Any, Callable, Sequence

from driver_kit.config import BackendConfig
from driver_kit.stats import PoolStats

LOG = logging.getLogger("driver_kit.driver")  # where operators have always found them

Notifier = Callable[[str, dict[str, Any]], None]


def log_notifier(event_type: str, payload: dict[str, Any]) -> None:
    """Default notifier: one structured WARNING line per notification."""
    LOG.warning("capacity notification %s %s", event_type, json.dumps(payload, sort_keys=True))


def notify_capacity(conf: BackendConfig, pools: Sequence[PoolStats],
                    notifier: Notifier) -> None:
    """Send ``capacity.provisioned_over_limit`` / ``capacity.used_over_threshold`` for
    each pool that is up and past the configured warning levels."""
    for pool in pools:
        if pool.backend_state != "up" or pool.total_capacity_gb <= 0:
            continue
        payload = {"backend": conf.volume_backend_name, "pool_name": pool.pool_name,
                   "total_capacity_gb": pool.total_capacity_gb,
                   "free_capacity_gb": pool.free_capacity_gb,
                   "provisioned_capacity_gb": pool.provisioned_capacity_gb,
                   "total_used_capacity_gb": pool.total_used_capacity_gb,
                   "max_over_subscription_ratio": pool.max_over_subscription_ratio,
                   "reserved_percentage": pool.reserved_percentage}
        thin = [f for f in pool.capacity_factors if f["provisioned_type"] == "thin"]
        # the cap is the thin factors' (total - reserved) * ratio, as Cinder computes it
        limit = thin[0]["total_available_capacity"] * \
            conf.capacity_warning_provisioned_percent / 100 if thin else math.inf
        if pool.provisioned_capacity_gb > limit:
            notifier("capacity.provisioned_over_limit", dict(payload, limit_gb=round(limit, 2)))
        used_percent = pool.total_used_capacity_gb / pool.total_capacity_gb * 100
        if used_percent > conf.capacity_warning_used_percent:
            notifier("capacity.used_over_threshold",
                     dict(payload, used_percent=round(used_percent, 2),
                          threshold_percent=conf.capacity_warning_used_percent))
