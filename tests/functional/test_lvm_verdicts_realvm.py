"""On real LVM (the VM lane): LVM still gives the verdicts recorded in
tests/unit/data/lvm_verdicts (a new LVM that changes its mind fails here, and the host's
reader tests are then out of date), and a time-boxed fuzz run: random valid and edited
metadata texts written to the PV, read by ``lvs --readonly`` and, where LVM takes them,
restored with ``vgcfgrestore`` and read again; the reader refuses every text LVM refuses
and otherwise refuses it or reports exactly what LVM printed.

Both write the VG's metadata area directly: the VG's own text is put back at the end.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from lvm_driver.commands import lvm_argv
from lvm_driver.read import mda
from lvm_driver.read.report import parse_lvs_report
from lvm_driver.read.vg_metadata import MetadataUnsupported
from lvm_driver.run.executor import LVMOutputError
from tests import lvm_verdicts, metadata_fuzz

pytestmark = pytest.mark.realvm
#: the fuzz run's time box (seconds of LVM commands, about 1.5 s a text under TCG)
FUZZ_SECONDS = float(os.environ.get("DK_FUZZ_SECONDS", "60"))
#: texts a CI run tries at most, from the fixed seed
CI_TEXTS = 30


def _outcome(verdict: dict) -> tuple:
    """What the driver would make of LVM's answer: refused, unreadable, or the report."""
    if verdict["exit_code"]:
        return ("refused",)
    try:
        report = parse_lvs_report(verdict["lvs"], lvm_verdicts.BASE_VG)
    except LVMOutputError:
        return ("unreadable",)
    return ("report", report.vg_size_bytes, report.vg_free_bytes, report.extent_size_bytes,
            tuple((lv.name, lv.size_bytes, lv.attr.raw, lv.pool_lv, lv.origin, lv.tags)
                  for lv in report.lvs))


@pytest.fixture
def device() -> Iterator[str]:
    """The VG's PV, its committed metadata text put back afterwards (and LVM's report of
    the VG the same again: the next tests find the VG they left)."""
    device = os.environ["DK_REAL_LVM_PV"]
    vg = os.environ["DK_REAL_LVM_VG"]
    saved = mda.read_metadata_text(mda.pv_fingerprint(device, 1))
    before = lvm_verdicts.run(lvm_argv.report(vg))
    try:
        yield device
    finally:
        lvm_verdicts.write_metadata(device, saved)
    after = lvm_verdicts.run(lvm_argv.report(vg))
    assert (after["exit_code"], after["lvs"]) == (before["exit_code"], before["lvs"])
    assert lvm_verdicts.run(["vgck", vg])["exit_code"] == 0


def test_lvm_gives_the_verdicts_recorded(device):
    recorded = lvm_verdicts.load_verdicts()
    assert recorded, "no verdicts recorded"
    changed = []
    started = time.monotonic()
    for name, case in recorded.items():
        now = lvm_verdicts.verdict_on_disk(device, case["text"])
        if _outcome(now) != _outcome(case["disk"]):
            changed.append(f"{name}: recorded {_outcome(case['disk'])[:1]}, now "
                           f"{_outcome(now)[:1]} {now['stderr'][-1:]}")
    print(f"{len(recorded)} verdicts replayed in {time.monotonic() - started:.0f} s")
    assert not changed, "LVM changed its mind (re-run tests/realvm/capture_verdicts.py):\n" \
        + "\n".join(changed)


def _reader(text: str) -> tuple:
    try:
        report = lvm_verdicts.read_from_pv(text, metadata_fuzz.VG, metadata_fuzz.PV_ID)
    except MetadataUnsupported:
        return ("refused",)
    return ("report", report.vg_size_bytes, report.vg_free_bytes, report.extent_size_bytes,
            tuple((lv.name, lv.size_bytes, lv.attr.raw, lv.pool_lv, lv.origin, lv.tags)
                  for lv in report.lvs))


def test_random_texts_the_reader_refuses_or_reads_as_lvm(device, tmp_path):
    seed = metadata_fuzz.fuzz_seed()
    counts: Counter[str] = Counter()
    wrong = []
    deadline = time.monotonic() + FUZZ_SECONDS
    index = 0
    # under CI the same texts each run (a faster machine does no more of them)
    cap = CI_TEXTS if os.environ.get("CI") == "true" else None
    while time.monotonic() < deadline and (cap is None or index < cap):
        rng = random.Random(seed + index)
        text = metadata_fuzz.random_vg(rng, max_lvs=6).text
        what = "valid"
        if index % 3:  # two of three edited
            text, what, _ = metadata_fuzz.mutate(text, rng)
        index += 1
        mine = _reader(text)
        disk = _outcome(lvm_verdicts.verdict_on_disk(device, text))
        lvm = [disk]
        if disk[0] == "report":
            lvm.append(_outcome(lvm_verdicts.verdict_restored(device, text, tmp_path)))
        counts[f"reader {mine[0]}, lvm {'/'.join(answer[0] for answer in lvm)}"] += 1
        if mine[0] == "report" and any(answer != mine for answer in lvm):
            wrong.append(f"seed {seed + index - 1} ({what}): the reader {mine}, LVM {lvm}")
    print(f"{index} texts in {FUZZ_SECONDS:.0f} s: {dict(counts)}")
    assert not wrong, "\n".join(wrong)
    assert index >= 10
