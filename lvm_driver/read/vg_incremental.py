"""The VG report from its metadata text, parsing only the LV sections that changed.

LVM rewrites the whole text on every commit, but writes the LV sections in a
stable order, one after another in ``logical_volumes``: after a change most of
the text is byte for byte the last one. ``IncrementalReader`` keeps the last
text (its bytes as read), where each LV section of it ends, and each section's
checked ``vg_metadata.LVSection``. On a new text it walks the old sections along
the new bytes (runs of them compared at once, no copy), decodes and parses only
the sections that are new or differ, and the VG's own settings (the text with
its LV sections taken out: a few hundred bytes) with the full reader's own
checks. When only thin volumes changed (and the pool's transaction id), only
their rows are redone; any other change assembles the report again from the
sections (``vg_metadata.assemble``, every cross-LV check), still without
parsing the unchanged ones. Any doubt (a layout not understood, a section
that does not parse alone as one LV, a name twice, a check that fails) means
the full parse of the whole text (``vg_metadata.report_from_text``), whose
answer, report or refusal, is the answer.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Final

from lvm_driver.read.lv_section_text import CANONICAL_THIN, section_from_text
from lvm_driver.read.report import LogicalVolume, VGReport, gc_paused
from lvm_driver.read.vg_metadata import (Links, LVSection, MetadataUnsupported, VGFacts,
                                         assemble, check_thin_links, decode_text, lv_row,
                                         lv_sections, parse_text, vg_facts)

__all__ = ["IncrementalReader", "ReaderStats"]

#: the line that opens the VG's LV sections (LVM indents it in a backup, not on disk)
_LV_BLOCK: Final = re.compile(rb"^[ \t]*logical_volumes \{\n", re.M)
#: blank lines, then the line that opens an LV section
_LV_START: Final = re.compile(rb"\s*([^\s{}=\[\]\",#]+) \{\n")
#: the end of an LV section: its last segment's "}" and its own (segments come last)
_LV_END: Final = re.compile(rb"\n[ \t]*\}\n[ \t]*\}\n")
#: blank lines, then the "}" that closes ``logical_volumes``
_BLOCK_CLOSE: Final = re.compile(rb"\s*\}")
#: sections compared as one run at first; the run doubles while they match
_FIRST_RUN: Final = 64
#: memoised values (tag lists, flags, attrs) kept per LV at most, gone ones included
_MEMO_PER_LV: Final = 4


@dataclass(frozen=True, slots=True)
class ReaderStats:
    """Texts read by a full parse, and by parsing only what changed."""

    full: int
    incremental: int


class _Doubt(Exception):
    """The fast path cannot prove its answer equal to the full parse's."""


@dataclass(slots=True)
class _State:
    """One text read: where its LV sections end, and what was built from them."""

    raw: bytes
    view: memoryview
    vg_name: str
    pv_uuids: frozenset[str]
    head_end: int
    names: list[str]
    #: each LV section's length, with the blank lines before it (unchanged sections
    #: keep theirs, so a change costs no update of the others)
    lengths: list[int]
    #: None before any text is read
    facts: VGFacts | None
    lvs: dict[str, LVSection]
    links: Links
    memo: dict[object, Any]
    rows: list[LogicalVolume]
    row_names: list[str]
    report: VGReport
    #: each thin origin, and how many thin LVs name it
    children: dict[str, int]
    #: each LV's id, and the LV that has it (the full parse refuses an id twice)
    ids: dict[str, str]


class IncrementalReader:
    """The report of a VG's metadata text, each text after the first parsed where it
    differs from the last one read; thread-safe. Raises ``MetadataUnsupported``
    exactly where ``vg_metadata.report_from_text`` does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: _State | None = None
        self._full = 0
        self._incremental = 0

    @property
    def stats(self) -> ReaderStats:
        with self._lock:
            return ReaderStats(self._full, self._incremental)

    def reset(self) -> None:
        """Keep nothing: the next text is parsed whole."""
        with self._lock:
            self._state = None

    def report(self, text: bytes | str, vg_name: str, pv_uuids: Collection[str]) -> VGReport:
        """The report of VG ``vg_name`` from ``text`` (as read, or decoded), read from PVs
        ``pv_uuids`` (all of the VG's); what ``vg_metadata.report_from_text`` gives."""
        raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        uuids = frozenset(pv_uuids)
        with self._lock, gc_paused():
            last, self._state = self._state, None
            if last is not None and last.vg_name == vg_name and last.pv_uuids == uuids:
                try:
                    state = _update(last, raw)
                except (_Doubt, MetadataUnsupported, UnicodeDecodeError):
                    state = None
                if state is not None:
                    self._state = state
                    self._incremental += 1
                    return state.report
            state = _full(raw, vg_name, uuids)
            self._full += 1
            self._state = state
            return state.report


def _full(raw: bytes, vg_name: str, uuids: frozenset[str]) -> _State:
    """The whole text parsed: section by section as an update of no text read (most
    sections then need no tokeniser, ``lv_section_text``), or on any doubt as one
    text; the state to read the next text against (one that matches no text where
    the layout is not the one the fast path understands)."""
    empty = VGReport(vg_name=vg_name, vg_size_bytes=0, vg_free_bytes=0,
                     extent_size_bytes=0, lvs=())
    nothing = _State(b"", memoryview(b""), vg_name, uuids, 0, [], [], None, {},
                     Links({}, {}, set()), {}, [], [], empty, {}, {})
    try:
        state = _sectioned(nothing, raw)
    except (_Doubt, MetadataUnsupported, UnicodeDecodeError):
        state = None
    if state is not None:
        return state
    tree = parse_text(decode_text(raw))
    facts = vg_facts(tree, vg_name, uuids)
    memo: dict[object, Any] = {}
    lvs = lv_sections(tree[vg_name], memo)
    assembly = assemble(facts, lvs, memo)
    located = _locate(raw, list(lvs))
    rows = list(assembly.report.lvs)
    state = _State(raw, memoryview(raw), vg_name, uuids, 0, [], [], facts, lvs,
                   assembly.links, memo,
                   rows, [lv.name for lv in rows], assembly.report, _children(lvs.values()),
                   {lv.uuid: name for name, lv in lvs.items()})
    if located is None:
        state.raw = b""  # matches no text: the next one is parsed whole
        return state
    state.head_end, state.lengths = located
    state.names = list(lvs)
    return state


def _locate(text: bytes, names: list[str]) -> tuple[int, list[int]] | None:
    """Where ``logical_volumes {`` ends and each LV section's length (in ``names``'
    order), each section balanced and nothing but blank lines between them; None for
    any other layout."""
    block = _LV_BLOCK.search(text)
    if block is None:
        return None
    position = block.end()
    lengths = []
    for name in names:
        end = _section_end(text, position, name)
        if end is None:
            return None
        lengths.append(end - position)
        position = end
    if not _BLOCK_CLOSE.match(text, position):
        return None
    return block.end(), lengths


def _section_end(text: bytes, position: int, name: str | None) -> int | None:
    """The end of the LV section that starts (after blank lines) at ``position``, named
    ``name`` (None: any name); None where no balanced section starts there."""
    start = _LV_START.match(text, position)
    if start is None or name is not None and start.group(1) != name.encode():
        return None
    end = _LV_END.search(text, start.end())
    if end is None:
        return None
    stop = end.end()
    if text.count(b"{", position, stop) != text.count(b"}", position, stop):
        return None
    return stop


def _update(last: _State, text: bytes) -> _State | None:
    """The state of ``text`` built from ``last`` with only the changed sections parsed;
    None, ``_Doubt``, ``MetadataUnsupported`` or ``UnicodeDecodeError`` where that is
    not provably right. ``last`` is used up (its containers updated in place: copying
    100,000 entries would cost more than the change)."""
    if not last.raw or len(last.memo) > _MEMO_PER_LV * len(last.lvs) + 1024:
        return None  # the memo of tags and attrs seen is rebuilt by the full parse
    return _sectioned(last, text)


def _sectioned(last: _State, text: bytes) -> _State | None:
    """The state of ``text`` from ``last``'s with the sections that differ parsed
    (every one, after no text); None, ``_Doubt``, ``MetadataUnsupported`` or
    ``UnicodeDecodeError`` where that is not provably the full parse's answer."""
    block = _LV_BLOCK.search(text)
    if block is None:
        return None
    head_end = block.end()
    walk = _walk(last, text, head_end)
    skeleton = parse_text((text[:head_end] + text[walk.tail_start:]).decode("utf-8"))
    vg = skeleton.get(last.vg_name)
    if type(vg) is not dict or vg.get("logical_volumes") != {}:
        raise _Doubt("the LV sections are not the VG's logical_volumes")
    facts = vg_facts(skeleton, last.vg_name, last.pv_uuids)
    memo = last.memo
    fresh: dict[str, LVSection] = {}
    for name, (start, end, canonical) in walk.parsed.items():
        fresh[name] = section_from_text(name, text, start, end, canonical, memo)
    lvs = last.lvs
    old = {name: lvs.pop(name) for name in (*walk.removed, *fresh) if name in lvs}
    lvs.update(fresh)
    _update_ids(last.ids, old.values(), fresh.values())
    state = _State(text, memoryview(text), last.vg_name, last.pv_uuids, head_end,
                   walk.names, walk.lengths,
                   facts, lvs, last.links, memo, last.rows, last.row_names, last.report,
                   last.children, last.ids)
    if facts == last.facts and _only_thin_changes(last.links, old, walk.removed, fresh):
        _update_rows(state, old, walk.removed, fresh)
    else:
        assembly = assemble(facts, lvs, memo)
        state.links, state.report = assembly.links, assembly.report
        state.rows = list(assembly.report.lvs)
        state.row_names = [lv.name for lv in state.rows]
        state.children = _children(lvs.values())
    return state


def _update_ids(ids: dict[str, str], old: Iterable[LVSection],
                fresh: Iterable[LVSection]) -> None:
    """The ids of the last text (each one once) with the changed LVs' old ids taken
    out and their new ones put in; an id two LVs have is a doubt (the full parse
    refuses it)."""
    for lv in old:
        del ids[lv.uuid]
    for lv in fresh:
        if ids.setdefault(lv.uuid, lv.name) != lv.name:
            raise _Doubt(f"LV {lv.name}: the id of LV {ids[lv.uuid]}")


def _origin(lv: LVSection) -> object:
    return lv.segments[0].get("origin") if lv.kind == "thin" else None


def _children(lvs: Iterable[LVSection]) -> dict[str, int]:
    children: dict[str, int] = {}
    for lv in lvs:
        origin = _origin(lv)
        if type(origin) is str:
            children[origin] = children.get(origin, 0) + 1
    return children


#: where a section to parse starts and ends, and ``CANONICAL_THIN``'s match of it if any
_Span = tuple[int, int, re.Match[bytes] | None]


@dataclass(slots=True)
class _Walk:
    """The new text's LV sections: names and lengths in order, where those to parse (new
    or changed) start and end, the old names gone, and where ``logical_volumes`` closes."""

    names: list[str]
    lengths: list[int]
    parsed: dict[str, _Span]
    removed: set[str]
    tail_start: int


def _walk(last: _State, text: bytes, head_end: int) -> _Walk:
    """The old sections walked along the new text: runs of them that are the same bytes
    where the walk stands are taken at once (their lengths kept), any other section
    is cut out to be parsed."""
    old_view, old_names, old_lengths = last.view, last.names, last.lengths
    old_ends = list(accumulate(old_lengths, initial=last.head_end))
    count = len(old_names)
    names: list[str] = []
    lengths: list[int] = []
    parsed: dict[str, _Span] = {}
    removed: set[str] = set()
    cursor, i, run = head_end, 0, _FIRST_RUN
    while i < count:
        j = min(count, i + run)
        start, stop = old_ends[i], old_ends[j]
        if text.startswith(old_view[start:stop], cursor):
            names.extend(old_names[i:j])
            lengths.extend(old_lengths[i:j])
            cursor += stop - start
            i, run = j, run * 2
            continue
        if j - i > 1:
            run = max(1, (j - i) // 2)
            continue
        run = 1
        if _BLOCK_CLOSE.match(text, cursor):  # the sections left are gone
            removed.update(old_names[i:])
            break
        name, end, canonical = _section_at(text, cursor)
        if name == old_names[i]:
            i += 1
        elif name in last.lvs:
            later = _later(name, old_names, i)
            if later is None:
                raise _Doubt(f"LV {name} twice, or moved back")
            removed.update(old_names[i:later])  # the sections before it are gone
            i = later
            continue
        cursor = _take(name, canonical, cursor, end, names, lengths, parsed)
    known = last.lvs
    while True:
        # LVM's thin volumes one after another, each matched where the last ended
        for canonical in iter(CANONICAL_THIN.scanner(text, cursor).match, None):
            name = canonical.group(1).decode()
            if name in known and name not in removed:
                raise _Doubt(f"LV {name} twice")
            cursor = _take(name, canonical, cursor, canonical.end(), names, lengths, parsed)
        if _BLOCK_CLOSE.match(text, cursor):
            break
        name, end, canonical = _section_at(text, cursor)
        if name in known and name not in removed:
            raise _Doubt(f"LV {name} twice")
        cursor = _take(name, canonical, cursor, end, names, lengths, parsed)
    removed.difference_update(parsed)  # moved: parsed again where it is now
    return _Walk(names, lengths, parsed, removed, cursor)


def _section_at(text: bytes, cursor: int) -> tuple[str, int, re.Match[bytes] | None]:
    """The name and end of the LV section that starts (after blank lines) at ``cursor``,
    and ``CANONICAL_THIN``'s match of it where it is LVM's thin volume; ``_Doubt`` where
    no balanced section starts there."""
    canonical = CANONICAL_THIN.match(text, cursor)
    if canonical is not None:
        return canonical.group(1).decode(), canonical.end(), canonical
    end = _section_end(text, cursor, None)
    if end is None:
        raise _Doubt("an LV section the walk does not understand")
    return _LV_START.match(text, cursor).group(1).decode(), end, None  # type: ignore[union-attr]


def _later(name: str, old_names: list[str], after: int) -> int | None:
    """The index of ``name`` among the old sections past ``after``, or None."""
    try:
        return old_names.index(name, after + 1)
    except ValueError:
        return None


def _take(name: str, canonical: re.Match[bytes] | None, cursor: int, end: int,
          names: list[str], lengths: list[int], parsed: dict[str, _Span]) -> int:
    if name in parsed:
        raise _Doubt(f"LV {name} twice")
    parsed[name] = (cursor, end, canonical)
    names.append(name)
    lengths.append(end - cursor)
    return end


def _pool_shape(lv: LVSection) -> tuple[object, ...]:
    """What of a thin pool's section any row depends on (all but its transaction id)."""
    segment = {key: value for key, value in lv.segments[0].items()
               if key != "transaction_id"}
    return (lv.status, lv.flags, lv.tags, lv.alloc, lv.extents, len(lv.segments),
            sorted(segment.items(), key=lambda item: item[0]))


def _only_thin_changes(links: Links, old_lvs: dict[str, LVSection], removed: set[str],
                       fresh: dict[str, LVSection]) -> bool:
    """Whether only thin volumes outside every COW and pool link came, went or
    changed (``old_lvs``: the last versions of those), or a thin pool changed its
    transaction id alone: then no other row and no VG figure can differ."""
    for name in (*removed, *fresh):
        if name in links.roles or name in links.cow_origin or name in links.origins:
            return False
        old, new = old_lvs.get(name), fresh.get(name)
        kinds = {lv.kind for lv in (old, new) if lv is not None}
        if kinds == {"thin"}:
            continue
        if kinds != {"thin-pool"} or old is None or new is None or (
                _pool_shape(old) != _pool_shape(new)):
            return False
    return True


def _update_rows(state: _State, old_lvs: dict[str, LVSection], removed: set[str],
                 fresh: dict[str, LVSection]) -> None:
    """Only the changed LVs' rows redone, each checked as the full assembly checks it;
    an LV gone that a thin LV still names as its origin is a doubt."""
    children = state.children
    changed = [(lv, -1) for lv in old_lvs.values()] + [(lv, 1) for lv in fresh.values()]
    if any(type(_origin(lv)) is str for lv, _ in changed):
        for lv, step in changed:
            origin = _origin(lv)
            if type(origin) is str:
                children[origin] = children.get(origin, 0) + step
                if not children[origin]:
                    del children[origin]
    if any(name in children for name in removed):
        raise _Doubt("a thin LV names a removed LV as its origin")
    rows, row_names = state.rows, state.row_names
    extent = state.facts.extent_bytes
    changed_rows = []
    for name in removed:
        at = bisect.bisect_left(row_names, name)
        if at == len(row_names) or row_names[at] != name:
            raise _Doubt(f"LV {name} had no row")
        del rows[at], row_names[at]
    for lv in fresh.values():
        if lv.kind == "thin":
            check_thin_links(lv, state.lvs)
        row = lv_row(lv, state.lvs, state.links, extent, state.memo)
        if row is None:
            raise _Doubt(f"LV {lv.name} is not listed")
        changed_rows.append(row)
        at = bisect.bisect_left(row_names, lv.name)
        if at < len(row_names) and row_names[at] == lv.name:
            rows[at] = row
        else:
            rows.insert(at, row)
            row_names.insert(at, lv.name)
    state.report = state.report.with_rows(tuple(rows), changed_rows, removed)
