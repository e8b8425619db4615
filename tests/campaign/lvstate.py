"""The volume group as LVM itself has it, read without the driver.

On the simulator: its JSON state file, read directly (the simulator replaces
it atomically, so any read is one consistent state). On real LVM: one ``lvs``
with the fields the campaign needs, parsed here, not by the driver's parser.
"""

from __future__ import annotations

import json
from typing import Any

from lvm_driver.run.executor import LVMExecutor

from tests.campaign.audit import lv_map, vg_totals

#: what ``lvs`` reports for the campaign (uuid included: names can come back)
_FIELDS = "lv_name,lv_uuid,lv_size,lv_attr,pool_lv,origin,lv_tags"


def read_sim(state_file: str, vg: str, pool: str) -> tuple[dict[str, dict], dict[str, int]]:
    """LVs by uuid and the VG's totals, from the simulator's state file."""
    with open(state_file, encoding="utf-8") as handle:
        state = json.load(handle)
    return lv_map(state, vg), vg_totals(state, vg, pool)


def _kind(attr: str) -> str:
    if attr.startswith("t"):
        return "thin-pool"
    if attr.startswith("V"):
        return "thin"
    if attr.startswith("-"):
        return "linear"
    return "other"


def read_real(executor: LVMExecutor, vg: str) -> dict[str, dict[str, Any]]:
    """LVs by uuid from real LVM (hidden LVs left out)."""
    result = executor.run(["lvs", "--reportformat", "json", "--units", "b", "--nosuffix",
                           "-o", _FIELDS, vg], readonly=True)
    rows = json.loads(result.stdout)["report"][0]["lv"]
    return {row["lv_uuid"]: {"name": row["lv_name"], "kind": _kind(row["lv_attr"]),
                             "bytes": int(row["lv_size"]),
                             "tags": [t for t in row["lv_tags"].split(",") if t],
                             "origin": row["origin"] or None, "pool": row["pool_lv"] or None}
            for row in rows if not row["lv_name"].startswith("[")}
