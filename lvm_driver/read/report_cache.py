"""The read path's reuse of the last full report while the VG's metadata is unchanged.

Before each report, the VG's metadata fingerprint (``lvm_driver.read.mda``: each PV's
label and metadata-area headers, one small read per PV) is read; when it equals
the one read just before the last report kept, that report's LVs are reused,
with no LVM process. Otherwise (a miss) the report is built from the metadata
text the fingerprint points at (``parsed``, with ``parse_metadata``: no process
either; anything not understood goes on to LVM) or the caller runs ``lvs``.
Reused or fresh, every thin pool's data and metadata usage is taken from its
device-mapper status (``dm_status``: two ioctls, no process), so every path gives
the same figures and the bulk ``lvs`` never asks the kernel about each LV
(``--readonly``); a process not allowed to ask device-mapper asks LVM about the
pool alone. Any doubt about the fingerprint means a full report; a failed read,
or one the driver found wrong (``forget``: then the next comes from ``lvs``, not
the text), is never reused.

The seam: ``DeviceSources`` (how header blocks and pool status are read). An
executor's runner that has ``device_sources()`` supplies its own (the simulator;
the privileged daemon, whose ``prefetch`` reads a refresh's headers and the kept
report's pool statuses in one round trip); otherwise the kernel's:
``mda.read_block`` and ``dm_status.thin_pool_status``.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from lvm_driver.read import mda, vg_metadata
from lvm_driver.read.report import LogicalVolume, VGReport, load_rows
from lvm_driver.read.vg_incremental import IncrementalReader
from lvm_driver.run.executor import LVMError, LVMExecutor

LOG = logging.getLogger(__name__)

__all__ = ["PoolStatus", "DeviceSources", "PoolStatusError", "CacheStats", "ReportCache",
           "PV_FIELDS", "sources_of", "parse_pvs_report", "with_pool_usage"]

#: the fields of the ``pvs`` that names the VG's PVs
PV_FIELDS = ("pv_name", "pv_uuid", "pv_fmt", "pv_mda_count", "vg_name")
#: the VG fields a full ``lvs`` adds to say whether the PVs learned are still the VG's
PV_CHECK_FIELDS = ("pv_count", "vg_mda_count")


class PoolStatus(Protocol):
    """What the read path uses of ``dm_status.ThinPoolStatus``."""

    mode: str

    @property
    def data_percent(self) -> float: ...

    @property
    def metadata_percent(self) -> float: ...


def _kernel_thin_pool_status(vg_name: str, pool_name: str) -> PoolStatus | None:
    from lvm_driver.read import dm_status  # the kernel's answer; imported where it is used
    return dm_status.thin_pool_status(vg_name, pool_name)


@dataclass(frozen=True, slots=True)
class DeviceSources:
    """How the read path reads besides LVM: PV header blocks, and a thin pool's status
    (None when the pool has no active device)."""

    read_block: mda.BlockReader = mda.read_block
    thin_pool_status: Callable[[str, str], PoolStatus | None] = _kernel_thin_pool_status
    #: where each read costs a round trip (the privileged daemon): a refresh's header
    #: reads ((path, offset, length) each) and pool statuses ((vg, pool) each) in one
    #: go, giving sources that answer those very reads; None: each read on its own
    prefetch: Callable[[tuple[tuple[str, int, int], ...], tuple[tuple[str, str], ...]],
                       "DeviceSources"] | None = None


def sources_of(executor: LVMExecutor) -> DeviceSources:
    """The runner's own sources (``runner.device_sources()``) or the kernel's."""
    provide = getattr(executor.runner, "device_sources", None)
    return provide() if callable(provide) else DeviceSources()


class PoolStatusError(LVMError):
    """Device-mapper could not say how full a thin pool is (the report fails)."""


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Refreshes that reused the report, that read it anew after a metadata change (or
    with nothing to reuse), and that read it anew for a doubt about the fingerprint;
    of the misses, those read from the metadata text itself (``parsed``) and those
    whose text was not understood, so ``lvs`` read them (``unparsed``); of the parsed,
    those where only the LV sections that changed were parsed (``incremental``)."""

    hits: int
    misses: int
    doubts: int
    parsed: int = 0
    unparsed: int = 0
    incremental: int = 0


def parse_pvs_report(text: str, vg_name: str) -> list[tuple[str, int]]:
    """(path, metadata-area count) of each PV of ``vg_name`` in a ``pvs`` of PV_FIELDS;
    empty (reuse nothing) for anything unexpected: a PV listed twice, a format other than
    LVM2 text, a PV LVM cannot find."""
    pvs: list[tuple[str, int]] = []
    for row in load_rows(text, "pv"):
        if not isinstance(row, dict) or row.get("vg_name") != vg_name:
            continue
        name, fmt, count = row.get("pv_name"), row.get("pv_fmt"), row.get("pv_mda_count")
        if not (isinstance(name, str) and name.startswith("/") and fmt == "lvm2"
                and isinstance(count, str) and count.isdigit()):
            return []
        pvs.append((name, int(count)))
    if len({name for name, _ in pvs}) != len(pvs):
        return []
    return pvs


#: each thin pool's row index and name in a report
_PoolRows = tuple[tuple[int, str], ...]


def _pool_rows(report: VGReport) -> _PoolRows:
    """Each thin pool's row index and name."""
    return tuple((index, lv.name) for index, lv in enumerate(report.lvs) if lv.is_thin_pool)


def _pool_rows_after(report: VGReport, rows: _PoolRows, before: tuple[LogicalVolume, ...],
                     after: tuple[LogicalVolume, ...]) -> tuple[_PoolRows] | None:
    """The pools' rows after a change that left the same thin pools (a pool's row
    redone, as for its transaction id after a thin create, leaves it): each moved by
    at most as many rows as came and went (looked for there, not in 100,000 rows)."""
    if {lv.name for lv in before if lv.is_thin_pool} != {
            lv.name for lv in after if lv.is_thin_pool}:
        return None
    lvs, reach = report.lvs, len(before) + len(after)
    moved = []
    for index, name in rows:
        window = range(max(0, index - reach), min(len(lvs), index + reach + 1))
        found = next((at for at in window if lvs[at].name == name), None)
        if found is None:
            return None
        moved.append((found, name))
    return (tuple(moved),)


def with_pool_usage(report: VGReport, pool_indexes: tuple[int, ...],
                    sources: DeviceSources,
                    ask_lvm: Callable[[str], LogicalVolume | None]) -> VGReport:
    """``report`` with each thin pool's data and metadata percent from device-mapper
    (None: no active device, or a failed pool). A process not allowed to ask
    device-mapper (a driver running LVM through a root helper) asks LVM about the
    pool alone instead (``ask_lvm``: a live ``lvs`` of that one LV), logged once."""
    global _warned_denied
    replaced = {}
    for index in pool_indexes:
        pool = report.lvs[index]
        try:
            status = sources.thin_pool_status(report.vg_name, pool.name)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM):
                raise PoolStatusError(f"device-mapper status of thin pool "
                                      f"{report.vg_name}/{pool.name} failed: {exc}") from exc
            if not _warned_denied:
                _warned_denied = True
                LOG.warning("not allowed to ask device-mapper about thin pool %s/%s (%s): "
                            "asking LVM about the pool on each read instead",
                            report.vg_name, pool.name, exc)
            live = ask_lvm(pool.name)
            if live is None:
                raise PoolStatusError(f"thin pool {report.vg_name}/{pool.name} is gone "
                                      f"since the report") from exc
            replaced[index] = pool._replace(data_percent=live.data_percent,
                                            metadata_percent=live.metadata_percent)
            continue
        data = metadata = None
        if status is not None and status.mode != "Fail":
            data, metadata = status.data_percent, status.metadata_percent
            if not (0 <= data <= 100 and 0 <= metadata <= 100):  # NaN too
                data = metadata = None
        replaced[index] = pool._replace(data_percent=data, metadata_percent=metadata)
    return report.with_lvs(replaced)


_warned_denied = False


@dataclass
class _Entry:
    fingerprint: mda.Fingerprint
    report: VGReport
    pool_indexes: tuple[int, ...]


@dataclass
class ReportCache:
    """The last full report and the fingerprint read just before it; thread-safe."""

    sources: DeviceSources
    #: on a miss, build the report from the VG's metadata text before asking ``lvs``
    parse_metadata: bool = False
    _pvs: tuple[tuple[str, int], ...] = ()
    _entry: _Entry | None = None
    #: the next miss is read through lvs, not the text (the last report was refused)
    _ask_lvm: bool = False
    _counts: dict[str, int] = field(default_factory=lambda: dict(
        hits=0, misses=0, doubts=0, parsed=0, unparsed=0))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: the last text read and its sections, so the next one parses only what changed
    _reader: IncrementalReader = field(default_factory=IncrementalReader)

    @property
    def stats(self) -> CacheStats:
        with self._lock:
            counts = dict(self._counts)
        return CacheStats(**counts, incremental=self._reader.stats.incremental)

    def fingerprint(self) -> mda.Fingerprint | None:
        """The fingerprint of the PVs learned last (None: none learned, or a doubt)."""
        with self._lock:
            pvs = self._pvs
        return mda.vg_fingerprint(pvs, read=self.sources.read_block) if pvs else None

    def lookup(self) -> tuple[tuple[VGReport, tuple[int, ...]] | None,
                              mda.Fingerprint | None, DeviceSources]:
        """The reusable report and its pools' indexes (None: counted as a miss or a
        doubt), the fingerprint read now (None: unknown PVs, or a doubt), and the
        sources to read the pools' usage from (with a reused report, what was read
        along with the fingerprint where the sources batch their reads)."""
        with self._lock:
            entry, pvs = self._entry, self._pvs
        sources = self._refresh_sources(entry, pvs)
        fingerprint = mda.vg_fingerprint(pvs, read=sources.read_block) if pvs else None
        with self._lock:
            if entry is not None and fingerprint == entry.fingerprint:
                self._counts["hits"] += 1
                return (entry.report, entry.pool_indexes), fingerprint, sources
            self._counts["doubts" if pvs and fingerprint is None else "misses"] += 1
        return None, fingerprint, self.sources

    def _refresh_sources(self, entry: _Entry | None,
                         pvs: tuple[tuple[str, int], ...]) -> DeviceSources:
        """The sources, with the PVs' first blocks and the kept report's pool statuses
        read in one go when they batch reads."""
        if self.sources.prefetch is None or not pvs:
            return self.sources
        pools = () if entry is None else tuple(
            (entry.report.vg_name, entry.report.lvs[index].name)
            for index in entry.pool_indexes)
        return self.sources.prefetch(
            tuple((path, 0, mda.FIRST_READ_BYTES) for path, _ in pvs), pools)

    def parsed(self, fingerprint: mda.Fingerprint | None,
               vg_name: str) -> tuple[VGReport, tuple[int, ...]] | None:
        """With ``parse_metadata``, the report built from the metadata text the
        fingerprint points at, kept for reuse, and its pools' indexes; None (counted
        when tried) when off, without a fingerprint, right after ``forget``, or on
        anything not understood."""
        with self._lock:
            ask_lvm, self._ask_lvm = self._ask_lvm, False
        if ask_lvm or not self.parse_metadata or fingerprint is None:
            return None
        try:
            report = vg_metadata.report_from_pvs(fingerprint, vg_name,
                                                 read=self.sources.read_block,
                                                 build=self._reader.report)
        except Exception as exc:  # noqa: BLE001 - the text is the disk's, not ours
            if isinstance(exc, (vg_metadata.MetadataUnsupported, mda.HeaderError, OSError)):
                LOG.debug("metadata text of %s not used, reading it through lvs: %s",
                          vg_name, exc)
            else:  # a text the parser does not expect: a bug to report, not a failure
                LOG.warning("metadata text of %s not understood (%s), reading it through "
                            "lvs", vg_name, type(exc).__name__, exc_info=True)
            with self._lock:
                self._counts["unparsed"] += 1
            return None
        with self._lock:
            self._counts["parsed"] += 1
        return report, self.store(fingerprint, report)

    def same_pvs(self, row: dict[str, object] | None) -> bool:
        """Whether a full ``lvs`` row's PV and metadata-area counts (PV_CHECK_FIELDS) are
        those of the PVs learned: False for anything else, or no row."""
        with self._lock:
            pvs = self._pvs
        if row is None or not pvs:
            return False
        counts = (str(len(pvs)), str(sum(count for _, count in pvs)))
        return tuple(row.get(name) for name in PV_CHECK_FIELDS) == counts

    def learn(self, pvs: list[tuple[str, int]]) -> None:
        """The VG's PVs as LVM named them just now (empty: reuse nothing)."""
        with self._lock:
            self._pvs = tuple(pvs)

    def store(self, fingerprint: mda.Fingerprint | None, report: VGReport) -> tuple[int, ...]:
        """Keep ``report`` for reuse while the fingerprint stays ``fingerprint`` (read
        before the report was); returns its pools' indexes."""
        located = report.summary("thin-pool-rows", _pool_rows, _pool_rows_after)
        indexes = tuple(index for index, _ in located)
        with self._lock:
            self._entry = None if fingerprint is None else _Entry(fingerprint, report,
                                                                  indexes)
        return indexes

    def clear(self) -> None:
        """Reuse nothing until the next successful full report."""
        with self._lock:
            self._entry = None

    def forget(self) -> None:
        """Reuse nothing, and read the next report through ``lvs`` (LVM's own answer,
        not the text again): the caller found the last one wrong."""
        with self._lock:
            self._entry = None
            self._ask_lvm = True
        self._reader.reset()

