"""The canonical thin section's fast path (``lv_section_text``) against the general
parser, section by section: on LVM's own texts it is taken, and on every text it
either declines or builds exactly the section the general parser builds, never one
the general parser refuses (every one-character edit of a canonical section, random
sections near the canonical shape, the real-LVM capture of the verdict fixtures)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lvm_driver.read import lv_section_text
from lvm_driver.read.lv_section_text import CANONICAL_THIN, canonical_thin, section_from_text
from lvm_driver.read.vg_incremental import IncrementalReader
from lvm_driver.read.vg_metadata import LVSection, MetadataUnsupported, parse_text, report_from_text
from tests import metadata_fuzz
from tests.benchmarks.incremental import texts
from tests.lvm_verdicts import BASE_PV_ID, BASE_VG, load_verdicts

#: a thin snapshot's section as LVM 2.03 writes it into a metadata area (the real
#: capture below has the same shape)
CANONICAL = (b'\nsnap_a+1 {\nid = "YTcYYd-JZBC-1FE3-NBmE-g3Ku-qO7J-4mduSW"\n'
             b'status = ["READ", "WRITE", "VISIBLE"]\nflags = ["ACTIVATION_SKIP"]\n'
             b'tags = ["t1", "a_a"]\ncreation_time = 1795457424\ncreation_host = "virtme-ng"\n'
             b'segment_count = 1\n\nsegment1 {\nstart_extent = 0\nextent_count = 256\n\n'
             b'type = "thin"\nthin_pool = "pool"\ntransaction_id = 1\ndevice_id = 2\n'
             b'origin = "vol-a"\n}\n}\n')
EDITS = "0179a-_\"\\# \t\n{}[],=\x00\x1f\xa0Z"
SLOTS = LVSection.__slots__
#: random VGs of tests/metadata_fuzz.py, two in three with one random edit
FUZZ_TEXTS = 1500
SETTINGS = settings(max_examples=300, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def _general(name: str, text: bytes) -> object:
    """What the general parser makes of the section alone: its slots, or "refused"."""
    try:
        tree = parse_text(text.decode("utf-8"))
        if list(tree) != [name]:
            return "refused"
        lv = LVSection(name, tree[name], {})
    except (MetadataUnsupported, UnicodeDecodeError):
        return "refused"
    return tuple(getattr(lv, slot) for slot in SLOTS)


def _fast(name: str, text: bytes) -> object:
    """The fast path's answer: the section's slots, or None (not its shape)."""
    match = CANONICAL_THIN.fullmatch(text)
    lv = canonical_thin(name, match, {}) if match is not None else None
    return None if lv is None else tuple(getattr(lv, slot) for slot in SLOTS)


def _name_of(text: bytes) -> str | None:
    found = re.match(rb"\s*([^\s{}]+) \{", text)
    return found.group(1).decode("utf-8", "replace") if found else None


def _agree(text: bytes) -> str:
    """Check one section; "fast" when the fast path built it, "declined" otherwise."""
    name = _name_of(text)
    if name is None:
        assert CANONICAL_THIN.fullmatch(text) is None
        return "declined"
    fast = _fast(name, text)
    if fast is None:
        return "declined"
    assert fast == _general(name, text), text
    return "fast"


def test_lvms_canonical_section_takes_the_fast_path_and_reads_as_the_general_one():
    assert _agree(CANONICAL) == "fast"
    assert _fast("snap_a+1", CANONICAL)[SLOTS.index("segments")] == [
        {"start_extent": 0, "extent_count": 256, "type": "thin", "thin_pool": "pool",
         "transaction_id": 1, "device_id": 2, "origin": "vol-a"}]


def test_every_one_character_edit_is_declined_or_read_as_the_general_parser_reads_it():
    outcomes = {"fast": 0, "declined": 0}
    for at in range(len(CANONICAL) + 1):
        edits = [CANONICAL[:at] + char.encode() + CANONICAL[at:] for char in EDITS]
        if at < len(CANONICAL):
            edits.append(CANONICAL[:at] + CANONICAL[at + 1:])
            edits += [CANONICAL[:at] + char.encode() + CANONICAL[at + 1:] for char in EDITS]
        for text in edits:
            outcomes[_agree(text)] += 1
    # digits changed in place keep LVM's shape: those are read, the rest declined
    assert outcomes["fast"] > 100 and outcomes["declined"] > 10_000, outcomes


_WORDS = st.sampled_from(["0", "00", "01", "1", "7", "255", str(2 ** 24 - 1), str(2 ** 24),
                          str(2 ** 32 - 1), str(2 ** 32), str(2 ** 63 - 1), str(2 ** 63),
                          str(2 ** 64), "1" * 20, "-1", "1.5", ""])
_STRINGS = st.text(alphabet=st.sampled_from(list('aZ09-_.+/=!:&#{} "\\,\t\x1f\xa0é')),
                   max_size=8)


@SETTINGS
@given(name=_STRINGS, uuid=st.sampled_from(["YTcYYd-JZBC-1FE3-NBmE-g3Ku-qO7J-4mduSW",
                                            "YTcYYd-JZBC-1FE3-NBmE-g3Ku-qO7J-4mduS",
                                            "YTcYYd-JZBC-1FE3-NBmE-g3Ku-qO7J-4mdu\\W"]),
       skip=st.booleans(), tags=st.lists(_STRINGS, max_size=3), host=_STRINGS,
       numbers=st.tuples(_WORDS, _WORDS, _WORDS, _WORDS), pool=_STRINGS,
       origin=st.one_of(st.none(), _STRINGS), blank=st.booleans())
def test_random_sections_near_the_shape_are_declined_or_read_as_the_general_parser(
        name, uuid, skip, tags, host, numbers, pool, origin, blank):
    created, extents, transaction, device = numbers
    text = (f'\n{name} {{\nid = "{uuid}"\nstatus = ["READ", "WRITE", "VISIBLE"]\n'
            f'flags = [{chr(34) + "ACTIVATION_SKIP" + chr(34) if skip else ""}]\n'
            + (f"tags = [{', '.join(chr(34) + tag + chr(34) for tag in tags)}]\n"
               if tags else "")
            + f'creation_time = {created}\ncreation_host = "{host}"\nsegment_count = 1\n\n'
            f"segment1 {{\nstart_extent = 0\nextent_count = {extents}\n"
            + ("\n" if blank else "")
            + f'type = "thin"\nthin_pool = "{pool}"\ntransaction_id = {transaction}\n'
            f"device_id = {device}\n"
            + (f'origin = "{origin}"\n' if origin is not None else "") + "}\n}\n")
    _agree(text.encode())


def _count_general(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = lv_section_text.parse_text
    monkeypatch.setattr(lv_section_text, "parse_text",
                        lambda text: calls.append(len(text)) or real(text))
    return calls


def test_the_real_lvm_capture_reads_its_thin_volumes_by_the_fast_path(monkeypatch):
    text = load_verdicts()["base"]["text"]  # as LVM 2.03 wrote it into a metadata area
    lvs = text[text.index("logical_volumes {"):]
    sections = re.findall(r"\n\n([^\s{}]+) \{\nid", lvs)
    general = _count_general(monkeypatch)
    report = IncrementalReader().report(text.encode(), BASE_VG,
                                        [BASE_PV_ID.replace("-", "")])
    assert report.get_lv("snap.b").origin == "snap_a+1"
    # all but its three thin volumes: the pool, its two LVs, the spare, the thick LV,
    # the COW store and the COW snapshot
    assert len(sections) == 10 and len(general) == 7


def test_a_generated_vg_of_thin_volumes_parses_only_the_pool_sections_in_general(
        monkeypatch):
    (text,), uuids = texts(1000, 0)
    general = _count_general(monkeypatch)
    reader = IncrementalReader()
    reader.report(text.encode(), "incvg", uuids)
    assert reader.stats.full == 1 and len(general) == 4  # the pool, its LVs, the spare


def test_the_section_parse_refuses_what_the_general_parser_refuses():
    bad = CANONICAL.replace(b"extent_count = 256", b"extent_count = 0256")
    with pytest.raises(MetadataUnsupported):
        section_from_text("snap_a+1", bad, 0, len(bad), CANONICAL_THIN.fullmatch(bad), {})
    huge = CANONICAL.replace(b"device_id = 2", b"device_id = 16777216")
    assert CANONICAL_THIN.fullmatch(huge) is not None  # the shape, not the limit
    with pytest.raises(MetadataUnsupported):
        section_from_text("snap_a+1", huge, 0, len(huge), CANONICAL_THIN.fullmatch(huge), {})


def _outcome(read, text: str, vg_name: str, uuids: list[str]) -> object:
    try:
        return read(text, vg_name, uuids)
    except MetadataUnsupported:
        return "refused"


def _cold(text: str, vg_name: str, uuids: list[str]) -> object:
    return IncrementalReader().report(text.encode("utf-8", "surrogatepass"), vg_name, uuids)


@pytest.mark.parametrize("case", sorted(load_verdicts()))
def test_each_lvm_verdict_text_reads_the_same_cold_as_by_the_general_parser(case):
    text = load_verdicts()[case]["text"]
    uuids = [BASE_PV_ID.replace("-", "")]
    assert _outcome(_cold, text, BASE_VG, uuids) == _outcome(report_from_text, text,
                                                            BASE_VG, uuids)


def test_random_vgs_and_their_edits_read_the_same_cold_as_by_the_general_parser():
    seed = metadata_fuzz.fuzz_seed()
    uuids = [metadata_fuzz.PV_ID.replace("-", "")]
    outcomes = {"read": 0, "refused": 0}
    for index in range(FUZZ_TEXTS):
        rng = random.Random(seed + index)
        text = metadata_fuzz.random_vg(rng).text
        if index % 3:  # two in three edited
            text = metadata_fuzz.mutate(text, rng)[0]
        general = _outcome(report_from_text, text, metadata_fuzz.VG, uuids)
        assert _outcome(_cold, text, metadata_fuzz.VG, uuids) == general, (
            f"seed {seed + index}")
        outcomes["refused" if general == "refused" else "read"] += 1
    assert min(outcomes.values()) > FUZZ_TEXTS // 10, outcomes
