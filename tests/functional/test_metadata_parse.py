"""The report read from the VG's metadata text on its PVs is, field by field, the one
``lvs --readonly`` prints, through many VG states made by an operator's LVM commands:
thin pools, thin volumes and snapshots, thick LVs, a COW snapshot, tags, inactive
LVs, skip-activation, renames, extends, removes, names with - _ + and dots. On the
simulator everywhere (the commands it emulates), on real LVM in the VM lane.

With ``DK_CAPTURE_METADATA_DIR`` set, each state's metadata text, its ``vgcfgbackup``
file and its ``lvs`` output are saved there (tests/unit/data/vg_metadata holds such
captures from real LVM, for the host's parser tests).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lvm_driver.read import mda, vg_metadata
from lvm_driver.read.report import VGReport, load_rows, parse_lvs_report
from lvm_driver.read.report_cache import PV_CHECK_FIELDS, ReportCache, parse_pvs_report, sources_of
from lvm_driver.read.vg_incremental import IncrementalReader
from lvm_driver.run.executor import LVMCommandError

#: each step: its name, "real" when the simulator does not emulate it, "optional" when
#: an older LVM may refuse it, then the operator's command ({vg}: the VG)
_STEPS = """
thin: lvcreate -T -V 1g -n vol-a --addtag t1 {vg}/pool
thin-snapshot: lvcreate -s -n snap_a+1 {vg}/vol-a
snapshot-of-snapshot: lvcreate -s -n snap.b {vg}/snap_a+1
thick: lvcreate -L 64m -n thick.1 --addtag zz --addtag a_a {vg}
cow-snapshot real: lvcreate -s -L 32m -n cow-snap {vg}/thick.1
inactive: lvchange -an {vg}/vol-a
skip-activation: lvcreate -T -V 512m -n skip_me -ky {vg}/pool
rename: lvrename {vg} vol-a vol-renamed
extend-thin: lvextend -L 2g {vg}/vol-renamed
thick-x: lvcreate -L 8m -n lv-x {vg}
thick-y: lvcreate -L 8m -n lv_y {vg}
extend-two-segments: lvextend -L 16m {vg}/lv-x
read-only real: lvchange -pr {vg}/lv_y
alloc-contiguous real optional: lvchange --alloc contiguous {vg}/lv_y
deactivate-y real: lvchange -an {vg}/lv_y
fixed-minor real optional: lvchange -My --major 253 --minor 222 -y {vg}/lv_y
addtag: lvchange --addtag b+c {vg}/vol-renamed
deltag: lvchange --deltag t1 {vg}/vol-renamed
second-pool: lvcreate -T -L 256m -Zn {vg}/pool2
thin-in-unzeroed-pool: lvcreate -T -V 64m -n v2 {vg}/pool2
remove-cow real: lvremove -f {vg}/cow-snap
remove-snapshot: lvremove -f {vg}/snap.b
remove-second-pool: lvremove -f {vg}/pool2
remove-thick: lvremove -f {vg}/lv-x
"""
STEPS: list[tuple[str, tuple[str, ...], bool, bool]] = [
    (words[0], tuple(command.split()), "real" in words, "optional" in words)
    for head, command in (line.split(": ") for line in _STEPS.strip().splitlines())
    for words in [head.split()]]


def _lvs_report(lab) -> tuple[VGReport, dict]:
    argv = lab.vg.report_argv()
    stdout = lab.lvm(*argv).stdout
    rows = load_rows(stdout, "lv")
    info = None if rows else lab.vg.vg_info()
    return parse_lvs_report(stdout, lab.vg_name, vg_info=info), (rows[0] if rows else {})


def _fields(report: VGReport) -> dict:
    return {"vg": (report.vg_size_bytes, report.vg_free_bytes, report.extent_size_bytes),
            "lvs": [(lv.name, lv.size_bytes, lv.attr.raw, lv.pool_lv, lv.origin,
                     lv.data_percent, lv.metadata_percent, lv.tags) for lv in report.lvs]}


def _capture(lab, step: str, fingerprint: mda.Fingerprint, read, lvs_text: str) -> None:
    where = os.environ.get("DK_CAPTURE_METADATA_DIR")
    if not where or lab.kind != "real":
        return
    folder = Path(where)
    folder.mkdir(parents=True, exist_ok=True)
    text = mda.read_metadata_text(next(pv for pv in fingerprint if pv.areas), read=read)
    (folder / f"{step}.mda.txt").write_bytes(text)
    lab.lvm("vgcfgbackup", "-f", str(folder / f"{step}.vgcfg"), lab.vg_name)
    (folder / f"{step}.json").write_text(json.dumps(
        {"vg_name": lab.vg_name, "pv_uuids": [pv.pv_uuid for pv in fingerprint],
         "lvs": lvs_text}, indent=1))


def test_the_parsed_report_is_the_lvs_report_field_by_field(lab):
    cache = ReportCache(sources_of(lab.executor), parse_metadata=True)
    pvs_argv = ["pvs", "--readonly", "--reportformat", "json", "-o",
                "pv_name,pv_uuid,pv_fmt,pv_mda_count,vg_name"]
    cache.learn(parse_pvs_report(lab.lvm(*pvs_argv).stdout, lab.vg_name))
    compared, differences = [], []
    incremental = IncrementalReader()  # each state read against the one before it
    for step, argv, real_only, optional in [("pool", (), False, False), *STEPS]:
        if real_only and lab.kind != "real":
            continue
        if argv:
            try:
                lab.lvm(*(arg.format(vg=lab.vg_name) for arg in argv))
            except LVMCommandError:
                if optional:
                    continue
                raise
        fingerprint = cache.fingerprint()
        assert fingerprint is not None, step
        expected, first_row = _lvs_report(lab)
        _capture(lab, step, fingerprint, cache.sources.read_block,
                 lab.lvm(*lab.vg.report_argv()).stdout)
        try:
            parsed = _fields(vg_metadata.report_from_pvs(fingerprint, lab.vg_name,
                                                         read=cache.sources.read_block))
        except vg_metadata.MetadataUnsupported as exc:
            parsed = {"unsupported": str(exc)}
        try:
            read_incrementally = _fields(vg_metadata.report_from_pvs(
                fingerprint, lab.vg_name, read=cache.sources.read_block,
                build=incremental.report))
        except vg_metadata.MetadataUnsupported as exc:
            read_incrementally = {"unsupported": str(exc)}
        if parsed != _fields(expected):  # every step's difference, not just the first
            differences.append((step, parsed, _fields(expected)))
        if read_incrementally != _fields(expected):
            differences.append((f"{step} (incremental)", read_incrementally,
                                _fields(expected)))
        assert cache.same_pvs(first_row), step  # the PVs read are all of the VG's
        assert tuple(first_row[name] for name in PV_CHECK_FIELDS) == (
            str(len(fingerprint)), str(sum(len(pv.areas) for pv in fingerprint))), step
        compared.append(step)
    assert differences == []
    assert len(compared) >= (len(STEPS) - 2 if lab.kind == "real" else 15)
    assert incremental.stats.incremental >= len(compared) // 2


def test_a_driver_reads_changes_from_the_metadata_text_with_no_lvm_process(lab):
    driver = lab.driver(lvm_metadata_parse=True, lvm_read_session=False)
    driver.create_volume("volume-a", 1)
    driver.get_volume_stats(refresh=True)
    lab.lvm("lvcreate", "-T", "-V", "1g", "-n", "theirs", f"{lab.vg_name}/pool")
    start = driver.executor.commands_run
    stats = driver.get_volume_stats(refresh=True)
    assert driver.executor.commands_run == start
    assert driver.vg.report().find_lv("theirs") is not None
    assert stats["pools"][0]["backend_state"] == "up"
    assert stats["pools"][0]["provisioned_capacity_gb"] == 2
    assert driver.vg.report_cache_stats.parsed >= 1


@pytest.mark.parametrize("argv", [
    ("lvcreate", "--type", "error", "-L", "8m", "-n", "errors", "{vg}"),
    ("lvcreate", "--type", "cache-pool", "-L", "16m", "-n", "cpool", "{vg}"),
], ids=["error-segment", "cache-pool"])
def test_what_the_parser_does_not_know_is_read_through_lvs(lab, argv):
    if lab.kind != "real":
        pytest.skip("the simulator emulates neither")
    driver = lab.driver(lvm_metadata_parse=True, lvm_read_session=False)
    driver.get_volume_stats(refresh=True)
    try:
        lab.lvm(*(arg.format(vg=lab.vg_name) for arg in argv))
    except LVMCommandError as exc:  # an LVM built without that segment type
        pytest.skip(f"this LVM cannot make it: {exc}")
    start = driver.executor.commands_run
    driver.get_volume_stats(refresh=True)
    assert driver.executor.commands_run > start
    assert driver.vg.report_cache_stats.unparsed >= 1
