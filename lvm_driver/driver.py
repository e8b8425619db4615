"""``ThinLVMDriver``: the reference driver, one LVM volume group with a thin pool.

Built only on driver_kit's public API. Every read of the VG (a stats refresh,
the admission read of a create, the read before a delete) costs no process
while the VG's metadata is unchanged (its PVs' metadata-area headers say so;
the thin pool's usage comes from device-mapper), else none either when the VG's
metadata text is read (``lvm_metadata_parse``), or one ``lvs --readonly`` (plus
a ``pvs`` when the VG's PVs are unknown, in doubt or changed; bounded by
``stats_timeout`` for stats: a slower one fails closed); every create adds one ``lvcreate``; every delete one ``lvremove``
(a name that is not there: one ``lvs`` of that name
more, LVM's own word that it is gone; a thick volume: one ``dd`` wiping it
first, as ``volume_clear`` says).

Pools: the thin pool is one pool (total = pool data size, free = data not
yet written, also bounded by metadata use). When ``lvm_offer_thick`` is set,
the VG's free extents form a second, thick-only pool named after the VG.
Provisioned capacity counts every thin volume in the pool in exact bytes,
operators' too; thin snapshots are reported apart (the driver's keep
``SNAPSHOT_TAG`` when LVM forgets their origin, so they stay snapshots).

Data safety: the driver tags what it creates (``VOLUME_TAG``,
``SNAPSHOT_TAG``) and removes only an LV carrying its tag under the expected
name, checked on a fresh report just before the ``lvremove``; anything else
(an operator's LV, the pool, another pool's LV) is refused with
``NotManaged``, a volume some LV has as origin (a snapshot) with
``VolumeBusy``. Each create, snapshot and copy also tags its LV with a marker
unique to the request (``REQUEST_TAG_PREFIX`` + random hex); after a failed
command a fresh report decides, and only an LV carrying that very marker is
removed; after one that exits 0, the LV must show the marker (read from the
metadata text, no process, when it is parsed; else one ``lvs`` of that LV), or
the create failed. The marker stays on the LV (removing it would cost an
``lvchange`` per create). A report that cannot be right (no thin pool,
inconsistent with itself) is a backend fault: pools down, creates and deletes
refused, the reason logged. Copies are grown to exactly the size the API returns.
Beside it: ``pool_facts`` (a report to the pools), ``wipe`` (``volume_clear``),
``manage`` (manage/unmanage, retype, revert) and ``tags``.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import uuid
from typing import Any, Callable, Sequence

from oslo_config import cfg

from driver_kit import (AlreadyExists, BackendConfig, BackendError, BackendUnavailable,
                        ConfigError, GiB, InvalidInput, NotFound, NotManaged, PoolFacts,
                        SetupError, SnapshotNotFound, VolumeBusy, VolumeDriver, VolumeInfo,
                        VolumeNotFound)
from lvm_driver.backends import BACKEND_OPTS, make_executor
from lvm_driver.commands.lvm import (LogicalVolume, VGReport, VolumeGroup, validate_lv_name,
                                     validate_vg_name)
from lvm_driver.policy.manage import ManageMixin
from lvm_driver.policy.pool_facts import implausible, is_snapshot, pool_facts, pools_down
from lvm_driver.policy.tags import REQUEST_TAG_PREFIX, SNAPSHOT_TAG, VOLUME_TAG
from lvm_driver.policy.wipe import WIPE_OPTS, wipe_thick
from lvm_driver.run.executor import LVMExecutor, LVMOutputError, LVMVolumeGroupNotFoundError

LOG = logging.getLogger(__name__)

__all__ = ["ThinLVMDriver", "LVM_OPTS", "list_opts", "VOLUME_TAG", "SNAPSHOT_TAG",
           "COMPLIANCE_HOOKS"]

#: how often the clean-up after a failed create is tried when it fails itself, and
#: the pause before the n-th retry (n x this): a backend that fails a command now and
#: then, or is slow for a moment, still gets the LV removed
CLEANUP_ATTEMPTS = 8
CLEANUP_PAUSE_S = 0.05

#: what ``ThinLVMDriver._kind`` calls the LVs the driver manages
_VOLUME = "a volume"
_SNAPSHOT = "a snapshot"

LVM_OPTS = [
    cfg.StrOpt("volume_group", default="cinder-volumes",
               help="Volume group holding the thin pool and the volumes."),
    cfg.StrOpt("lvm_thin_pool_name",
               help="Thin pool LV inside volume_group; defaults to '<volume_group>-pool' "
                    "as in Cinder's LVM driver."),
    cfg.BoolOpt("lvm_create_thin_pool", default=True,
                help="Create the thin pool in do_setup() when it is missing."),
    cfg.IntOpt("lvm_thin_pool_size_percent", default=95, min=1, max=99,
               help="Size of a thin pool created by do_setup(), as a percentage of the "
                    "volume group's free space (at most 99: LVM needs the rest for the "
                    "pool's metadata and its spare)."),
    cfg.BoolOpt("lvm_offer_thick", default=False,
                help="Offer thick (linear) volumes from the VG's free extents as a second, "
                     "thick-only pool chosen with provisioning:type=thick."),
    cfg.StrOpt("lvm_conf_file",
               help="An lvm.conf to use instead of the system's; LVM_SYSTEM_DIR is set to "
                    "its directory for every LVM command, so the file must be named "
                    "lvm.conf."),
    cfg.BoolOpt("lvm_metadata_parse",
                help="After a change to the volume group, read the stats and admission "
                     "report from the VG's metadata text on its PVs (checksum checked, no "
                     "LVM process) instead of running lvs; anything it does not fully "
                     "understand (raid, cache, vdo, mirrors, shared or exported VGs, a "
                     "missing PV, a merge under way) is still read through lvs. Unset: on "
                     "for real LVM, off for the simulator (whose faults are injected into "
                     "its lvs)."),
] + WIPE_OPTS + BACKEND_OPTS


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """Options for oslo-config-generator (namespace ``lvm_driver``)."""
    return [("backend", list(LVM_OPTS))]


def _gb_up(nbytes: int) -> int:
    return max(1, math.ceil(nbytes / GiB))


class ThinLVMDriver(ManageMixin, VolumeDriver):
    """A thin-pool LVM backend: stats from one read of the VG, admission on every create."""

    VENDOR_NAME = "Open Source"
    DRIVER_VERSION = "1.0.0"
    STORAGE_PROTOCOL = "iSCSI"
    OPTIONS = LVM_OPTS

    def __init__(self, configuration: BackendConfig | None = None, *,
                 executor: LVMExecutor | None = None, **kwargs: Any) -> None:
        super().__init__(configuration, **kwargs)
        conf = self.configuration
        self.vg_name = validate_vg_name(conf.get("volume_group"))
        self.pool_name = validate_lv_name(conf.get("lvm_thin_pool_name")
                                          or f"{self.vg_name}-pool")
        self.offer_thick = bool(conf.get("lvm_offer_thick", False))
        self.pool_size_percent = conf.get("lvm_thin_pool_size_percent", 95)
        conf_file = conf.get("lvm_conf_file")
        if conf_file and os.path.basename(conf_file) != "lvm.conf":
            raise ConfigError(
                f"[{conf.backend}] lvm_conf_file = {conf_file!r}: LVM only "
                f"reads a file named lvm.conf from LVM_SYSTEM_DIR (set to its directory); "
                f"name the file lvm.conf")
        self.executor = executor or make_executor(conf)
        parse = conf.get("lvm_metadata_parse")
        if parse is None:
            parse = conf.get("lvm_backend", "real") != "simulator"
        self.vg = VolumeGroup(self.vg_name, executor=self.executor,
                              parse_metadata=bool(parse))
        #: clean-ups that ran out of rounds: marker -> (name, tag), finished by the
        #: next create of this driver (under the admission lock, as the first try)
        self._unfinished: dict[str, tuple[str, str]] = {}
        self._unfinished_lock = threading.Lock()

    def backend_command_timeout_s(self) -> float | None:
        """Every LVM command is stopped at ``lvm_command_timeout``."""
        return float(self.configuration.get("lvm_command_timeout", 120.0))

    # ------------------------------------------------------------------ setup
    def do_setup(self) -> None:
        """Create the thin pool when it is missing and config allows it.

        One ``lvs`` (plus the ``vgs`` it needs when the VG has no LV at all),
        then the ``lvcreate`` of the pool if one is made.
        """
        try:
            report = self.vg.report()
        except LVMVolumeGroupNotFoundError:
            if self.executor.create_missing_vg is None:
                return  # check_for_setup_error says what to fix
            self.executor.create_missing_vg(self.vg_name)
            report = self.vg.report()
        if report.find_lv(self.pool_name) is None and \
                self.configuration.get("lvm_create_thin_pool", True):
            extent = report.extent_size_bytes
            size = report.vg_free_bytes * self.pool_size_percent // 100 // extent * extent
            LOG.info("creating thin pool %s/%s of %d bytes", self.vg_name, self.pool_name, size)
            self.vg.create_thin_pool(self.pool_name, size)

    def check_for_setup_error(self) -> None:
        """Raise ``SetupError`` saying what to fix when the VG or pool is unusable."""
        if not self.vg.vg_exists():
            raise SetupError(f"volume group {self.vg_name!r} not found: create it "
                             f"(vgcreate {self.vg_name} <device>) or set volume_group")
        if not self.vg.supports_thin():
            raise SetupError("this LVM has no thin provisioning support: install "
                             "thin-provisioning-tools and load the dm-thin-pool module")
        pool = self.vg.report().find_lv(self.pool_name)
        if pool is None:
            raise SetupError(f"thin pool {self.vg_name}/{self.pool_name} not found: create "
                             f"it (lvcreate -T -L <size> {self.vg_name}/{self.pool_name}) "
                             f"or set lvm_create_thin_pool = true")
        if not pool.is_thin_pool:
            raise SetupError(f"{self.vg_name}/{self.pool_name} is not a thin pool "
                             f"(lv_attr {pool.attr.raw!r}): set lvm_thin_pool_name")

    def validate_name(self, name: Any) -> str:
        """LVM's naming rules, checked before any command runs."""
        return validate_lv_name(name)

    # ------------------------------------------------------------------ facts
    def _read(self, timeout_s: float | None = None) -> VGReport:
        """A fresh report that can be right, or ``BackendUnavailable`` saying why not.

        Every decision (stats, admission, what a name is, what to delete)
        rests on a report that parses, names the configured VG and thin pool
        and is consistent with itself. ``timeout_s`` bounds the ``lvs``
        (default: ``lvm_command_timeout``).
        """
        try:
            report = self.vg.report(timeout_s=timeout_s)
            problem = implausible(report, self.pool_name)
        except LVMOutputError as exc:  # exited 0, printed what cannot be parsed
            problem = str(exc)
        if problem:  # never reused: the next read asks LVM again
            self.vg.forget_report()
            LOG.error("refusing the LVM report of %s: %s", self.vg_name, problem)
            raise BackendUnavailable(f"the LVM report of volume group {self.vg_name!r} "
                                     f"cannot be right: {problem}")
        return report

    def backend_read_pools(self) -> Sequence[PoolFacts]:
        """Every pool from ONE read of the volume group (``VolumeGroup.report``; each
        pool down, saying why, when the report cannot be right)."""
        conf = self.configuration
        try:  # a stats read past stats_timeout fails closed (never past the command's)
            report = self._read(min(conf.stats_timeout, self.executor.timeout_s))
        except BackendUnavailable as exc:
            return pools_down(self.vg_name, self.pool_name, offer_thick=self.offer_thick,
                              reason=str(exc))
        return pool_facts(report, self.vg_name, self.pool_name, offer_thick=self.offer_thick)

    def _info(self, lv: LogicalVolume) -> VolumeInfo:
        return VolumeInfo(name=lv.name, size_gb=_gb_up(lv.size_bytes),
                          size_bytes=lv.size_bytes,
                          pool_name=lv.pool_lv if lv.is_thin_volume else self.vg_name,
                          thin=lv.is_thin_volume)

    def _kind(self, lv: LogicalVolume) -> str:
        """What ``lv`` is to this driver: ``_VOLUME``, ``_SNAPSHOT`` or what else it is.

        The one place that decides which LVs the driver finds and copies as
        volumes or snapshots: thin LVs of its own pool (snapshot or volume as
        ``is_snapshot`` tells, the split the pool's stats make) and visible
        thick LVs (what the thick pool counts), whoever made them. Whether
        the driver may *remove* one is ``_owned``'s question.
        """
        if lv.is_hidden:
            return "an LVM-internal LV"
        if lv.is_thin_pool:
            if lv.name == self.pool_name:
                return "the driver's thin pool (removing it removes every volume in it)"
            return "a thin pool (removing it removes every volume in it)"
        if lv.is_thin_volume:
            if lv.pool_lv != self.pool_name:
                return f"a thin LV of thin pool {lv.pool_lv!r}, not of {self.pool_name!r}"
            return _SNAPSHOT if is_snapshot(lv) else _VOLUME
        if lv.is_thick:
            return _VOLUME
        if lv.is_cow_snapshot:
            return f"a COW snapshot of {lv.origin!r} (lvcreate -s -L), not a volume"
        return f"an LV of a type this driver does not manage (lv_attr {lv.attr.raw!r})"

    @staticmethod
    def _owned(lv: LogicalVolume, kind: str) -> bool:
        """True if the driver made ``lv`` as a ``kind``: only then may it remove it."""
        return (VOLUME_TAG if kind == _VOLUME else SNAPSHOT_TAG) in lv.tags

    def _find(self, name: str, kind: str) -> VolumeInfo | None:
        lv = self._read().find_lv(name)
        return self._info(lv) if lv is not None and self._kind(lv) == kind else None

    def backend_find_volume(self, name: str) -> VolumeInfo | None:
        return self._find(name, _VOLUME)

    def backend_find_snapshot(self, name: str) -> VolumeInfo | None:
        return self._find(name, _SNAPSHOT)

    def backend_device_path(self, name: str) -> str:
        """``/dev/<vg>/<lv>`` of one of the driver's volumes, activated when it is not.

        One live ``lvs`` of that LV (the kernel's word on its state), plus one
        ``lvchange -ay -K`` for an inactive LV (a clone LVM left flagged
        skip-activation, or a VG activated with ``-aay``).
        """
        lv = self.vg.lv_report(self.validate_name(name))
        if lv is None or self._kind(lv) != _VOLUME:
            raise VolumeNotFound(f"no volume {name!r}")
        if not lv.is_active:
            self.vg.activate(lv.name)
        return f"/dev/{self.vg_name}/{lv.name}"

    # ------------------------------------------------------------ operations
    def _create_cleanly(self, name: str, create: Callable[[tuple[str, ...]], None],
                        tag: str) -> None:
        """Run a create whose LV carries ``tag`` and a marker unique to this request.

        However it fails (a timeout: LVM may have made the LV before it was
        stopped; "already exists" too, which a crashed command may print after
        making it), a read *after* the failure decides: an LV ``name`` carrying
        this request's marker and ``tag`` is removed, anything else (made
        before, or by another request) is left alone. Clean-ups of earlier
        failures that ran out of rounds are finished first.
        """
        self._finish_unfinished()
        marker = f"{REQUEST_TAG_PREFIX}{uuid.uuid4().hex}"
        try:
            try:
                create((tag, marker))
            except AlreadyExists as exc:  # LVM's message is the whole argv
                raise AlreadyExists(f"{name!r} already exists in volume group "
                                    f"{self.vg_name!r}: nothing was created") from exc
            self._confirm_marked(name, tag, marker)
        except Exception:
            if not self._remove_marked(name, tag, marker):
                with self._unfinished_lock:
                    self._unfinished[marker] = (name, tag)
            raise

    def _confirm_marked(self, name: str, tag: str, marker: str) -> None:
        """Raise ``BackendError`` unless LV ``name`` now carries ``tag`` and this request's
        ``marker``: an exit code 0 alone does not prove the LV is this request's (a
        wrapper or a fault can mask a failed command while another request made it).

        With ``lvm_metadata_parse`` on, read from the VG report, which after the
        change comes from the metadata text (no process) and is reused by the next
        refresh; otherwise, or when that read fails, from one ``lvs`` of that LV.
        """
        lv: LogicalVolume | None = None
        if self.vg.parses_metadata:
            try:
                lv = self.vg.report().find_lv(name)
            except Exception:  # noqa: BLE001  (LVM's answer about the one name decides)
                LOG.warning("cannot read the report to confirm the create of %s/%s; "
                            "asking LVM about that LV", self.vg_name, name, exc_info=True)
        if lv is None:
            lv = self.vg.lv_report(name)
        if lv is not None and tag in lv.tags and marker in lv.tags:
            return
        found = ("LVM lists no such LV" if lv is None else
                 f"the LV lacks this request's marker {marker} (tags: "
                 f"{', '.join(sorted(lv.tags)) or 'none'}): another request made it, or "
                 f"the command did not apply as asked")
        LOG.error("create of %s/%s exited 0 but %s", self.vg_name, name, found)
        raise BackendError(f"LVM reported the create of {self.vg_name}/{name} done, but "
                           f"{found}: this create failed")

    def _remove_marked(self, name: str, tag: str, marker: str,
                       attempts: int = CLEANUP_ATTEMPTS) -> bool:
        """Remove LV ``name`` if it carries ``marker``; True once LVM's own answer
        about that one name (``lvs <vg>/<name>``: a report that exits 0 without the
        row is no proof it is gone) shows no such LV. A round that fails (a faulted
        or timed-out ``lvs`` or ``lvremove``) is tried again after a growing pause,
        up to ``attempts`` rounds; False when they ran out: the LV stays under the
        volume's name with the driver's tag, counted as provisioned."""
        for attempt in range(1, attempts + 1):
            try:  # done only when LVM says no LV of that name carries the marker
                lv = self.vg.lv_report(name)
                if lv is None or marker not in lv.tags or tag not in lv.tags:
                    return True
                LOG.warning("create of %s failed after LVM made it; removing it", name)
                self.vg.delete(name)
            except Exception:  # report the original failure, not the clean-up's
                LOG.exception("clean-up %d/%d of %s after a failed create failed; an LV "
                              "left behind carries tag %s", attempt, attempts, name, marker)
                if attempt < attempts:
                    time.sleep(CLEANUP_PAUSE_S * attempt)
        return False

    def _finish_unfinished(self) -> None:
        """One more round for each clean-up that ran out of rounds (nothing to do, no
        process, in the usual case); those LVM still fails stay for the next create,
        and the volume's own delete removes the LV anyway."""
        with self._unfinished_lock:
            pending = list(self._unfinished.items())
        for marker, (name, tag) in pending:
            if self._remove_marked(name, tag, marker, attempts=1):
                with self._unfinished_lock:
                    self._unfinished.pop(marker, None)

    def backend_create_volume(self, name: str, size_gb: int, *, pool_name: str,
                              thin: bool) -> None:
        size = size_gb * GiB
        if thin:
            self._create_cleanly(name, lambda tags: self.vg.create_thin_volume(
                name, size, pool=self.pool_name, tags=tags), VOLUME_TAG)
        else:
            self._create_cleanly(name, lambda tags: self.vg.create_thick_volume(
                name, size, tags=tags), VOLUME_TAG)

    def _delete(self, name: str, kind: str, not_found: NotFound) -> None:
        """Remove ``name`` only if the driver made it as a ``kind``: one read, one ``lvremove``.

        ``lvremove --force`` removes whatever it is given (a thin pool with
        all its volumes, an operator's LV, an origin with its COW snapshots),
        so a fresh report decides first; anything else is refused untouched.
        """
        report = self._read()
        lv = report.find_lv(name)
        if lv is None:
            self._confirm_absent(name)
            raise not_found
        what = self._kind(lv)
        where = f"logical volume {self.vg_name}/{name}"
        if what not in (_VOLUME, _SNAPSHOT):
            raise NotManaged(f"{where} is {what}: it is not managed by this driver, "
                             f"nothing was deleted")
        if what != kind:
            raise InvalidInput(f"{where} is {what}, not {kind}: nothing was deleted")
        if not self._owned(lv, kind):
            raise NotManaged(f"{where} is not managed by this driver (it lacks the tag "
                             f"{VOLUME_TAG if kind == _VOLUME else SNAPSHOT_TAG!r} the "
                             f"driver puts on what it creates): nothing was deleted")
        snapshots = self._snapshots_of(report, name)
        if snapshots:
            raise VolumeBusy(f"volume {name!r} has snapshots ({', '.join(snapshots)}): "
                             f"delete them first; nothing was deleted", snapshots)
        if lv.is_thick:
            wipe_thick(self.vg, lv, self.configuration)
        try:
            self.vg.delete(name)
        except NotFound as exc:  # gone since the lvs
            raise not_found from exc

    def _snapshots_of(self, report: VGReport, name: str) -> list[str]:
        """Every LV that depends on ``name`` as its origin: thin snapshots (the
        driver's or an operator's), COW snapshots (``lvremove`` of their origin
        removes them too) and thin LVs with ``name`` as external origin. A copy
        the driver made (a thin LV with the volume tag) is independent of it."""
        return sorted(lv.name for lv in report.lvs if lv.origin == name
                      and (not lv.is_thin_volume or is_snapshot(lv)))

    def _confirm_absent(self, name: str) -> None:
        """Unless LVM itself says there is no LV ``name``, raise ``BackendUnavailable``:
        a report that left out an existing LV must not make its delete a success."""
        try:
            lv = self.vg.lv_report(name)
        except Exception:  # no second opinion: the report is not reused either
            self.vg.forget_report()
            raise
        if lv is not None:
            self.vg.forget_report()  # it left out an LV: never reuse it
            reason = (f"the LVM report of volume group {self.vg_name!r} did not list "
                      f"{name!r}, which LVM lists on its own (a truncated report, or "
                      f"it was created meanwhile): nothing was deleted")
            LOG.error("%s", reason)
            raise BackendUnavailable(reason)

    def backend_delete_volume(self, name: str) -> None:
        self._delete(name, _VOLUME, VolumeNotFound(f"no volume {name!r}"))

    def backend_extend_volume(self, name: str, new_size_gb: int) -> None:
        self.vg.extend(name, new_size_gb * GiB)

    def backend_create_snapshot(self, name: str, volume: VolumeInfo) -> None:
        if not volume.thin:
            raise InvalidInput(f"volume {volume.name!r} is thick: this driver snapshots "
                               f"thin volumes only")
        self._create_cleanly(name, lambda tags: self.vg.create_thin_snapshot(
            name, volume.name, tags=tags), SNAPSHOT_TAG)

    def backend_delete_snapshot(self, name: str) -> None:
        self._delete(name, _SNAPSHOT, SnapshotNotFound(f"no snapshot {name!r}"))

    def _copy_of(self, name: str, source: VolumeInfo, size_gb: int) -> None:
        """A thin copy of ``source``, then grown to exactly ``size_gb`` GiB if it is smaller
        (a copy of a 500 MiB LV at the default 1 GiB is 1 GiB, the size the API returns)."""
        if not source.thin:
            raise InvalidInput(f"{source.name!r} is thick: this driver copies thin "
                               f"volumes only")

        def copy(tags: tuple[str, ...]) -> None:  # one clean-up for both steps
            self.vg.create_thin_snapshot(name, source.name, tags=tags, activate=True)
            if size_gb * GiB > source.size_bytes:
                self.vg.extend(name, size_gb * GiB)

        self._create_cleanly(name, copy, VOLUME_TAG)

    def backend_create_volume_from_snapshot(self, name: str, snapshot: VolumeInfo,
                                            size_gb: int) -> None:
        self._copy_of(name, snapshot, size_gb)

    def backend_clone_volume(self, name: str, source: VolumeInfo, size_gb: int) -> None:
        self._copy_of(name, source, size_gb)


# what ``driver-kit check`` uses to certify the driver against LVM itself (found by
# the harness as this module's COMPLIANCE_HOOKS)
from lvm_driver.compliance.hooks import COMPLIANCE_HOOKS  # noqa: E402  (it needs nothing above)
