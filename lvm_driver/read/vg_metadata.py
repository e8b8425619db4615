"""The VG report built from the VG's own metadata text, read from its PVs: no LVM process.

What ``lvs --readonly`` prints of ``REPORT_FIELDS`` (``report.VGReport``), computed
from the committed metadata text a metadata area's ``raw_locn[0]`` points at
(``mda.read_metadata_text``, checksum checked), parsed with ``config_text``, the
way lvm2 reports it (lib/metadata/lv.c ``lv_attr_dup``, lib/report/report.c): the
visible LVs sorted by name, sizes from extents, ``lv_attr`` with state and open
unknown (``X``) as under ``--readonly``, tags sorted, no percentages. Only what
is fully understood is reported: linear/striped LVs, thin pools, thin volumes
and thin snapshots, COW snapshots and their origins, the pool's hidden data and
metadata LVs and the metadata spare. Anything else (another segment type, a
status flag or key not known here, a shared or exported VG, a missing PV, a
merge under way, other PVs than those read) raises ``MetadataUnsupported``:
the caller reads the VG through ``lvs`` instead. So does anything LVM itself
refuses or reads otherwise than its face value (tests/unit/data/lvm_verdicts
holds LVM's verdict on such texts): a text on a PV not beginning with the VG's
name, no ``contents`` or ``version`` line, an id
that is not 32 of LVM's characters, a count past the 32 bits LVM keeps of it, a
byte size past 64 bits, a discards mode or chunk size LVM rejects, extents past
their PV's end or taken twice, a name or tag LVM would not allow (a ``lv_tags``
field cannot tell a comma in a tag from two tags), a COW snapshot of anything
but a plain or thin volume.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

from lvm_driver.read import mda
from lvm_driver.read.config_text import ConfigTextError, parse_config
from lvm_driver.read.metadata_values import (ID, MAX_EXTENT_SECTORS, MAX_UINT32, MAX_UINT64, NAME,
                                             SEGMENT_CHECKS, MetadataUnsupported, check_extents,
                                             check_text_start, check_unique_ids, is_count,
                                             tags_of)
from lvm_driver.read.report import LogicalVolume, LVAttr, VGReport, gc_paused

__all__ = ["MetadataUnsupported", "report_from_text", "report_from_pvs", "parse_text",
           "VGFacts", "vg_facts", "LVSection", "lv_sections", "Links", "Assembly",
           "assemble", "lv_row", "check_thin_links", "decode_text", "flag_set",
           "LVSection_STATUS", "LVSection_FLAGS"]

SECTOR: Final = 512
#: LVM counts a PV's extents, and an extent's sectors, in 32 bits
MAX_EXTENT_COUNT: Final = 2 ** 32 - 1
#: the top-level lines LVM checks before it reads the VG (format_text/import_vsn1.c)
_CONTENTS: Final = "Text Format Volume Group"
_VERSION: Final = 1
_VG_KEYS: Final = frozenset({"id", "seqno", "format", "status", "flags", "extent_size",
                             "max_lv", "max_pv", "metadata_copies", "physical_volumes",
                             "logical_volumes", "tags", "allocation_policy"})
_VG_STATUS: Final = frozenset({"RESIZEABLE", "READ", "WRITE"})
_VG_FLAGS: Final = frozenset({"NOAUTOACTIVATE"})
_PV_KEYS: Final = frozenset({"id", "device", "device_id", "device_id_type", "status",
                             "flags", "dev_size", "pe_start", "pe_count", "tags",
                             "ba_start", "ba_size"})
LVSection_KEYS: Final = frozenset({"id", "status", "flags", "tags", "creation_time",
                             "creation_host", "allocation_policy", "read_ahead", "major",
                             "minor", "segment_count"})
LVSection_STATUS: Final = frozenset({"READ", "WRITE", "VISIBLE", "FIXED_MINOR"})
LVSection_FLAGS: Final = frozenset({"ACTIVATION_SKIP", "NOAUTOACTIVATE", "ERROR_WHEN_FULL"})
_SEGMENT_COMMON: Final = frozenset({"start_extent", "extent_count", "type"})
#: each segment type understood, and the keys it may have
_SEGMENT_KEYS: Final = {kind: _SEGMENT_COMMON | keys for kind, keys in {
    "striped": frozenset({"stripe_count", "stripe_size", "stripes"}),
    "thin-pool": frozenset({"metadata", "pool", "transaction_id", "chunk_size", "discards",
                            "zero_new_blocks", "crop_metadata", "metadata_format"}),
    "thin": frozenset({"thin_pool", "transaction_id", "device_id", "origin"}),
    "snapshot": frozenset({"chunk_size", "origin", "cow_store"}),
}.items()}
_ONE_SEGMENT: Final = {"segment1"}
#: each segment type's settings that name another LV (a string, whatever the text holds)
_REFERENCES: Final = {"striped": (), "thin-pool": ("pool", "metadata"),
                      "thin": ("thin_pool", "origin"), "snapshot": ("origin", "cow_store")}
#: what a COW snapshot's origin may be: a thick (striped) or a thin LV
_COW_ORIGINS: Final = frozenset({"striped", "thin"})
_ALLOC_CHARS: Final = {"inherit": "i", "normal": "n", "contiguous": "c", "cling": "l",
                       "cling_by_tags": "t", "anywhere": "a"}


def _need(condition: object, message: str) -> None:
    if not condition:
        raise MetadataUnsupported(message)


def _section(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = parent.get(key, {})
    _need(isinstance(value, dict), f"{where}: {key} is not a section")
    return value


def _strings(parent: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = parent.get(key, ())
    _need(isinstance(value, tuple) and all(isinstance(item, str) for item in value),
          f"{where}: {key} is not a list of strings")
    return value


def _int(parent: dict[str, Any], key: str, where: str, limit: int = MAX_UINT32) -> int:
    """A count LVM reads as it is: 0 to ``limit`` (LVM keeps only the low bits of more)."""
    value = parent.get(key)
    _need(type(value) is int and 0 <= value <= limit,
          f"{where}: {key} is not a count within 0..{limit}")
    return value


def _id(section: dict[str, Any], where: str) -> str:
    value = section.get("id")
    _need(type(value) is str and ID.fullmatch(value), f"{where}: id is not LVM's")
    return value


def _known(section: dict[str, Any], allowed: Collection[str], where: str) -> None:
    unknown = [key for key in section if key not in allowed]
    _need(not unknown, f"{where}: unknown setting(s) {', '.join(unknown[:3])}")


class LVSection:
    """One LV section, checked: its flags, segments and extent count."""

    __slots__ = ("name", "uuid", "status", "flags", "tags", "alloc", "segments", "extents",
                 "kind")

    def __init__(self, name: str, section: object, memo: dict[object, Any]) -> None:
        # messages are formatted only on the way out: 10,000 LVs are checked per read
        if type(section) is not dict or not NAME.fullmatch(name):
            raise MetadataUnsupported(f"LV {name!r} is not a section, or not a name LVM "
                                      f"allows")
        uuid, created = section.get("id"), section.get("creation_time")
        # LVM reads no LV without its id and status, nor a creation time without host
        if type(uuid) is not str or not ID.fullmatch(uuid) or "status" not in section or (
                "creation_host" in section if created is None else not (
                    type(created) is int and 0 <= created <= MAX_UINT64
                    and type(section.get("creation_host")) is str)):
            raise MetadataUnsupported(f"LV {name}: its id, status or creation time")
        self.name = name
        self.uuid = uuid
        self.status = flag_set(section["status"], LVSection_STATUS, memo, name)
        if "FIXED_MINOR" in self.status and not is_count(section.get("minor")):
            raise MetadataUnsupported(f"LV {name}: a fixed minor number that is none")
        self.flags = flag_set(section.get("flags", ()), LVSection_FLAGS, memo, name)
        tags = section.get("tags", ())
        found = memo.get(tags) if type(tags) is tuple else None
        if found is None:
            found = memo[tags] = tags_of(section, f"LV {name}")
        self.tags = found
        policy = section.get("allocation_policy", "inherit")
        self.alloc = _ALLOC_CHARS.get(policy) if type(policy) is str else None
        count = section.get("segment_count")
        # each segment is a setting of the section: a count beyond them is forged
        if self.alloc is None or type(count) is not int or not 1 <= count <= len(section):
            raise MetadataUnsupported(f"LV {name}: allocation policy or segment count")
        others = section.keys() - LVSection_KEYS
        if count == 1:
            segments = [section.get("segment1")]
            known = others == _ONE_SEGMENT
        else:
            names = {f"segment{index}" for index in range(1, count + 1)}
            segments = [section.get(key) for key in sorted(names, key=lambda k: int(k[7:]))]
            known = others == names
        if not known:
            raise MetadataUnsupported(f"LV {name}: unknown setting(s) {sorted(others)[:3]}")
        self.segments: list[dict[str, Any]] = segments  # type: ignore[assignment]
        self.extents = 0
        for segment in segments:
            if type(segment) is not dict:
                raise MetadataUnsupported(f"LV {name}: a segment is not a section")
            kind = segment.get("type")
            keys = _SEGMENT_KEYS.get(kind) if type(kind) is str else None
            if keys is None or not (segment.keys() <= keys or _messages_only(segment, kind)):
                raise MetadataUnsupported(f"LV {name}: segment type {kind!r} or a setting "
                                          f"of it not known")
            for key in _REFERENCES[kind]:
                if type(segment.get(key, "")) is not str:
                    raise MetadataUnsupported(f"LV {name}: {key} is not a name")
            start, length = segment.get("start_extent"), segment.get("extent_count")
            # LVM keeps an LV's extent count in 32 bits, each segment's too
            if start != self.extents or type(length) is not int or not (
                    0 < length <= MAX_UINT32 - start) or (count > 1 and kind != "striped"):
                raise MetadataUnsupported(f"LV {name}: segments not contiguous, past "
                                          f"32-bit extent counts, or several not all "
                                          f"striped")
            SEGMENT_CHECKS[kind](segment, name)
            self.extents += length
        self.kind = segments[0]["type"]  # type: ignore[index]

    def attr(self, volume_type: str, target: str, zero: bool,
             memo: dict[object, Any]) -> LVAttr:
        """Its ``lv_attr`` as ``lvs --readonly`` prints it."""
        permissions = "w" if "WRITE" in self.status else "r" if "READ" in self.status \
            else "-"
        raw = (f"{volume_type}{permissions}{self.alloc}"
               f"{'m' if 'FIXED_MINOR' in self.status else '-'}XX{target}"
               f"{'z' if zero else '-'}-{'k' if 'ACTIVATION_SKIP' in self.flags else '-'}")
        attr = memo.get(raw)
        if attr is None:
            attr = memo[raw] = LVAttr.parse(raw)
        return attr


def _messages_only(segment: dict[str, Any], kind: object) -> bool:
    """Whether a thin pool's settings beyond the known ones are only the messages
    queued for it while inactive (which change nothing ``lvs`` prints)."""
    return kind == "thin-pool" and all(
        key in _SEGMENT_KEYS["thin-pool"] or (key.startswith("message") and type(value) is dict)
        for key, value in segment.items())


def flag_set(value: object, allowed: frozenset[str], memo: dict[object, Any],
             name: str) -> frozenset[str]:
    """A list of flags as a set, each one known (memoised: LVs repeat the same lists)."""
    key = ("flags", value)
    found = memo.get(key) if type(value) is tuple else None
    if found is None:
        _need(type(value) is tuple and all(type(item) is str for item in value),
              f"LV {name}: flags {value!r} are not a list of strings")
        found = memo[key] = frozenset(value)  # type: ignore[arg-type]
        _need(found <= allowed, f"LV {name}: unknown flag(s) {sorted(found - allowed)}")
    return found


def _allocated(lv: LVSection, pv_names: Collection[str]) -> int:
    """The PV extents a striped LV takes (its whole extent count)."""
    for segment in lv.segments:
        stripes = segment.get("stripes", ())
        count = _int(segment, "stripe_count", f"LV {lv.name}")
        _need(isinstance(stripes, tuple) and count >= 1 and len(stripes) == 2 * count
              and all(stripes[i] in pv_names for i in range(0, len(stripes), 2))
              and segment["extent_count"] % count == 0,
              f"LV {lv.name}: stripes {stripes!r} are not on the VG's PVs")
    return lv.extents


def _vg_section(tree: dict[str, Any], vg_name: str) -> dict[str, Any]:
    sections = [key for key, value in tree.items() if isinstance(value, dict)]
    _need(sections == [vg_name], f"the text holds VG(s) {sections}, not {vg_name!r}")
    # LVM reads no text without these two lines
    _need(tree.get("contents") == _CONTENTS and type(tree.get("version")) is int
          and tree["version"] == _VERSION, "the contents or version line is not LVM's")
    vg = tree[vg_name]
    _known(vg, _VG_KEYS, f"VG {vg_name}")
    _id(vg, "VG")
    tags_of(vg, "VG")
    for key in ("seqno", "max_lv", "max_pv", "metadata_copies"):
        if key in vg or key != "metadata_copies":
            _int(vg, key, "VG")
    # LVM's sizes in bytes are 64-bit: with extents of at most 4 GiB no LV nor VG of
    # 32-bit extent counts gets past that (its report would show the size wrapped)
    _need(0 < _int(vg, "extent_size", "VG") <= MAX_EXTENT_SECTORS,
          f"VG extent_size is not within 1..{MAX_EXTENT_SECTORS} sectors")
    _need(vg.get("format", "lvm2") == "lvm2", "VG format is not lvm2")
    _need(set(_strings(vg, "status", "VG")) <= _VG_STATUS
          and set(_strings(vg, "flags", "VG")) <= _VG_FLAGS,
          f"VG status/flags {vg.get('status')} {vg.get('flags')}")
    _need({"READ", "WRITE"} <= set(vg.get("status", ())), "VG is not read-write")
    return vg


def _pvs(vg: dict[str, Any], pv_uuids: Collection[str]) -> tuple[dict[str, int], int]:
    """The VG's PV section names and total extents; every PV allocatable, present and
    among ``pv_uuids`` (those read, no dashes), all of them listed."""
    pvs = _section(vg, "physical_volumes", "VG")
    ids = set()
    counts = {}
    for name, pv in pvs.items():
        where = f"PV {name}"
        _need(isinstance(pv, dict), f"{where} is not a section")
        _known(pv, _PV_KEYS, where)
        _need(_strings(pv, "status", where) == ("ALLOCATABLE",)
              and not _strings(pv, "flags", where), f"{where}: status/flags")
        ids.add(_id(pv, where).replace("-", ""))
        _int(pv, "pe_start", where, MAX_UINT64)
        for key in ("dev_size", "ba_start", "ba_size"):
            if key in pv:
                _int(pv, key, where, MAX_UINT64)
        _need(("ba_start" in pv) == ("ba_size" in pv), f"{where}: half a bootloader area")
        tags_of(pv, where)
        counts[name] = count = _int(pv, "pe_count", where, MAX_UINT64)
        _need(count <= MAX_EXTENT_COUNT, f"{where}: pe_count {count} is more than LVM's "
                                         f"32-bit extent count ({MAX_EXTENT_COUNT})")
    total = sum(counts.values())
    _need(ids == set(pv_uuids) and len(ids) == len(pvs),
          "the VG's PVs are not those whose headers were read")
    _need(total <= MAX_EXTENT_COUNT, f"the PVs' {total} extents are more than LVM's "
                                     f"32-bit extent count ({MAX_EXTENT_COUNT})")
    return counts, total


def parse_text(text: str) -> dict[str, Any]:
    """The config tree of a metadata text; MetadataUnsupported where it is not LVM's
    syntax as understood here."""
    try:
        return parse_config(text)
    except ConfigTextError as exc:
        raise MetadataUnsupported(str(exc)) from None


def report_from_text(text: str, vg_name: str, pv_uuids: Collection[str]) -> VGReport:
    """The report of VG ``vg_name`` from its metadata text; ``pv_uuids``: the PVs (label
    UUIDs) the text was read from, which must be all of the VG's."""
    with gc_paused():
        tree = parse_text(text)
        facts = vg_facts(tree, vg_name, pv_uuids)
        memo: dict[object, Any] = {}
        return assemble(facts, lv_sections(tree[vg_name], memo), memo).report


@dataclass(frozen=True, slots=True)
class VGFacts:
    """What the VG's own settings say (``logical_volumes`` aside), checked: its name,
    extent size (bytes), PV section names and PV extents."""

    vg_name: str
    extent_bytes: int
    pv_names: frozenset[str]
    total_extents: int
    #: each PV section's extent count
    pe_counts: dict[str, int]


def vg_facts(tree: dict[str, Any], vg_name: str, pv_uuids: Collection[str]) -> VGFacts:
    """The VG's facts from the text's tree, every VG-level setting checked."""
    vg = _vg_section(tree, vg_name)
    sectors = _int(vg, "extent_size", "VG")
    _need(0 < sectors <= MAX_EXTENT_COUNT, f"VG extent_size {sectors} sectors is not within "
                                           f"1..{MAX_EXTENT_COUNT} (LVM's 32 bits)")
    pv_names, total = _pvs(vg, pv_uuids)
    return VGFacts(vg_name, sectors * SECTOR, frozenset(pv_names), total, pv_names)


def lv_sections(vg: dict[str, Any], memo: dict[object, Any]) -> dict[str, LVSection]:
    """Each LV section of the VG's ``logical_volumes``, checked on its own."""
    return {name: LVSection(name, section, memo)
            for name, section in _section(vg, "logical_volumes", "VG").items()}


@dataclass(frozen=True, slots=True)
class Links:
    """How the LVs refer to each other: each hidden LV's role (the LV it is part of),
    each COW store's origin, and the origins of COW snapshots."""

    roles: dict[str, str]
    cow_origin: dict[str, str]
    origins: set[str]


@dataclass(frozen=True, slots=True)
class Assembly:
    """A report and the links it was built from (what an update of one thin LV needs)."""

    report: VGReport
    links: Links
    allocated_extents: int


def assemble(facts: VGFacts, lvs: dict[str, LVSection],
             memo: dict[object, Any]) -> Assembly:
    """The report from the VG's facts and its checked LV sections: every reference
    between LVs checked, the visible LVs' rows sorted by name."""
    check_extents(facts.pe_counts, lvs.values())
    check_unique_ids(lv.uuid for lv in lvs.values())
    links = _links(lvs)
    allocated = 0
    rows = []
    for lv in lvs.values():
        if lv.kind == "striped":
            allocated += _allocated(lv, facts.pv_names)
        row = lv_row(lv, lvs, links, facts.extent_bytes, memo)
        if row is not None:
            rows.append(row)
    free = facts.total_extents - allocated
    _need(free >= 0, "the LVs take more extents than the PVs have")
    rows.sort(key=lambda lv: lv.name)
    extent = facts.extent_bytes
    return Assembly(VGReport(vg_name=facts.vg_name, vg_size_bytes=facts.total_extents * extent,
                             vg_free_bytes=free * extent, extent_size_bytes=extent,
                             lvs=tuple(rows)), links, allocated)


def lv_row(lv: LVSection, lvs: dict[str, LVSection], links: Links, extent: int,
           memo: dict[object, Any]) -> LogicalVolume | None:
    """The LV's row as ``lvs --readonly`` prints it, None for an LV it never lists
    (a pool's part, a COW snapshot's joining LV, the metadata spare)."""
    name = lv.name
    visible = "VISIBLE" in lv.status or name in links.cow_origin
    internal = name in links.roles or (not visible and name.endswith("_pmspare")
                                       and lv.kind == "striped")
    # a snapshot's own LV is never listed, VISIBLE or not (LVM writes it so)
    if internal and "VISIBLE" in lv.status and lv.kind != "snapshot" or not (
            internal or visible) or (
            name in links.origins and (name in links.roles or name in links.cow_origin)):
        raise MetadataUnsupported(f"LV {name}: hidden of no known use, internal but "
                                  f"visible, or both part and origin")
    if internal:
        return None
    return _row(lv, lvs, links.cow_origin, links.origins, extent, memo)


def check_thin_links(lv: LVSection, lvs: dict[str, LVSection]) -> None:
    """A thin LV's pool is a thin pool and its origin, if any, a thin LV."""
    segment = lv.segments[0]
    pool, origin = lvs.get(segment.get("thin_pool")), segment.get("origin")
    if pool is None or pool.kind != "thin-pool" or origin is not None and (
            type(origin) is not str or origin not in lvs or lvs[origin].kind != "thin"):
        raise MetadataUnsupported(f"LV {lv.name}: its pool or origin")


def _links(lvs: dict[str, LVSection]) -> Links:
    """The LVs' links, every reference checked."""
    roles: dict[str, str] = {}
    cow_origin: dict[str, str] = {}
    origins: set[str] = set()
    for lv in lvs.values():
        kind, segment = lv.kind, lv.segments[0]
        if kind == "thin":
            check_thin_links(lv, lvs)
        elif kind == "thin-pool":
            for key in ("pool", "metadata"):
                part = lvs.get(segment.get(key))
                # the pool's size is its data LV's (a pool of other extents is not LVM's)
                if part is None or part.kind != "striped" or part.name in roles or (
                        key == "pool" and part.extents != lv.extents):
                    raise MetadataUnsupported(f"LV {lv.name}: its {key} LV")
                roles[part.name] = lv.name
            if segment.get("zero_new_blocks", 0) not in (0, 1):  # absent: not zeroed
                raise MetadataUnsupported(f"LV {lv.name}: zero_new_blocks")
            for message in segment.values():  # queued for the pool: LVM checks each
                if type(message) is dict and not (
                        type(message.get("create")) is str and message["create"] in lvs
                        and len(message) == 1
                        or message.keys() == {"delete"} and is_count(message["delete"])):
                    raise MetadataUnsupported(f"LV {lv.name}: a message LVM refuses")
        elif kind == "snapshot":
            origin, cow = lvs.get(segment.get("origin")), lvs.get(segment.get("cow_store"))
            # LVM lists a thin pool taken as an origin as one ("o"): not understood here
            if origin is None or cow is None or cow.kind != "striped" or (
                    cow.name in cow_origin or origin.name in cow_origin
                    or "VISIBLE" not in origin.status or origin.kind not in _COW_ORIGINS):
                raise MetadataUnsupported(f"LV {lv.name}: its origin or COW store")
            roles[lv.name] = cow_origin[cow.name] = origin.name
            origins.add(origin.name)
    # LVM takes one hidden LV named so for the pools' metadata spare, no second
    if sum(1 for name, lv in lvs.items()
           if "_pmspare" in name and "VISIBLE" not in lv.status) > 1:
        raise MetadataUnsupported("more than one pool metadata spare")
    return Links(roles, cow_origin, origins)


def _row(lv: LVSection, lvs: dict[str, LVSection], cow_origin: dict[str, str], origins: set[str],
         extent: int, memo: dict[object, Any]) -> LogicalVolume:
    segment = lv.segments[0]
    pool = origin = None
    zero = False
    if lv.kind == "thin-pool":
        attr = lv.attr("t", "t", segment.get("zero_new_blocks", 0) == 1, memo)
    elif lv.kind == "thin":
        pool, origin = segment["thin_pool"], segment.get("origin")
        zero = lvs[pool].segments[0].get("zero_new_blocks", 0) == 1
        attr = lv.attr("o" if lv.name in origins else "V", "t", zero, memo)
    elif lv.name in cow_origin:
        origin = cow_origin[lv.name]
        attr = lv.attr("s", "s", False, memo)
    else:
        attr = lv.attr("o" if lv.name in origins else "-",
                       "s" if lv.name in origins else "-", False, memo)
    return LogicalVolume(lv.name, lv.extents * extent, attr, pool, origin, None, None,
                         lv.tags)


def report_from_pvs(fingerprint: mda.Fingerprint, vg_name: str, *,
                    read: mda.BlockReader = mda.read_block,
                    build: Callable[[bytes, str, Collection[str]], VGReport] | None = None
                    ) -> VGReport:
    """The report from the text the fingerprint's metadata areas point at: read once
    (every area of every PV must point at a text of the same size and checksum), the
    fingerprint's PVs being all of the VG's; ``build`` makes it from the text's bytes
    (the incremental reader gives what the full parse gives). MetadataUnsupported,
    HeaderError or OSError on any doubt."""
    with_text = [pv for pv in fingerprint if pv.areas]
    _need(with_text, "no PV has a metadata area")
    first = with_text[0].areas[0][1:]
    _need(all(area[1:] == first for pv in with_text for area in pv.areas),
          "the metadata areas hold different texts")
    raw = mda.read_metadata_text(with_text[0], read=read)
    check_text_start(raw, vg_name)
    uuids = [pv.pv_uuid for pv in fingerprint]
    if build is None:
        return report_from_text(decode_text(raw), vg_name, uuids)
    return build(raw, vg_name, uuids)


def decode_text(raw: bytes) -> str:
    """The metadata text as read, decoded; MetadataUnsupported where it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MetadataUnsupported("the metadata text is not UTF-8") from None
