"""The shape of a simulator state read from its file: every field the commands use
has the type they expect, so a hand-edited or damaged file fails each command with
one line naming the field (as LVM fails on metadata it cannot parse), never with a
``TypeError`` deep inside a command.
"""

from __future__ import annotations

from typing import Any

__all__ = ["shape_problem"]

_COUNTS = frozenset({"extents", "extent_size", "extent_count", "pmspare_extents", "seqno",
                     "size", "metadata_extents", "chunk_bytes", "next_chunk", "next_tree",
                     "tree"})
_POSITIVE = frozenset({"extent_size", "chunk_bytes"})
_FLAGS = frozenset({"active", "skip", "zero", "open"})
_TEXTS = frozenset({"name", "uuid", "kind"})
_TEXTS_OR_NONE = frozenset({"pool", "origin", "vg", "snapshot_name"})
_TEXT_LISTS = frozenset({"pvs", "refs", "tags"})


def _field_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be field ``name`` (None: it can, or the field is not judged)."""
    if name in _COUNTS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return "a whole number >= 0"
        if name in _POSITIVE and value == 0:
            return "a whole number > 0"
    elif name in _FLAGS and not isinstance(value, bool):
        return "true or false"
    elif name in _TEXTS and not isinstance(value, str):
        return "text"
    elif name in _TEXTS_OR_NONE and value is not None and not isinstance(value, str):
        return "text or null"
    elif name in _TEXT_LISTS and not (isinstance(value, list) and
                                      all(isinstance(item, str) for item in value)):
        return "a list of text"
    elif name == "lvs" and not isinstance(value, dict):
        return "an object"
    elif name == "chunks" and not (isinstance(value, dict) and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0
            for n in value.values())):
        return "an object of whole numbers >= 0"
    elif name == "data" and not (isinstance(value, list) and all(
            isinstance(pair, list) and len(pair) == 2 and
            all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in pair)
            for pair in value)):
        return "a list of [start, end] byte pairs"
    return None


#: the fields every record of a kind must have (LVs by their ``kind``)
_REQUIRED = {
    "pv": ("size", "uuid"),
    "vg": ("name", "uuid", "extent_size", "extent_count", "pvs", "lvs", "pmspare_extents",
           "seqno"),
    "linear": ("kind", "uuid", "extents", "active", "skip", "tags"),
    "thin-pool": ("kind", "uuid", "extents", "active", "skip", "tags", "metadata_extents",
                  "chunk_bytes", "zero", "chunks", "next_chunk"),
    "thin": ("kind", "uuid", "extents", "active", "skip", "tags", "pool", "refs", "tree"),
    "cow": ("kind", "uuid", "extents", "active", "skip", "tags", "origin"),
}


def _record_problem(path: str, record: Any, kind: str) -> str | None:
    if not isinstance(record, dict):
        return f"{path} is {record!r:.60}, not an object"
    if kind == "lv":
        kind = record.get("kind")
        if not isinstance(kind, str) or kind not in _REQUIRED or kind in ("pv", "vg"):
            return f"{path}.kind is {kind!r:.60}, not one of linear, thin-pool, thin, cow"
    missing = [name for name in _REQUIRED[kind] if name not in record]
    if missing:
        return f"{path} lacks {', '.join(missing)}"
    for name, value in record.items():
        must = _field_problem(name, value)
        if must is not None:
            return f"{path}.{name} is {value!r:.60}, not {must}"
    return None


def _link_problem(path: str, lv: dict[str, Any], lvs: dict[str, Any]) -> str | None:
    """A thin LV's pool must be a thin pool of the VG, an origin an LV of the VG."""
    if lv["kind"] == "thin":
        pool = lvs.get(lv["pool"])
        if not isinstance(pool, dict) or pool.get("kind") != "thin-pool":
            return f"{path}.pool is {lv['pool']!r:.60}, not a thin pool of the VG"
        unknown = [ref for ref in lv["refs"] if ref not in pool["chunks"]]
        if unknown:
            return f"{path}.refs holds {unknown[0]!r:.60}, not a tree of its pool"
    origin = lv.get("origin")
    if origin is not None and origin not in lvs and lv["kind"] == "cow":
        return f"{path}.origin is {origin!r:.60}, not an LV of the VG"
    return None


def shape_problem(state: dict[str, Any]) -> str | None:
    """The first field of ``state`` (a parsed state file) whose type the commands
    cannot use, in words; None when every judged field is fine."""
    for pv_path, pv in state["pvs"].items():
        if problem := _record_problem(f"pvs[{pv_path!r}]", pv, "pv"):
            return problem
    for vg_name, vg in state["vgs"].items():
        if problem := _record_problem(f"vgs.{vg_name}", vg, "vg"):
            return problem
        strangers = [pv for pv in vg["pvs"] if pv not in state["pvs"]]
        if strangers:
            return f"vgs.{vg_name}.pvs holds {strangers[0]!r:.60}, not a PV of the state"
        for lv_name, lv in vg["lvs"].items():
            path = f"vgs.{vg_name}.lvs.{lv_name}"
            if problem := _record_problem(path, lv, "lv") or \
                    _link_problem(path, lv, vg["lvs"]):
                return problem
    for index, fault in enumerate(state["faults"]):
        if not isinstance(fault, dict):
            return f"faults[{index}] is {fault!r:.60}, not an object"
    return None
