"""The metadata reader never knows better than LVM: for each text of tests/lvm_verdicts.py
(data/lvm_verdicts/verdicts.json holds it with LVM's verdict, taken on real LVM), the
reader refuses it wherever LVM refused it, and otherwise refuses it or reports, field by
field, what ``lvs --readonly`` printed."""

from __future__ import annotations

import pytest

from lvm_driver.read.report import VGReport, parse_lvs_report
from lvm_driver.read.vg_metadata import MetadataUnsupported
from lvm_driver.run.executor import LVMOutputError
from tests.lvm_verdicts import BASE_VG, CASES, case_text, load_verdicts, read_from_pv

VERDICTS = load_verdicts()
#: the texts LVM reads at face value: the reader must read them too, as LVM does (it
#: refuses "big-extents" by choice: extents above 4 GiB go to lvs)
READ_AS_LVM_DOES = {"base", "discards-upper", "discards-ignore", "cow-origin-thin",
                    "message-delete"}
#: what the issue names, each a case here: what LVM refuses, and what it reads otherwise
LVM_REFUSES = {"version-2", "no-contents", "discards-bogus", "chunk-size-small",
               "chunk-size-odd", "overlapping-extents", "extents-past-pv", "nul-in-id",
               "leading-blank"}
#: than at face value (wrapped, truncated, octal, another key)
LVM_READS_OTHERWISE = {"leading-zero", "extent-count-64bit", "pe-count-64bit",
                       "backslash-in-reference", "comma-in-tag", "cow-origin-pool",
                       "extent-size-wraps-vg", "extent-size-wraps-lv",
                       "unit-separator-after-key", "nbsp-after-key"}


def _fields(report: VGReport) -> tuple:
    return ((report.vg_size_bytes, report.vg_free_bytes, report.extent_size_bytes),
            [(lv.name, lv.size_bytes, lv.attr.raw, lv.pool_lv, lv.origin, lv.data_percent,
              lv.metadata_percent, lv.tags) for lv in report.lvs])


def _lvs_report(verdict: dict) -> VGReport | None:
    """What the driver makes of LVM's answer: its report, or None where LVM refused
    the text or printed what the driver cannot read (then it trusts neither)."""
    if verdict["exit_code"]:
        return None
    try:
        return parse_lvs_report(verdict["lvs"], BASE_VG)
    except LVMOutputError:
        return None


def _read(text: str) -> VGReport | None:
    """The reader's report of the text as the driver meets it, committed on a PV."""
    try:
        return read_from_pv(text)
    except MetadataUnsupported:
        return None


def test_every_case_has_lvms_verdict():
    assert VERDICTS, "no verdicts: run tests/realvm/capture_verdicts.py in the VM"
    assert set(VERDICTS) == set(CASES)
    assert LVM_REFUSES | LVM_READS_OTHERWISE | READ_AS_LVM_DOES <= set(CASES)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_the_reader_refuses_or_reads_as_lvm(name):
    case = VERDICTS[name]
    assert case["text"] == case_text(name), "the case changed since LVM's verdict on it"
    mine = _read(case["text"])
    for way in ("disk", "restore"):  # as an area holds it; as vgcfgrestore wrote it
        lvm = _lvs_report(case[way])
        if mine is not None:
            assert lvm is not None, f"LVM refused the text ({way}): {case[way]['stderr']}"
            assert _fields(mine) == _fields(lvm), way
    if name in READ_AS_LVM_DOES:
        assert mine is not None


@pytest.mark.parametrize("name", sorted(LVM_REFUSES))
def test_lvm_refuses_what_the_issue_says_it_refuses(name):
    # the fixtures' own check: LVM refused these from disk when they were taken
    assert VERDICTS[name]["disk"]["exit_code"] != 0


@pytest.mark.parametrize("name", sorted(LVM_READS_OTHERWISE))
def test_where_lvm_reads_a_value_otherwise_the_reader_refuses(name):
    # octal, the low 32 bits, a backslash kept, one tag read as two, a pool as an
    # origin, a size wrapped past 64 bits, a key with a character Python takes for a
    # blank: the text's face value is not LVM's
    assert _read(VERDICTS[name]["text"]) is None
