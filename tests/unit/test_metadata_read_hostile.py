"""The metadata-text read path on hostile disks: a header claiming a huge text is a
doubt read in bounded memory, the text is read in bounded chunks, and whatever the
text holds, a refresh falls back to ``lvs`` (counted as unparsed), never raises."""

from __future__ import annotations

import json
import logging
import resource
import struct
import time
from pathlib import Path

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lvm_driver.read import mda
from lvm_driver.read.report_cache import DeviceSources, ReportCache
from lvm_driver.simulator.pv_headers import MDA_OFFSET, label_sector
from tests.unit.test_lvm_driver import make, sim  # noqa: F401 - sim: the 10 GiB pool fixture
from tests.unit.test_report_cache import operator

CAPTURED = Path(__file__).parent / "data" / "vg_metadata"
STATES = sorted(path.stem for path in CAPTURED.glob("*.json"))
MiB = 1024 ** 2
GiB = 1024 ** 3
LABEL_OFFSET = 512  # the simulator's and pvcreate's label sector


def _header(area_bytes: int, offset: int, text_bytes: int, checksum: int) -> bytes:
    """A metadata-area header at MDA_OFFSET whose raw_locn[0] says the text is
    ``text_bytes`` at ``offset`` in an area of ``area_bytes``."""
    block = bytearray(mda.MDA_HEADER_SIZE)
    struct.pack_into("<I16sIQQQQII", block, 0, 0, mda.MDA_MAGIC, mda.MDA_VERSION, MDA_OFFSET,
                     area_bytes, offset, text_bytes, checksum, 0)
    struct.pack_into("<I", block, 0, mda.calc_crc(mda.INITIAL_CRC, bytes(block[4:])))
    return bytes(block)


def _label(pv_uuid: str, device_bytes: int, area_bytes: int) -> bytes:
    """The label sector with its metadata area's size set to ``area_bytes``."""
    body = bytearray(label_sector(pv_uuid, device_bytes))
    struct.pack_into("<QQ", body, 72 + 4 * 8, MDA_OFFSET, area_bytes)
    struct.pack_into("<I", body, 16, mda.calc_crc(mda.INITIAL_CRC, bytes(body[20:])))
    return bytes(body)


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- a header that claims a huge text ---------------------------------------------------

def test_a_header_claiming_a_huge_text_is_a_doubt_read_through_lvs_in_bounded_memory(
        sim, tmp_path):
    driver = make(tmp_path, lvm_metadata_parse=True)
    driver.get_volume_stats(refresh=True)
    state = str(tmp_path / "state.json")
    operator(state, "lvcreate", "-T", "-V", "1g", "-n", "theirs", "dkvg/pool")
    pv = mda.vg_fingerprint([(f"{state}.pv-dkvg", 1)])[0]
    claim = 2 * GiB  # the PV file is sparse and bigger: every byte claimed is readable
    with open(pv.path, "r+b") as image:
        image.seek(LABEL_OFFSET)
        image.write(_label(pv.pv_uuid, 12 * GiB, claim + MiB))
        image.seek(MDA_OFFSET)
        image.write(_header(claim + MiB, mda.MDA_HEADER_SIZE, claim, 1))
    before = _max_rss_bytes()
    report = driver.vg.report()
    grown = _max_rss_bytes() - before
    assert report.find_lv("theirs") is not None  # read through lvs
    stats = driver.vg.report_cache_stats
    assert (stats.parsed, stats.unparsed) == (0, 1)
    assert grown < 64 * MiB, f"reading a header that claims 2 GiB took {grown / MiB:.0f} MiB"


def _image_reader(image: bytes, reads: list[tuple[int, int]]) -> mda.BlockReader:
    """A BlockReader of an in-memory PV image, recording each (offset, length) asked."""
    def read(path: str, offset: int, length: int) -> tuple[int, bytes]:
        reads.append((offset, length))
        return 7, image[offset:offset + length]
    return read


def _pv_image(text: bytes, *, area_bytes: int, label_area_bytes: int | None = None,
              offset: int = mda.MDA_HEADER_SIZE) -> bytes:
    """A PV image whose one metadata area holds ``text`` (with its NUL) at ``offset``."""
    pv_uuid = "A" * 32
    image = bytearray(MDA_OFFSET + area_bytes)
    image[LABEL_OFFSET:LABEL_OFFSET + 512] = _label(pv_uuid, len(image),
                                                    label_area_bytes or area_bytes)
    image[MDA_OFFSET + offset:MDA_OFFSET + offset + len(text)] = text
    image[MDA_OFFSET:MDA_OFFSET + 512] = _header(area_bytes, offset, len(text),
                                                  mda.calc_crc(mda.INITIAL_CRC, text))
    return bytes(image)


def test_the_text_is_read_in_bounded_chunks():
    text = b"x" * (3 * MiB) + b"\0"
    reads: list[tuple[int, int]] = []
    read = _image_reader(_pv_image(text, area_bytes=4 * MiB), reads)
    fingerprint = mda.vg_fingerprint([("/dev/pv", 1)], read=read)
    assert fingerprint is not None
    reads.clear()
    assert mda.read_metadata_text(fingerprint[0], read=read) == text[:-1]
    assert max(length for _, length in reads) <= MiB, reads
    assert sum(length for _, length in reads) == len(text)


def test_a_header_and_label_disagreeing_on_the_area_size_is_a_doubt():
    text = b"x" * 1000 + b"\0"
    image = _pv_image(text, area_bytes=4 * MiB, label_area_bytes=MiB)
    reads: list[tuple[int, int]] = []
    assert mda.vg_fingerprint([("/dev/pv", 1)], read=_image_reader(image, reads)) is None


def test_a_text_above_the_ceiling_is_refused_without_being_read():
    claim = mda.MAX_TEXT_BYTES + MiB
    pv = mda.PVFingerprint(path="/dev/pv", device_id=7,
                           areas=((mda.MDA_HEADER_SIZE, claim, 1),), pv_uuid="A" * 32,
                           mdas=((MDA_OFFSET, 2 * claim),))
    reads: list[tuple[int, int]] = []
    try:
        mda.read_metadata_text(pv, read=_image_reader(b"", reads))
    except mda.HeaderError as exc:
        assert "ceiling" in str(exc)
    else:
        raise AssertionError("a text above the ceiling was read")
    assert reads == []


# -- whatever the text holds: lvs, counted ---------------------------------------------

def _rewrite_text(path: str, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` in the committed text of the simulator's PV file,
    with the header's size and checksum updated to match (a well-formed commit)."""
    pv = mda.vg_fingerprint([(path, 1)])[0]
    text = mda.read_metadata_text(pv)
    assert old in text
    text = text.replace(old, new, 1) + b"\0"
    (start, area_bytes), (offset, _, _) = pv.mdas[0], pv.areas[0]
    with open(path, "r+b") as image:
        image.seek(start + offset)
        image.write(text)
        image.seek(start)
        image.write(_header(area_bytes, offset, len(text),
                            mda.calc_crc(mda.INITIAL_CRC, text)))


def test_an_integer_beyond_pythons_digit_limit_goes_to_lvs_counted(sim, tmp_path):
    driver = make(tmp_path, lvm_metadata_parse=True)
    driver.get_volume_stats(refresh=True)
    state = str(tmp_path / "state.json")
    operator(state, "lvcreate", "-T", "-V", "1g", "-n", "theirs", "dkvg/pool")
    _rewrite_text(f"{state}.pv-dkvg", b"seqno = ", b"seqno = " + b"1" * 5000)
    report = driver.vg.report()
    assert report.find_lv("theirs") is not None
    stats = driver.vg.report_cache_stats
    assert (stats.parsed, stats.unparsed) == (0, 1)


#: what a mutation puts into a text: syntax, huge or odd values, sections for values
_TOKENS = ("{", "}", "[", "]", '"', "=", "\\", "#", "\n", ",", "-", ".", "0", "1.5",
           "9" * 5000, "4294967296", "99999999999999999999", "[]", "{\n}", '"x"',
           '["READ"]', "\0", "\xff", "segment1 {\n}")
_VALUES = ("{\n}", "[]", '"x"', "0", "1", "2", "-1", "1.5", "18446744073709551616",
           "99999999999999999999", '["a"]', "[1]", '["READ", "WRITE"]', '"thin"',
           '"thin-pool"', '"striped"', '"snapshot"', '"pool"', "9" * 5000)

_mutation = st.one_of(
    st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from(_TOKENS)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 40)),
    st.tuples(st.just("value"), st.floats(0, 1), st.sampled_from(_VALUES)))


def _mutated(text: str, mutations: list[tuple[str, float, object]]) -> str:
    for kind, where, what in mutations:
        at = int(where * len(text))
        if kind == "insert":
            text = text[:at] + str(what) + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + int(what):]  # type: ignore[call-overload]
        else:  # another value (or a section) for the setting at or after ``at``
            lines = text.split("\n")
            settings_at = [n for n, line in enumerate(lines) if " = " in line]
            if settings_at:
                n = next((n for n in settings_at if n >= at * len(lines) // max(
                    len(text), 1)), settings_at[-1])
                key = lines[n].split(" = ")[0]
                lines[n] = f"{key} {{\n}}" if what == "{\n}" else f"{key} = {what}"
                text = "\n".join(lines)
    return text


def _read_through_cache(state: str, text: str) -> tuple[ReportCache, list[str]]:
    """``text`` as the committed metadata text of captured state ``state``'s one PV, read
    by a report cache: the cache, and the warnings logged meanwhile."""
    facts = json.loads((CAPTURED / f"{state}.json").read_text())
    (pv_uuid,) = facts["pv_uuids"]
    raw = text.encode("utf-8", "surrogateescape").rstrip(b"\0") + b"\0"
    image = bytearray(_pv_image(raw, area_bytes=MiB))
    image[LABEL_OFFSET:LABEL_OFFSET + 512] = _label(pv_uuid, len(image), MiB)
    cache = ReportCache(DeviceSources(read_block=_image_reader(bytes(image), [])),
                        parse_metadata=True)
    fingerprint = mda.vg_fingerprint([("/dev/pv", 1)], read=cache.sources.read_block)
    assert fingerprint is not None
    warnings = _Recorder()
    logging.getLogger("lvm_driver").addHandler(warnings)
    try:
        cache.parsed(fingerprint, facts["vg_name"])  # a report or None, never raises
    finally:
        logging.getLogger("lvm_driver").removeHandler(warnings)
    return cache, [record.getMessage() for record in warnings.records]


@pytest.mark.parametrize("old, new", [
    ("seqno = ", "seqno = " + "1" * 5000),
    ("segment_count = 1", "allocation_policy {\n}\nsegment_count = 1"),
    ('type = "thin"', "type {\n}"),
    ('thin_pool = "pool"', "thin_pool {\n}"),
    ('metadata = "pool_tmeta"', 'metadata = ["pool_tmeta"]'),
    ("segment_count = 1", "segment_count = 10000000"),
], ids=["5000-digits", "policy-section", "type-section", "pool-section", "metadata-list",
        "ten-million-segments"])
def test_a_forged_setting_goes_to_lvs_counted_quickly(old, new):
    text = (CAPTURED / "thin-snapshot.mda.txt").read_text()
    assert old in text
    start = time.perf_counter()
    cache, warnings = _read_through_cache("thin-snapshot", text.replace(old, new, 1))
    assert time.perf_counter() - start < 1.0
    assert (cache.stats.parsed, cache.stats.unparsed) == (0, 1)
    assert warnings == []


@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(state=st.sampled_from(STATES), mutations=st.lists(_mutation, min_size=1, max_size=4))
def test_no_mutated_text_escapes_the_read_path(state, mutations):
    text = _mutated((CAPTURED / f"{state}.mda.txt").read_text(), mutations)
    cache, warnings = _read_through_cache(state, text)
    assert cache.stats.parsed + cache.stats.unparsed == 1
    assert warnings == [], "an exception the parser does not expect"


class _Recorder(logging.Handler):
    """The warnings logged while it is attached."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


# -- the text read in one aligned buffer: what the chunked read gives ---------------------

def _image_file(path: Path, text: bytes, *, area_bytes: int, offset: int,
                checksum: int | None = None, cut: int = 0) -> str:
    """A PV image file whose metadata area holds ``text`` at ``offset``, wrapped to just
    after the area's header where it runs past the end (as LVM writes it), its last
    ``cut`` bytes missing."""
    image = bytearray(MDA_OFFSET + area_bytes)
    image[LABEL_OFFSET:LABEL_OFFSET + 512] = _label("A" * 32, len(image), area_bytes)
    first = text[:area_bytes - offset]
    image[MDA_OFFSET + offset:MDA_OFFSET + offset + len(first)] = first
    rest = text[len(first):]
    at = MDA_OFFSET + mda.MDA_HEADER_SIZE
    image[at:at + len(rest)] = rest
    image[MDA_OFFSET:MDA_OFFSET + 512] = _header(
        area_bytes, offset, len(text),
        mda.calc_crc(mda.INITIAL_CRC, text) if checksum is None else checksum)
    path.write_bytes(bytes(image[:len(image) - cut]))
    return str(path)


def _outcome(read) -> bytes | str:
    try:
        return read()
    except mda.HeaderError:
        return "doubt"


@pytest.mark.parametrize("text, offset, checksum, cut", [
    (b"vg {\n}\n" * 30_000 + b"\0", 4096, None, 0),  # in one part
    (b"vg {\n}\n" * 30_000 + b"\0", 2 * MiB - 7 * 4096, None, 0),  # wrapped
    (b"vg {\n}\n" * 3000 + b"\0" * 9000, 2 * MiB - 8192, None, 0),  # NULs past the wrap
    (b"\0" * 5000, 4096, None, 0),  # nothing but NULs
    (b"vg {\n}\n" * 3000 + b"\0", 4096, 1234, 0),  # a checksum that does not match
    (b"vg {\n}\n" * 3000 + b"\0", 2 * MiB - 4096, None, 2 * MiB - 8192),  # the PV ends
])
def test_the_text_read_in_one_buffer_is_the_text_read_in_chunks(tmp_path, text, offset,
                                                               checksum, cut):
    path = _image_file(tmp_path / "pv.img", text, area_bytes=2 * MiB, offset=offset,
                       checksum=checksum, cut=cut)
    pv = mda.pv_fingerprint(path, 1)
    assert pv.areas[0][:2] == (offset, len(text))
    direct = _outcome(lambda: mda.read_metadata_text(pv))
    chunked = _outcome(lambda: mda.read_metadata_text(
        pv, read=lambda *where: mda.read_block(*where)))
    assert direct == chunked
    assert direct == ("doubt" if checksum is not None or cut else text.rstrip(b"\0"))


def test_the_kept_buffer_never_shows_a_text_read_before(tmp_path):
    """The aligned buffer is kept between reads: a shorter text after a longer one, a
    wrapped one, and two reads at once each give exactly their own text; a read that
    fails lets the buffer go."""
    import threading

    texts = [b"long {\n}\n" * 40_000 + b"\0", b"short\n" * 10 + b"\0",
             b"wrapped {\n}\n" * 20_000 + b"\0"]
    offsets = [4096, 8192, 2 * MiB - 5 * 4096]
    pvs = [mda.pv_fingerprint(_image_file(tmp_path / f"pv{i}.img", text, area_bytes=2 * MiB,
                                          offset=offset), 1)
           for i, (text, offset) in enumerate(zip(texts, offsets))]
    for pv, text in [*zip(pvs, texts), *zip(pvs, texts)]:
        assert mda.read_metadata_text(pv) == text.rstrip(b"\0")
    results: dict[int, bytes] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(
        i, mda.read_metadata_text(pvs[i % 3]))) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: texts[i % 3].rstrip(b"\0") for i in range(6)}
    bad = mda.pv_fingerprint(_image_file(tmp_path / "bad.img", texts[0], area_bytes=2 * MiB,
                                         offset=4096, checksum=1), 1)
    with pytest.raises(mda.HeaderError):
        mda.read_metadata_text(bad)
    assert mda._KEPT._buffer is None
