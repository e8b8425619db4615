"""A brick-style wrapper of one LVM volume group: its commands.

A read of the VG's state (``VolumeGroup.report``) is reused while the VG's
metadata is unchanged (``lvm_driver.read.report_cache``), else built from the VG's
metadata text (``lvm_driver.read.vg_metadata``, when ``parse_metadata``) or from one
``lvs`` (through the lvm shell where there is one, ``lvm_driver.run.read_session``),
which ``lvm_driver.read.report`` parses into typed, immutable records; every change is
one LVM process with an argv list. Names, tags and sizes are validated
(``lvm_driver.run.names``) before any process starts. Policy (which pool, how much
room, what a name means) belongs to the driver on top, not here. The names
of the report and the naming rules are re-exported, so ``lvm_driver.commands.lvm`` stays
the one import for users of the wrapper.
"""

from __future__ import annotations

import re
from typing import Any, Final

from driver_kit.exceptions import InvalidInput

from lvm_driver.commands import lvm_argv
from lvm_driver.read.mda import Fingerprint
from lvm_driver.read.report import (REPORT_FIELDS, VG_FIELDS, LogicalVolume, LVAttr,
                                    LVNotFoundError, VGInfo, VGReport, gc_paused, load_rows,
                                    lvs_from_rows, parse_lvs_report, parse_vgs_report,
                                    report_from_rows)
from lvm_driver.read.report_cache import (CacheStats, DeviceSources, ReportCache,
                                          parse_pvs_report, sources_of, with_pool_usage)
from lvm_driver.run.executor import (
    LVMAlreadyExistsError, LVMCommandError, LVMError, LVMExecutor,
    LVMNotFoundError, LVMOutputError, LVMTimeoutError,
    LVMVolumeGroupNotFoundError,
)
from lvm_driver.run.names import (NAME_MAX_LENGTH, size_argument, validate_lv_name,
                                  validate_tag, validate_vg_name)

__all__ = [
    "VolumeGroup", "VGReport", "VGInfo", "LogicalVolume", "LVAttr",
    "LVNotFoundError", "parse_lvs_report", "parse_vgs_report",
    "validate_lv_name", "validate_vg_name", "validate_tag", "size_argument",
    "NAME_MAX_LENGTH", "REPORT_FIELDS", "VG_FIELDS",
    "LVMError", "LVMCommandError", "LVMNotFoundError",
    "LVMVolumeGroupNotFoundError", "LVMAlreadyExistsError", "LVMTimeoutError",
    "LVMOutputError",
]

# ---------------------------------------------------------------------------
# The volume group


class VolumeGroup:
    """One LVM volume group: a report of everything in it, and its commands.

    No I/O in the constructor. Each method starts exactly one LVM process,
    except ``report``: none while the VG's metadata is unchanged, else one
    ``lvs`` (plus ``pvs`` when the PVs are unknown, in doubt or changed, and
    ``vgs`` when the VG has no LV at all). ``sources``: how PV headers and a
    thin pool's device-mapper status are read (default: the executor's
    runner's, else the kernel's; see ``report_cache``). ``parse_metadata``: after
    a change, build the report from the VG's metadata text read from its PVs
    (``vg_metadata``) and run ``lvs`` only for what that does not understand. Names
    are validated before any process starts; LVM's failures arrive as the
    executor's typed errors (``LVMNotFoundError`` is also a NotFound,
    ``LVMAlreadyExistsError`` also an AlreadyExists).
    """

    REPORT_FIELDS: Final = REPORT_FIELDS

    def __init__(self, vg_name: str, *, executor: LVMExecutor,
                 sources: DeviceSources | None = None, parse_metadata: bool = False):
        self._vg_name = validate_vg_name(vg_name)
        self._executor = executor
        self._cache = ReportCache(sources if sources is not None else sources_of(executor),
                                  parse_metadata=parse_metadata)

    @property
    def vg_name(self) -> str:
        return self._vg_name

    @property
    def executor(self) -> LVMExecutor:
        return self._executor

    def _write(self, argv: list[str]) -> None:
        self._executor.run(argv, readonly=False)

    # -- reads ---------------------------------------------------------------

    def report_argv(self) -> list[str]:
        """The one ``lvs`` command behind a full ``report()``: metadata only.

        ``--readonly`` disables activation, so LVM asks the kernel nothing (no
        device-mapper call per LV): the state and open flags of ``lv_attr`` are
        X (unknown) and no percentage is printed. The thin pools' usage comes
        from device-mapper (``report_cache.with_pool_usage``); the live state of
        one LV from ``lv_report``. The VG's PV and metadata-area counts ride
        along (``PV_CHECK_FIELDS``): they say whether the PVs learned are still
        all of the VG's.
        """
        return lvm_argv.report(self._vg_name)

    def live_report_argv(self, target: str | None = None) -> list[str]:
        """``lvs`` asking the kernel too (state, open, data%) of ``target`` (an LV
        path; default the whole VG)."""
        if target is None:
            return lvm_argv.live_report(self._vg_name)
        vg, _, name = target.partition("/")
        return lvm_argv.live_report(vg, name)

    def pvs_argv(self) -> list[str]:
        """The ``pvs`` naming the PVs (and their metadata areas) of the VG."""
        return lvm_argv.pv_report()

    @property
    def parses_metadata(self) -> bool:
        """Whether a report after a change is read from the VG's metadata text first."""
        return self._cache.parse_metadata

    @property
    def report_cache_stats(self) -> CacheStats:
        """Reports reused (hits), read anew after a change (misses) or for a doubt."""
        return self._cache.stats

    def forget_report(self, *, ask_lvm: bool = True) -> None:
        """Reuse nothing until the next full report: one the caller found wrong, read
        again through ``lvs`` (``ask_lvm``); else as after a metadata change."""
        if ask_lvm:
            self._cache.forget()
        else:
            self._cache.clear()

    def report(self, *, timeout_s: float | None = None) -> VGReport:
        """Everything about the VG: reused while its metadata is unchanged (no
        process), else read from its metadata text (``parse_metadata``, no process)
        or one ``lvs --readonly`` (and a ``pvs`` when the VG's PVs are
        not known, in doubt or changed); each thin pool's usage from device-mapper
        either way.

        A missing VG raises ``LVMVolumeGroupNotFoundError`` (a NotFound);
        ``timeout_s`` bounds each process (default: the executor's). Any failure
        forgets the reused report.
        """
        try:
            found, fingerprint, sources = self._cache.lookup()
            if found is None:
                self._cache.clear()
                found = self._cache.parsed(fingerprint, self._vg_name) \
                    or self._full_report(fingerprint, timeout_s)
            return with_pool_usage(found[0], found[1], sources,
                                   lambda pool: self.lv_report(pool, timeout_s=timeout_s))
        except BaseException:
            self._cache.clear()
            raise

    def _full_report(self, fingerprint: Fingerprint | None,
                     timeout_s: float | None) -> tuple[VGReport, tuple[int, ...]]:
        """The ``lvs``, after the fingerprint it is kept under was read (a commit in
        between only makes the next refresh a miss); ``pvs`` first when the PVs are
        unknown or in doubt, and after it when the ``lvs`` counts other PVs than
        those learned (then nothing is kept: the next read is a full one)."""
        learned = fingerprint is None
        if learned:
            self._learn_pvs(timeout_s)
            fingerprint = self._cache.fingerprint()
        report, first_row = self._lvs(self.report_argv(), timeout_s)
        if not self._cache.same_pvs(first_row):
            if not learned:
                self._learn_pvs(timeout_s)
            fingerprint = None
        return report, self._cache.store(fingerprint, report)

    def _learn_pvs(self, timeout_s: float | None) -> None:
        result = self._executor.run(self.pvs_argv(), readonly=True, timeout_s=timeout_s)
        self._cache.learn(parse_pvs_report(result.stdout, self._vg_name))

    def live_report(self, *, timeout_s: float | None = None) -> VGReport:
        """The VG from one ``lvs`` that asks the kernel about every LV (state, open,
        data%): never reused, for the rare listings that need each LV's live state."""
        return self._lvs(self.live_report_argv(), timeout_s)[0]

    def _lvs(self, argv: list[str],
             timeout_s: float | None) -> tuple[VGReport, dict[str, Any] | None]:
        """The report of one ``lvs`` (plus ``vgs`` for a VG without LVs), and its
        first row as printed (None without rows)."""
        result = self._executor.run(argv, readonly=True, timeout_s=timeout_s)
        with gc_paused():
            rows = load_rows(result.stdout, "lv")
            if rows:
                return report_from_rows(rows, self._vg_name, None), rows[0]
        return report_from_rows(rows, self._vg_name, self.vg_info(timeout_s=timeout_s)), None

    def lv_report(self, name: str, *, timeout_s: float | None = None) -> LogicalVolume | None:
        """LV ``name`` alone, live (state, open, data%), from ``lvs <vg>/<name>``; None
        when LVM says it does not exist. Never reused.

        LVM's own answer about one name, a second opinion on a report that
        did not list it: an ``lvs`` exiting 0 without that one row raises
        ``LVMOutputError``; a missing VG raises ``LVMVolumeGroupNotFoundError``.
        """
        argv = lvm_argv.live_report(self._vg_name, name)
        try:
            result = self._executor.run(argv, readonly=True, timeout_s=timeout_s)
        except LVMVolumeGroupNotFoundError:
            raise
        except LVMNotFoundError:
            return None
        rows = load_rows(result.stdout, "lv")
        lvs = lvs_from_rows(rows, self._vg_name)
        if [lv.name for lv in lvs] != [name]:
            raise LVMOutputError(f"lvs {self._vg_name}/{name} exited 0 listing "
                                 f"{[lv.name for lv in lvs]!r}, not that one LV")
        return lvs[0]

    def vg_info(self, *, timeout_s: float | None = None) -> VGInfo:
        """The VG's size, free space and extent size from ``vgs`` (setup checks)."""
        argv = lvm_argv.vg_report(self._vg_name)
        result = self._executor.run(argv, readonly=True, timeout_s=timeout_s)
        return parse_vgs_report(result.stdout, self._vg_name)

    def vg_exists(self) -> bool:
        """True if LVM knows the VG; other failures propagate."""
        try:
            self.vg_info()
        except LVMVolumeGroupNotFoundError:
            return False
        return True

    def supports_thin(self) -> bool:
        """True if this LVM build offers thin pools and thin volumes."""
        result = self._executor.run(lvm_argv.lvm_query("segtypes"), readonly=True)
        segtypes = {line.strip() for line in result.stdout.splitlines()}
        return {"thin-pool", "thin"} <= segtypes

    def lvm_version(self) -> tuple[int, int, int]:
        """LVM's own version, e.g. (2, 3, 16), from ``lvm version``."""
        result = self._executor.run(lvm_argv.lvm_query("version"), readonly=True)
        match = re.search(r"LVM version:\s*(\d+)\.(\d+)\.(\d+)", result.stdout)
        if not match:
            raise LVMOutputError(
                f"cannot find the LVM version in {result.stdout.strip()[:80]!r}")
        return (int(match[1]), int(match[2]), int(match[3]))

    # -- writes (each one LVM process) -----------------------------------------

    def create_thin_pool(self, name: str, size_bytes: int, *,
                         metadata_size_bytes: int | None = None) -> None:
        """Create a thin pool of ``size_bytes`` of data (plus LVM's metadata).

        Takes VG extents for data, metadata and (for the VG's first pool) a
        metadata spare. Not idempotent: an existing name raises AlreadyExists.
        """
        self._write(lvm_argv.create_thin_pool(self._vg_name, name, size_bytes,
                                              metadata_size_bytes=metadata_size_bytes))

    def create_thin_volume(self, name: str, size_bytes: int, *, pool: str,
                           tags: tuple[str, ...] | list[str] = ()) -> None:
        """Create a thin volume of virtual ``size_bytes`` in ``pool`` (active).

        LVM allows the pool to be over-provisioned; admission is the caller's.
        """
        self._write(lvm_argv.create_thin(self._vg_name, name, size_bytes, pool=pool,
                                         tags=tags))

    def create_thick_volume(self, name: str, size_bytes: int, *,
                            tags: tuple[str, ...] | list[str] = ()) -> None:
        """Create a linear LV from the VG's free extents (active)."""
        self._write(lvm_argv.create_thick(self._vg_name, name, size_bytes, tags=tags))

    def create_thin_snapshot(self, name: str, origin: str, *,
                             tags: tuple[str, ...] | list[str] = (),
                             activate: bool = False) -> None:
        """Snapshot thin volume ``origin`` as thin volume ``name`` (no data copied).

        ``activate=False``: flagged skip-activation and left inactive (a
        snapshot). ``activate=True``: the flag is cleared and the LV activated
        in the same lvcreate (a volume created from a snapshot, or a clone).
        """
        self._write(lvm_argv.create_snapshot(self._vg_name, name, origin, tags=tags,
                                             activate=activate))

    def extend(self, name: str, new_size_bytes: int) -> None:
        """Grow LV ``name`` to ``new_size_bytes`` (rounded up to extents).

        Idempotent: when the LV already has that size it succeeds silently.
        A smaller size fails (LVM never shrinks here).
        """
        try:
            self._write(lvm_argv.extend(self._vg_name, name, new_size_bytes))
        except LVMCommandError as exc:
            if "matches existing size" in exc.stderr:
                return
            raise

    def delete(self, name: str) -> None:
        """Remove LV ``name`` without prompting (``lvremove --force``).

        Careful: removing a thin pool removes all its thin volumes too. A
        missing LV raises LVMNotFoundError (the caller decides idempotency).
        """
        self._write(lvm_argv.remove(self._vg_name, name))

    def rename(self, old: str, new: str) -> None:
        """Rename LV ``old`` to ``new`` (AlreadyExists if ``new`` is taken)."""
        self._write(lvm_argv.rename(self._vg_name, old, new))

    def activate(self, name: str) -> None:
        """Activate LV ``name`` even if flagged skip-activation (``-ay -K``).

        Idempotent: activating an active LV succeeds.
        """
        self._write(lvm_argv.activate(self._vg_name, name))

    def deactivate(self, name: str) -> None:
        """Deactivate LV ``name`` (``lvchange -an``); an open LV refuses."""
        self._write(lvm_argv.deactivate(self._vg_name, name))

    def merge_snapshot(self, name: str) -> None:
        """Merge snapshot ``name`` into its origin (``lvconvert --merge``); the snapshot
        LV goes away. LVM defers the merge to the origin's next activation while the
        origin is open."""
        self._write(lvm_argv.merge(self._vg_name, name))

    def zero(self, name: str, nbytes: int, *, timeout_s: float) -> None:
        """Overwrite the first ``nbytes`` of active LV ``name`` with zeros.

        ``dd`` as Cinder's ``volume_utils.clear_volume`` runs it (direct I/O,
        ``count`` in bytes), plus ``conv=fdatasync`` so the zeros are on the
        device, not in a cache, when it returns. Not an LVM command: it runs
        without LVM's variables, so a root helper sees plain ``dd``.
        """
        argv = lvm_argv.zero(self._vg_name, name, nbytes)
        self._executor.run(argv, readonly=False, timeout_s=timeout_s, lvm_env=False)

    def add_tags(self, name: str, tags: tuple[str, ...] | list[str]) -> None:
        """Add tags to LV ``name`` (tags already present are kept once)."""
        if _tags(tags):
            self._write(lvm_argv.add_tags(self._vg_name, name, tags))

    def remove_tags(self, name: str, tags: tuple[str, ...] | list[str]) -> None:
        """Remove tags from LV ``name`` (absent tags are ignored by LVM)."""
        if _tags(tags):
            self._write(lvm_argv.remove_tags(self._vg_name, name, tags))


def _tags(tags: tuple[str, ...] | list[str]) -> list[str]:
    if isinstance(tags, str):
        raise InvalidInput("tags must be a sequence of tags, not one string")
    return [validate_tag(tag) for tag in tags]

