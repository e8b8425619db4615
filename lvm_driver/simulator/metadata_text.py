"""A simulated VG as LVM2 text metadata, as LVM writes it into a PV's metadata area.

One statement a line, tab-indented, the layout of lvm2's lib/format_text/export.c:
the VG's PVs (extents counted as ``vgcreate`` counts them), then its LVs: linear
LVs, thin pools with their hidden ``_tdata``/``_tmeta`` LVs and the metadata
spare, thin volumes and thin snapshots, COW snapshots (the store under the name
``lvs`` lists, not VISIBLE, and the VISIBLE ``snapshotN`` LV that joins it to its
origin, which ``lvs`` never lists). PV extents are handed out in order, PV
after PV (a segment per PV an LV runs over). The driver's ``vg_metadata`` reads
the simulator's PVs through this text exactly as it reads a disk's.
"""

from __future__ import annotations

import hashlib

import json
from collections.abc import Iterator
from typing import Any, Final

from lvm_driver.simulator.cow import COW_CHUNK_SECTORS
from lvm_driver.simulator.sizes import PV_METADATA_BYTES, SECTOR

__all__ = ["label_uuid", "metadata_text"]

_CREATION_HOST: Final = "driver-kit-simulator"


def label_uuid(pv_uuid: str) -> str:
    """The 32 characters of a PV's UUID as its label holds them (no dashes)."""
    return pv_uuid.replace("-", "")[:32].ljust(32, "0")


def _dashed(raw: str) -> str:
    parts, start = [], 0
    for length in (6, 4, 4, 4, 4, 4, 6):
        parts.append(raw[start:start + length])
        start += length
    return "-".join(parts)


def _quoted(value: str) -> str:
    return json.dumps(value)  # LVM names and tags need no escape beyond JSON's


def _strings(values: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(_quoted(value) for value in values) + "]"


class _Extents:
    """PV extents handed out in order, PV after PV."""

    def __init__(self, pvs: list[tuple[str, int]]):
        self._pvs = pvs
        self._index = 0
        self._used = 0

    def take(self, count: int) -> Iterator[tuple[str, int, int]]:
        """(PV name, first extent, extents) pieces making up ``count`` extents."""
        while count > 0 and self._index < len(self._pvs):
            name, total = self._pvs[self._index]
            piece = min(count, total - self._used)
            if piece > 0:
                yield name, self._used, piece
                self._used += piece
                count -= piece
            if self._used >= total:
                self._index += 1
                self._used = 0


def _lv(name: str, uuid: str, *, status: tuple[str, ...], flags: tuple[str, ...] = (),
        tags: list[str] | tuple[str, ...] = (), segments: list[list[str]]) -> list[str]:
    lines = [f"{name} {{", f'id = "{uuid}"', f"status = {_strings(status)}",
             f"flags = {_strings(flags)}"]
    if tags:
        lines.append(f"tags = {_strings(tags)}")
    lines += ["creation_time = 1700000000", f'creation_host = "{_CREATION_HOST}"',
              f"segment_count = {len(segments)}"]
    for index, body in enumerate(segments, 1):
        lines += [f"segment{index} {{", *body, "}"]
    return lines + ["}"]


def _striped(extents: _Extents, count: int) -> list[list[str]]:
    segments, start = [], 0
    for pv, first, piece in extents.take(count):
        segments.append([f"start_extent = {start}", f"extent_count = {piece}",
                         'type = "striped"', "stripe_count = 1", "stripes = [",
                         f'"{pv}", {first}', "]"])
        start += piece
    return segments


def _uuid_for(vg: dict[str, Any], name: str) -> str:
    # from a hash of the VG's id and the name: each LV its own id, as LVM gives it
    seed = label_uuid(vg.get("uuid", "")) + name
    return _dashed(hashlib.sha256(seed.encode()).hexdigest()[:32])


def metadata_text(vg: dict[str, Any], pvs: dict[str, dict[str, Any]]) -> str:
    """The metadata text of simulated VG ``vg`` (``pvs``: the state's PVs by path)."""
    extent = vg["extent_size"]
    pv_list = [(f"pv{index}", path, pvs[path]) for index, path in enumerate(vg["pvs"])]
    counts = [(name, (pv["size"] - PV_METADATA_BYTES) // extent) for name, _, pv in pv_list]
    extents = _Extents(counts)
    out = [f"{vg['name']} {{", f'id = "{vg.get("uuid", "")}"', f"seqno = {vg['seqno']}",
           'format = "lvm2"', 'status = ["RESIZEABLE", "READ", "WRITE"]', "flags = []",
           f"extent_size = {extent // SECTOR}", "max_lv = 0", "max_pv = 0",
           "metadata_copies = 0", "", "physical_volumes {"]
    for (name, path, pv), (_, pe_count) in zip(pv_list, counts):
        out += [f"{name} {{", f'id = "{_dashed(label_uuid(pv.get("uuid", "")))}"',
                f"device = {_quoted(path)}", 'status = ["ALLOCATABLE"]', "flags = []",
                f"dev_size = {pv['size'] // SECTOR}",
                f"pe_start = {PV_METADATA_BYTES // SECTOR}", f"pe_count = {pe_count}", "}"]
    out += ["}", "", "logical_volumes {"]
    rw = ("READ", "WRITE")
    hidden: list[str] = []
    snapshots: list[str] = []  # each COW snapshot's own LV, written after the hidden ones
    for name, lv in vg["lvs"].items():
        flags = ("ACTIVATION_SKIP",) if lv.get("skip") else ()
        common = {"flags": flags, "tags": lv.get("tags", ())}
        if lv["kind"] == "linear":
            out += _lv(name, lv["uuid"], status=rw + ("VISIBLE",),
                       segments=_striped(extents, lv["extents"]), **common)
        elif lv["kind"] == "cow":  # the store, under the name lvs lists; never VISIBLE
            out += _lv(name, lv["uuid"], status=rw, segments=_striped(extents, lv["extents"]),
                       **common)
            snapshots += _lv(lv["snapshot_name"], _uuid_for(vg, lv["snapshot_name"]),
                             status=rw + ("VISIBLE",), segments=[[
                                 "start_extent = 0",
                                 f"extent_count = {vg['lvs'][lv['origin']]['extents']}",
                                 'type = "snapshot"', f"chunk_size = {COW_CHUNK_SECTORS}",
                                 f'origin = "{lv["origin"]}"', f'cow_store = "{name}"']])
        elif lv["kind"] == "thin-pool":
            out += _lv(name, lv["uuid"], status=rw + ("VISIBLE",), segments=[[
                "start_extent = 0", f"extent_count = {lv['extents']}", 'type = "thin-pool"',
                f'metadata = "{name}_tmeta"', f'pool = "{name}_tdata"',
                "transaction_id = 0", f"chunk_size = {lv.get('chunk_bytes', 65536) // SECTOR}",
                'discards = "passdown"', f"zero_new_blocks = {1 if lv.get('zero') else 0}"]],
                **common)
            for suffix, count in (("_tdata", lv["extents"]), ("_tmeta", lv["metadata_extents"])):
                hidden += _lv(name + suffix, _uuid_for(vg, name + suffix), status=rw,
                              segments=_striped(extents, count))
        else:  # a thin volume or thin snapshot
            origin = [f'origin = "{lv["origin"]}"'] if lv.get("origin") else []
            out += _lv(name, lv["uuid"], status=rw + ("VISIBLE",), segments=[[
                "start_extent = 0", f"extent_count = {lv['extents']}", 'type = "thin"',
                f'thin_pool = "{lv["pool"]}"', "transaction_id = 0",
                f"device_id = {lv.get('tree', 1)}", *origin]], **common)
    if vg.get("pmspare_extents"):
        hidden += _lv("lvol0_pmspare", _uuid_for(vg, "lvol0_pmspare"), status=rw,
                      segments=_striped(extents, vg["pmspare_extents"]))
    out += hidden + snapshots + ["}", "}", f'# Generated by the LVM simulator', "",
                     'contents = "Text Format Volume Group"', "version = 1", "",
                     'description = ""', "", f'creation_host = "{_CREATION_HOST}"',
                     "creation_time = 1700000000", ""]
    return _indent(out)


def _indent(lines: list[str]) -> str:
    """Tab-indent each line by its depth of braces, as LVM does."""
    depth, indented = 0, []
    for line in lines:
        if line == "}":
            depth -= 1
        indented.append("\t" * depth + line if line else "")
        if line.endswith("{"):
            depth += 1
    return "\n".join(indented)
