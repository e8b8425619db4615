"""The metadata reader on random texts: valid VGs (tests/metadata_fuzz.py) read exactly as
``lvs --readonly`` prints them, worked out from the model, not by the reader; and random
edits of them refused, or read into a report that holds together, never with another
exception, and always refused where LVM is known to refuse the edit or read it otherwise.
The seed is printed (``DK_FUZZ_SEED`` replays a run); real LVM's verdict on such texts is
taken in the VM lane (tests/functional/test_lvm_verdicts_realvm.py)."""

from __future__ import annotations

import random

from lvm_driver.policy.pool_facts import implausible
from lvm_driver.read import config_text
from lvm_driver.read.config_text import ConfigTextError
from lvm_driver.read.report import VGReport
from lvm_driver.read.vg_metadata import MetadataUnsupported
from tests import metadata_fuzz
from tests.lvm_verdicts import read_from_pv

VALID_TEXTS = 300
MUTATIONS = 3000


def _seed() -> int:
    return metadata_fuzz.fuzz_seed()


def _rows(report: VGReport) -> list[metadata_fuzz.Row]:
    return [(lv.name, lv.size_bytes, lv.attr.raw, lv.pool_lv, lv.origin, lv.tags)
            for lv in report.lvs]


def test_random_valid_texts_read_as_lvs_prints_them():
    seed = _seed()
    for index in range(VALID_TEXTS):
        vg = metadata_fuzz.random_vg(random.Random(seed + index))
        report = read_from_pv(vg.text, metadata_fuzz.VG, metadata_fuzz.PV_ID)
        assert (report.vg_size_bytes, report.vg_free_bytes) == (
            vg.vg_size_bytes, vg.vg_free_bytes), f"seed {seed + index}"
        assert _rows(report) == vg.rows, f"seed {seed + index}"
        assert all(lv.data_percent is None is lv.metadata_percent for lv in report.lvs)


def _holds_together(report: VGReport) -> str | None:
    """What in a report no VG of LVM can have, or None."""
    if report.find_lv("pool") is not None and report.get_lv("pool").is_thin_pool:
        return implausible(report, "pool")
    if any(lv.size_bytes % report.extent_size_bytes or lv.size_bytes >= 2 ** 64
           for lv in report.lvs):
        return "an LV size is no whole number of extents, or past 64 bits"
    return None if report.vg_free_bytes <= report.vg_size_bytes else "free above size"


def test_random_edits_are_refused_or_read_into_a_report_that_holds_together():
    seed = _seed()
    read = refused = 0
    for index in range(MUTATIONS):
        rng = random.Random(seed + index)
        text, what, lvm_reads_otherwise = metadata_fuzz.mutate(
            metadata_fuzz.random_vg(rng).text, rng)
        where = f"seed {seed + index}: {what}"
        try:
            report = read_from_pv(text, metadata_fuzz.VG, metadata_fuzz.PV_ID)
        except MetadataUnsupported:
            refused += 1
            continue
        read += 1
        assert not lvm_reads_otherwise, f"LVM refuses or reads otherwise: {where}"
        assert _holds_together(report) is None, where
        # both config readers give the same tree (the line reader may pass it on)
        try:
            lines = config_text._parse_lines(text)
        except config_text._NotOneALine:
            continue
        assert lines == config_text._parse_statements(text), where
    print(f"{read} edits read, {refused} refused")
    assert read and refused  # the edits reach both outcomes


def test_random_edits_of_the_syntax_raise_nothing_but_config_text_error():
    seed = _seed()
    for index in range(MUTATIONS):
        rng = random.Random(seed + index)
        text, what, _ = metadata_fuzz.mutate(metadata_fuzz.random_vg(rng).text, rng)
        try:
            config_text.parse_config(text)
        except ConfigTextError:
            pass
