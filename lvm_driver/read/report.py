"""The report of a volume group: the ``lvs`` fields, their parser, the typed records.

The read path's records: when the VG is read through LVM, the JSON of one ``lvs``
(a process, or one answer of the long-lived lvm shell) is parsed once here into
immutable records (``VGReport`` > ``LogicalVolume`` > ``LVAttr``);
``vg_metadata`` builds the same records from the VG's metadata text. Output that
is not what LVM prints raises ``LVMOutputError``; nothing here starts a process.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import math
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, TypeAlias, TypeVar

from driver_kit.exceptions import NotFound

from lvm_driver.read.lv_attr import LVAttr
from lvm_driver.run.executor import LVMOutputError

# ---------------------------------------------------------------------------
# Records


#: volume_type characters of LVs that may hold their own extents as volumes (``o``/``O``
#: only when the origin of a COW snapshot is not itself thin: see ``is_thick``).
_THICK_TYPES: Final = frozenset("-oOmMrRC")


class LogicalVolume(NamedTuple):
    """One row of the report. Sizes are bytes (extent-rounded by LVM).

    ``data_percent``/``metadata_percent`` are None when LVM printed nothing
    (the LV type has none, or it is inactive so the kernel was not asked).
    A NamedTuple, not a frozen dataclass: as immutable and typed, but built
    about 3x faster, which counts at 100,000 LVs a report.
    """

    name: str
    size_bytes: int
    attr: LVAttr
    pool_lv: str | None
    origin: str | None
    data_percent: float | None
    metadata_percent: float | None
    tags: tuple[str, ...]

    # lv_attr is decoded by LVAttr alone; these delegate to its predicates.
    @property
    def is_thin_pool(self) -> bool:
        return self.attr.is_thin_pool

    @property
    def is_thin_volume(self) -> bool:
        """A thin LV of pool ``pool_lv``, by its segment type and pool, not by the one
        volume-type letter (``o`` when it is a COW snapshot's origin)."""
        return self.attr.is_thin_volume and self.pool_lv is not None

    @property
    def is_thin_snapshot(self) -> bool:
        """A thin volume that still has an origin (LVM forgets it once removed)."""
        return self.origin is not None and self.is_thin_volume

    @property
    def is_cow_snapshot(self) -> bool:
        """An operator's COW snapshot (``lvcreate -s -L``): thick space in the VG, its
        origin a thin or thick volume; never a volume of any pool."""
        return self.origin is not None and self.attr.is_cow_snapshot

    @property
    def is_hidden(self) -> bool:
        """An LVM-internal LV (``[pool_tdata]`` etc.), listed only with ``lvs -a``."""
        return self.name.startswith("[")

    @property
    def is_thick(self) -> bool:
        """A visible volume with its own extents: linear, striped, mirror, raid, and a
        thick LV that is a COW snapshot's origin; never a thin LV (whatever snapshots
        it has) nor the COW snapshot itself."""
        return (self.attr.volume_type in _THICK_TYPES and not self.attr.is_thin_volume
                and not self.name.startswith("["))

    @property
    def is_active(self) -> bool:
        return self.attr.is_active


@dataclass(frozen=True, slots=True, kw_only=True)
class VGInfo:
    """The volume group's own facts, from ``vgs``. Sizes in bytes."""

    vg_name: str
    vg_size_bytes: int
    vg_free_bytes: int
    extent_size_bytes: int


_T = TypeVar("_T")

#: how a summary follows a change: (new report, value, rows before, rows after) ->
#: (new value,), or None to compute it anew
SummaryUpdate: TypeAlias = Callable[["VGReport", Any, tuple["LogicalVolume", ...],
                                     tuple["LogicalVolume", ...]], "tuple[Any] | None"]

#: names changed since an LV index was built, at most, before it is built anew
_INDEX_CHANGES: Final = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class VGReport:
    """The whole VG at one instant: its size and free space and every LV."""

    vg_name: str
    vg_size_bytes: int
    vg_free_bytes: int
    extent_size_bytes: int
    lvs: tuple[LogicalVolume, ...]
    _by_name: dict[str, LogicalVolume] = field(
        init=False, repr=False, compare=False, default=None)  # type: ignore[assignment]
    #: names changed since ``_by_name`` was built (None: removed), looked up first
    _changes: dict[str, LogicalVolume | None] | None = field(
        init=False, repr=False, compare=False, default=None)
    #: ``summary`` values and their updaters, shared with reports that differ only in
    #: thin pools' usage
    _summaries: dict[str, tuple[Any, SummaryUpdate | None]] = field(
        init=False, repr=False, compare=False, default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {lv.name: lv for lv in self.lvs})
        object.__setattr__(self, "_summaries", {})

    def summary(self, key: str, compute: Callable[[VGReport], _T],
                update: SummaryUpdate | None = None) -> _T:
        """``compute(self)``, once for this report and every report ``with_lvs`` lays
        thin pools' usage over: a refresh's sums over 10,000 LVs are done once while the
        VG is unchanged. ``compute`` must not depend on a thin pool's usage.
        ``update(report, value, before, after)``: the value for the report ``with_rows``
        makes from this one (``before``: the rows replaced or removed, ``after``: the
        new ones), as a 1-tuple, or None to compute it anew."""
        summaries = self._summaries
        if key not in summaries:
            summaries[key] = (compute(self), update)
        return summaries[key][0]

    def find_lv(self, name: str) -> LogicalVolume | None:
        """The LV of that name, or None."""
        changes = self._changes
        if changes is not None and name in changes:
            return changes[name]
        return self._by_name.get(name)

    def get_lv(self, name: str) -> LogicalVolume:
        """The LV of that name; ``LVNotFoundError`` (a NotFound) if absent."""
        lv = self.find_lv(name)
        if lv is None:
            raise LVNotFoundError(
                f"no logical volume {name!r} in volume group {self.vg_name!r}")
        return lv

    def with_lvs(self, replaced: dict[int, LogicalVolume]) -> VGReport:
        """This report with the LVs at the given indexes replaced (same names): the
        pool's usage laid over a reused report, without rebuilding the whole index.
        When only usage figures change, what ``derived`` computed is kept."""
        lvs = list(self.lvs)
        changes: dict[str, LogicalVolume | None] = {}
        usage_only = True
        for index, lv in replaced.items():
            if lvs[index].name != lv.name:
                raise ValueError(f"LV {index} is {lvs[index].name!r}, not {lv.name!r}")
            usage_only = usage_only and lvs[index].is_thin_pool and lvs[index]._replace(
                data_percent=lv.data_percent, metadata_percent=lv.metadata_percent) == lv
            lvs[index] = changes[lv.name] = lv
        report = self._changed(tuple(lvs), changes)
        if usage_only:
            object.__setattr__(report, "_summaries", self._summaries)
        return report

    def with_rows(self, lvs: tuple[LogicalVolume, ...], changed: Iterable[LogicalVolume],
                  removed: Iterable[str]) -> VGReport:
        """This report with ``lvs`` (the new rows, in order) where only ``changed`` rows
        (new or replaced) differ and ``removed`` names are gone: the index updated, not
        rebuilt, and each summary that has an updater carried over (a change of one LV
        among 100,000)."""
        after = tuple(changed)
        changes: dict[str, LogicalVolume | None] = dict.fromkeys(removed)
        before = tuple(lv for name in (*changes, *(lv.name for lv in after))
                       if (lv := self.find_lv(name)) is not None)
        changes.update((lv.name, lv) for lv in after)
        report = self._changed(lvs, changes)
        for key, (value, update) in self._summaries.items():
            carried = None if update is None else update(report, value, before, after)
            if carried is not None:
                report._summaries[key] = (carried[0], update)
        return report

    def _changed(self, lvs: tuple[LogicalVolume, ...],
                 changes: dict[str, LogicalVolume | None]) -> VGReport:
        """A report of ``lvs`` whose index is this one's with ``changes`` (None: removed)
        looked up first: no copy of 100,000 entries per change; built anew once
        ``_INDEX_CHANGES`` names have changed."""
        if self._changes:
            changes = {**self._changes, **changes}
        by_name = self._by_name
        if len(changes) > _INDEX_CHANGES:
            by_name, changes = {lv.name: lv for lv in lvs}, {}
        report = object.__new__(VGReport)
        for name in ("vg_name", "vg_size_bytes", "vg_free_bytes", "extent_size_bytes"):
            object.__setattr__(report, name, getattr(self, name))
        object.__setattr__(report, "lvs", lvs)
        object.__setattr__(report, "_by_name", by_name)
        object.__setattr__(report, "_changes", changes or None)
        object.__setattr__(report, "_summaries", {})
        return report

    def thin_pools(self) -> tuple[LogicalVolume, ...]:
        return tuple(lv for lv in self.lvs if lv.is_thin_pool)

    def thin_volumes(self, pool_name: str) -> tuple[LogicalVolume, ...]:
        """Every thin volume of the pool, snapshots included."""
        return tuple(lv for lv in self.lvs
                     if lv.pool_lv == pool_name and lv.is_thin_volume)

    def thick_volumes(self) -> tuple[LogicalVolume, ...]:
        return tuple(lv for lv in self.lvs if lv.is_thick)

    def cow_snapshots(self) -> tuple[LogicalVolume, ...]:
        """The COW snapshots: extents the VG allocates outside every volume."""
        return tuple(lv for lv in self.lvs if lv.is_cow_snapshot)


class LVNotFoundError(NotFound):
    """A report has no LV of the requested name."""


# ---------------------------------------------------------------------------
# Parsing

#: The fields of the one ``lvs`` report, only those the driver reads (every
#: extra field costs ``lvs`` time and parse time). VG facts ride on every LV row.
REPORT_FIELDS: Final = (
    "vg_name", "vg_size", "vg_free", "vg_extent_size", "lv_name", "lv_size",
    "lv_attr", "pool_lv", "origin", "data_percent", "metadata_percent", "lv_tags",
)
VG_FIELDS: Final = ("vg_name", "vg_size", "vg_free", "vg_extent_size")
#: A row's REPORT_FIELDS values as one tuple (KeyError if one is missing;
#: fields LVM printed beyond them are ignored).
_report_values: Final = operator.itemgetter(*REPORT_FIELDS)


def load_rows(text: str, section: str) -> list[dict[str, Any]]:
    if not isinstance(text, str):
        raise LVMOutputError(f"LVM output must be text, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except ValueError as exc:
        snippet = text.strip()[:80]
        raise LVMOutputError(
            f"LVM printed malformed JSON ({exc}); output began {snippet!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("report"), list):
        raise LVMOutputError("LVM JSON has no 'report' list")
    rows: list[dict[str, Any]] = []
    for entry in data["report"]:
        if not isinstance(entry, dict):
            raise LVMOutputError("an entry of the LVM 'report' list is not an object")
        part = entry.get(section)
        if part is None:
            continue
        if not isinstance(part, list):
            raise LVMOutputError(f"LVM report section {section!r} is not a list")
        rows.extend(part)
    return rows


#: LVM prints sizes from 64-bit counters: a longer figure is not LVM's
_MAX_DIGITS: Final = len(str(2 ** 64 - 1))


def _byte_count(text: str, key: str) -> int:
    """A size printed with ``--units b --nosuffix``: ASCII digits, nothing else, less
    than 2^64 (LVM's sizes are 64-bit)."""
    if type(text) is str and text.isdigit() and text.isascii():
        if len(text) <= _MAX_DIGITS and int(text) < 2 ** 64:
            return int(text)
        raise LVMOutputError(
            f"field {key!r} is {text[:30]}{'...' if len(text) > 30 else ''} "
            f"({len(text)} digits): more than the 2^64 bytes LVM can print")
    raise LVMOutputError(
        f"field {key!r} should be a byte count, got {text!r} "
        "(was the report run with --units b --nosuffix?)")


def _int_field(row: dict[str, Any], key: str, index: int) -> int:
    try:
        return _byte_count(row[key], key)
    except LVMOutputError as exc:
        raise LVMOutputError(f"row {index}: {exc}") from None


def _percent(text: str, key: str) -> float | None:
    """A percentage from 0 to 100, or None where LVM printed nothing."""
    if text == "":
        return None
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not (text.isascii() and 0.0 <= number <= 100.0):
        raise LVMOutputError(f"field {key!r} should be a percentage, got {text!r}")
    return number


def _tag_tuple(text: str) -> tuple[str, ...]:
    return tuple(text.split(",")) if text else ()




class _Memo(dict[str, _T]):
    """``memo[text]`` is ``convert(text)``, computed once per distinct text.

    Sizes, lv_attr strings, percentages and tag lists repeat across the rows
    of a report; each distinct one is checked, converted and allocated once.
    """

    __slots__ = ("_convert",)

    def __init__(self, convert: Callable[[str], _T]) -> None:
        super().__init__()
        self._convert = convert

    def __missing__(self, text: str) -> _T:
        value = self[text] = self._convert(text)
        return value


def _missing(row: object, fields: tuple[str, ...], index: int) -> LVMOutputError:
    if not isinstance(row, dict):
        return LVMOutputError(f"row {index} of the LVM report is not an object")
    absent = [name for name in fields if name not in row]
    return LVMOutputError(
        f"row {index} of the LVM report lacks field(s) {', '.join(absent)}")


def _not_a_string(values: tuple[Any, ...], index: int) -> LVMOutputError:
    key, value = next((key, value) for key, value in zip(REPORT_FIELDS, values)
                      if type(value) is not str)
    return LVMOutputError(f"row {index}: field {key!r} is not a string: {value!r}")


def _other_vg(values: tuple[str, ...], vg_name: str, first: tuple[str, ...],
              index: int) -> LVMOutputError:
    if values[0] != vg_name:
        return LVMOutputError(
            f"row {index} belongs to volume group {values[0]!r}, not {vg_name!r}")
    key, value, expected = next(item for item in zip(VG_FIELDS, values, first)
                                if item[1] != item[2])
    return LVMOutputError(
        f"row {index}: field {key!r} is {value!r} but row 0 says {expected!r} "
        "(one report is one volume group at one instant)")


def lvs_from_rows(rows: list[Any], vg_name: str) -> tuple[LogicalVolume, ...]:
    """Check every row of the report and build its LogicalVolume, in one pass.

    Every row must carry the VG facts of row 0; LVMOutputError names the row
    and field of the first thing wrong.
    """
    lv_sizes = _Memo(functools.partial(_byte_count, key="lv_size"))
    attrs = _Memo(LVAttr.parse)
    data_percents = _Memo(functools.partial(_percent, key="data_percent"))
    metadata_percents = _Memo(functools.partial(_percent, key="metadata_percent"))
    tag_tuples = _Memo(_tag_tuple)
    vg_facts: tuple[str, ...] = ()
    lvs: list[LogicalVolume] = []
    for index, row in enumerate(rows):
        try:
            values = _report_values(row)
        except (KeyError, TypeError):
            raise _missing(row, REPORT_FIELDS, index) from None
        if values[:4] != vg_facts:
            if index or values[0] != vg_name:
                raise _other_vg(values, vg_name, vg_facts, index)
            vg_facts = values[:4]
        _, _, _, _, name, size, attr, pool_lv, origin, data, metadata, tags = values
        if not (type(name) is type(size) is type(attr) is type(pool_lv) is type(origin)
                is type(data) is type(metadata) is type(tags) is str):
            raise _not_a_string(values, index)
        if not name:
            raise LVMOutputError(f"row {index}: field 'lv_name' is empty")
        try:
            lvs.append(LogicalVolume(
                name, lv_sizes[size], attrs[attr], pool_lv or None, origin or None,
                data_percents[data], metadata_percents[metadata], tag_tuples[tags]))
        except LVMOutputError as exc:
            raise LVMOutputError(f"row {index}: {exc}") from None
    return tuple(lvs)


def parse_vgs_report(text: str, vg_name: str) -> VGInfo:
    """Parse ``vgs --reportformat json --units b --nosuffix -o VG_FIELDS <vg>``."""
    rows = load_rows(text, "vg")
    mine = [row for row in rows if isinstance(row, dict) and row.get("vg_name") == vg_name]
    if not mine:
        raise LVMOutputError(f"the vgs report has no row for volume group {vg_name!r}")
    if len(mine) != len(rows):
        raise LVMOutputError(f"the vgs report has rows for other volume groups than {vg_name!r}")
    row = mine[0]
    try:
        return VGInfo(
            vg_name=vg_name,
            vg_size_bytes=_int_field(row, "vg_size", 0),
            vg_free_bytes=_int_field(row, "vg_free", 0),
            extent_size_bytes=_int_field(row, "vg_extent_size", 0),
        )
    except KeyError:
        raise _missing(row, VG_FIELDS, 0) from None


def parse_lvs_report(text: str, vg_name: str, *,
                     vg_info: VGInfo | None = None) -> VGReport:
    """Parse the ``lvs`` report of ``REPORT_FIELDS`` into a ``VGReport``.

    The VG's size, free space and extent size come from the first row. LVM
    prints no row at all for a VG without LVs; only then is ``vg_info`` used
    (and required). Raises LVMOutputError, naming what is wrong, on malformed
    JSON, missing fields, non-numeric sizes or rows of another VG.
    """
    with gc_paused():
        return report_from_rows(load_rows(text, "lv"), vg_name, vg_info)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a report is parsed.

    A report of 100,000 LVs makes a few hundred thousand containers that all
    stay alive and form no cycles; the collector would traverse them again
    and again for nothing (about 20 ms of a 400 ms parse, docs/benchmarks.md).
    It is re-enabled on the way out, whatever happens.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def report_from_rows(rows: list[dict[str, Any]], vg_name: str,
                      vg_info: VGInfo | None) -> VGReport:
    if not rows:
        if vg_info is None:
            raise LVMOutputError(
                f"the lvs report has no rows, so it says nothing about volume "
                f"group {vg_name!r} (it has no LVs); pass vg_info from vgs")
        if vg_info.vg_name != vg_name:
            raise LVMOutputError(f"vg_info is for {vg_info.vg_name!r}, not {vg_name!r}")
        return VGReport(vg_name=vg_name, vg_size_bytes=vg_info.vg_size_bytes,
                        vg_free_bytes=vg_info.vg_free_bytes,
                        extent_size_bytes=vg_info.extent_size_bytes, lvs=())
    lvs = lvs_from_rows(rows, vg_name)
    first = rows[0]
    return VGReport(
        vg_name=vg_name,
        vg_size_bytes=_int_field(first, "vg_size", 0),
        vg_free_bytes=_int_field(first, "vg_free", 0),
        extent_size_bytes=_int_field(first, "vg_extent_size", 0),
        lvs=lvs,
    )


