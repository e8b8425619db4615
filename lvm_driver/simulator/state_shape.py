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
_LISTS = frozenset({"pvs", "refs"})
_MAPS = frozenset({"lvs", "chunks"})


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
    elif name in _LISTS and not isinstance(value, list):
        return "a list"
    elif name in _MAPS and not isinstance(value, dict):
        return "an object"
    elif name == "tags" and not (isinstance(value, list) and
                                 all(isinstance(tag, str) for tag in value)):
        return "a list of text"
    return None


def _record_problem(path: str, record: Any) -> str | None:
    if not isinstance(record, dict):
        return f"{path} is {record!r:.60}, not an object"
    for name, value in record.items():
        must = _field_problem(name, value)
        if must is not None:
            return f"{path}.{name} is {value!r:.60}, not {must}"
    return None


def shape_problem(state: dict[str, Any]) -> str | None:
    """The first field of ``state`` (a parsed state file) whose type the commands
    cannot use, in words; None when every judged field is fine."""
    for pv_path, pv in state["pvs"].items():
        if problem := _record_problem(f"pvs[{pv_path!r}]", pv):
            return problem
    for vg_name, vg in state["vgs"].items():
        if problem := _record_problem(f"vgs.{vg_name}", vg):
            return problem
        for lv_name, lv in vg.get("lvs", {}).items():
            if problem := _record_problem(f"vgs.{vg_name}.lvs.{lv_name}", lv):
                return problem
    for index, fault in enumerate(state["faults"]):
        if not isinstance(fault, dict):
            return f"faults[{index}] is {fault!r:.60}, not an object"
    return None
