"""Plain-text tables for terminals: the column formatter and the stats views.

Shared by the ``driver-kit`` command, the compliance report and the demo, so
that none of them imports another front end.
"""

from __future__ import annotations

from typing import Any, Sequence

from driver_kit import scheduler

__all__ = ["POOLS_HEADERS", "STATS_HEADERS", "format_columns", "pools_rows", "pools_table",
           "stats_rows", "stats_table"]


def format_columns(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """Left-aligned columns two spaces apart under dashed headers (None shows as "-")."""
    cells = [list(headers)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


STATS_HEADERS = ("pool", "state", "total GiB", "free GiB", "provisioned GiB",
                 "snapshots GiB", "ratio", "reserved %", "largest new GiB", "volumes",
                 "data %", "meta %")
POOLS_HEADERS = ("pool", "type", "total", "free", "reserved", "available", "provisioned",
                 "virtual free", "free %", "prov. ratio", "ratio")


def stats_rows(stats: dict[str, Any]) -> list[list[Any]]:
    """One row per pool of a stats report, in ``STATS_HEADERS`` order."""
    return [[p["pool_name"], p.get("backend_state"), p["total_capacity_gb"],
             p["free_capacity_gb"], p["provisioned_capacity_gb"],
             p.get("snapshot_capacity_gb"), p["max_over_subscription_ratio"],
             p["reserved_percentage"], p.get("max_volume_size_gb"), p["total_volumes"],
             p.get("data_percent"), p.get("metadata_percent")] for p in stats["pools"]]


def stats_table(stats: dict[str, Any]) -> str:
    """The pools of a stats report as a table an operator reads at a glance."""
    text = format_columns(stats_rows(stats), STATS_HEADERS)
    reasons = [f"{p['pool_name']}: {p['down_reason']}" for p in stats["pools"]
               if p.get("down_reason")]
    return text + "".join(f"\n  down: {r}" for r in reasons)


def pools_rows(stats: dict[str, Any]) -> list[list[Any]]:
    """The get-pools view, one row per pool and provisioning type (``POOLS_HEADERS``)."""
    rows = []
    for pool in scheduler.get_pools(stats):
        for f in pool["capacity_factors"]:
            rows.append([pool["name"], f["provisioned_type"], f["total_capacity"],
                         f["free_capacity"], f["reserved_capacity"],
                         f["total_available_capacity"], f["provisioned_capacity"],
                         f["virtual_free_capacity"], f["free_percent"],
                         f["provisioned_ratio"], f["max_over_subscription_ratio"]])
    return rows


def pools_table(stats: dict[str, Any]) -> str:
    """The get-pools view: capacity factors per provisioning type."""
    return format_columns(pools_rows(stats), POOLS_HEADERS)
