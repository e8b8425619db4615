"""The incremental metadata reader gives exactly what the full parse gives (the same
report, or the same refusal) after every change: random operator sequences on
generated VGs in both layouts LVM writes (tab-indented as ``vgcfgbackup``, flush
left as in a metadata area), random commands on the simulator, and mutated texts;
and after a change of thin LVs it parses only what changed."""

from __future__ import annotations

import dataclasses
import json
import random
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lvm_driver.policy.pool_facts import implausible, pool_facts
from lvm_driver.read import mda
from lvm_driver.read.report import parse_lvs_report
from lvm_driver.read.report_cache import ReportCache, parse_pvs_report, sources_of
from lvm_driver.read.vg_incremental import IncrementalReader
from lvm_driver.read.vg_metadata import MetadataUnsupported, report_from_text
from lvm_driver.run.executor import LVMCommandError
from lvm_driver.simulator import LVMSimulator
from tests.benchmarks import vgmeta

GiB = 1024 ** 3
CAPTURED = Path(__file__).parent / "data" / "vg_metadata"
SETTINGS = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


def _outcome(read, text, vg_name, uuids):
    """What a reader makes of a text: the report's fields, or the refusal."""
    try:
        report = read(text, vg_name, uuids)
    except MetadataUnsupported:
        return "refused"
    return (report.vg_size_bytes, report.vg_free_bytes, report.extent_size_bytes,
            report.lvs, {lv.name: lv for lv in report.lvs} == {
                name: report.find_lv(name) for name in (lv.name for lv in report.lvs)})


def _flush_left(text: str) -> str:
    """The text as LVM writes it into a metadata area: no indentation."""
    return "\n".join(line.lstrip("\t") for line in text.split("\n"))


def _layout(count: int) -> vgmeta.VGLayout:
    return vgmeta.plan_vg(vg_name="incvg", device="/dev/loop7", dev_size_bytes=4 * 1024 * GiB,
                          lv_count=count, metadata_area_bytes=64 * 1024 ** 2)


def _uuids(layout: vgmeta.VGLayout) -> list[str]:
    return [layout.pv_uuid.replace("-", "")]


# -- operator sequences on a generated VG ------------------------------------------

def _apply(layout: vgmeta.VGLayout, op: tuple[str, int, int]) -> vgmeta.VGLayout:
    """One operator's change to the layout's thin LVs (as LVM would write it)."""
    kind, pick, amount = op
    lvs = list(layout.thin_lvs)
    rng = random.Random(pick * 7919 + amount)
    at = pick % len(lvs) if lvs else 0
    if kind == "create" or not lvs:
        lvs.append(vgmeta.ThinLV(name=f"volume-new-{pick}-{amount}", uuid=vgmeta.lvm_uuid(rng),
                                 extents=256 * (1 + amount % 8), device_id=10_000 + pick,
                                 tags=(), origin=None))
    elif kind == "snapshot":
        origin = lvs[at]
        lvs.append(dataclasses.replace(origin, name=f"snap-new-{pick}-{amount}",
                                       uuid=vgmeta.lvm_uuid(rng), device_id=20_000 + pick,
                                       origin=origin.name))
    elif kind == "remove":
        gone = lvs.pop(at).name
        # LVM forgets a removed thin origin in its snapshots
        lvs = [dataclasses.replace(lv, origin=None) if lv.origin == gone else lv
               for lv in lvs]
    elif kind == "extend":
        lvs[at] = dataclasses.replace(lvs[at], extents=lvs[at].extents + 256 * (1 + amount))
    elif kind == "tag":
        lvs[at] = dataclasses.replace(lvs[at], tags=tuple(sorted(
            {*lvs[at].tags, f"tag{amount}"})))
    elif kind == "rename":
        new = f"volume-renamed-{pick}-{amount}"
        old = lvs[at].name
        if all(lv.name != new for lv in lvs):
            lvs = [dataclasses.replace(lv, origin=new) if lv.origin == old else lv
                   for lv in lvs]
            lvs[at] = dataclasses.replace(lvs[at], name=new)
    elif kind == "pool-size":  # not a thin change: the whole report is assembled again
        return dataclasses.replace(layout, pool_extents=layout.pool_extents - 1 - amount,
                                   seqno=layout.seqno + 1)
    return dataclasses.replace(layout, thin_lvs=tuple(lvs), seqno=layout.seqno + 1)


def _pool_figures(report):
    """What a stats refresh takes from the report (its checks and the pool's sums, carried
    from the last report where only thin LVs changed), with a pool usage laid over it."""
    at = next(i for i, lv in enumerate(report.lvs) if lv.is_thin_pool)
    used = report.with_lvs({at: report.lvs[at]._replace(data_percent=10.0,
                                                        metadata_percent=5.0)})
    return implausible(used, "pool"), pool_facts(used, "incvg", "pool", offer_thick=True)


OPS = st.lists(st.tuples(st.sampled_from(["create", "snapshot", "remove", "extend", "tag",
                                          "rename", "pool-size", "pool-zero"]),
                         st.integers(0, 10_000), st.integers(0, 50)),
               min_size=1, max_size=12)


@SETTINGS
@given(ops=OPS, flush_left=st.booleans())
def test_random_operator_sequences_read_as_the_full_parse_reads_them(ops, flush_left):
    layout = _layout(60)
    form = _flush_left if flush_left else (lambda text: text)
    reader = IncrementalReader()
    zeroing = True
    for op in [("create", 0, 0), *ops]:
        text = form(vgmeta.metadata_text(layout))
        if not zeroing:  # lvchange -Zn on the pool: every thin LV's attr changes
            text = text.replace("zero_new_blocks = 1", "zero_new_blocks = 0")
        outcome = _outcome(reader.report, text, "incvg", _uuids(layout))
        assert outcome == _outcome(report_from_text, text, "incvg", _uuids(layout)), op
        if outcome != "refused":
            assert _pool_figures(reader.report(text, "incvg", _uuids(layout))) == (
                _pool_figures(report_from_text(text, "incvg", _uuids(layout)))), op
        zeroing ^= op[0] == "pool-zero"
        layout = _apply(layout, op)


@pytest.mark.parametrize("op", [("create", 1, 1), ("remove", 5, 0), ("extend", 7, 2),
                                ("tag", 9, 3), ("snapshot", 11, 0)])
def test_a_thin_change_parses_only_what_changed(op, monkeypatch):
    layout = _layout(1000)
    reader = IncrementalReader()
    reader.report(_flush_left(vgmeta.metadata_text(layout)), "incvg", _uuids(layout))
    changed = _apply(layout, op)
    text = _flush_left(vgmeta.metadata_text(changed))
    parsed = []
    from lvm_driver.read import vg_incremental
    real_parse = vg_incremental.parse_text
    monkeypatch.setattr(vg_incremental, "parse_text",
                        lambda chunk: parsed.append(len(chunk)) or real_parse(chunk))
    report = reader.report(text, "incvg", _uuids(layout))
    assert reader.stats.incremental == 1
    # the VG's own settings, the pool (its transaction id) and the LV changed, at most
    assert len(parsed) <= 3 and sum(parsed) < 3_000
    assert _outcome(lambda *_: report, text, "incvg", None) == _outcome(
        report_from_text, text, "incvg", _uuids(layout))


# -- mutated texts: the same report or the same refusal -------------------------------

@SETTINGS
@given(data=st.data())
def test_a_mutated_text_reads_as_the_full_parse_reads_it(data):
    layout = _layout(40)
    reader = IncrementalReader()
    base = _flush_left(vgmeta.metadata_text(layout))
    reader.report(base, "incvg", _uuids(layout))
    text = _flush_left(vgmeta.metadata_text(_apply(layout, ("create", 3, 3))))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 40))
        insert = data.draw(st.sampled_from(["", "}", "{", "\n", "\n}\n", '"', "x {\n",
                                            "segment_count = 2\n", "pool {\n}\n", "0",
                                            "\n\nvolume-x {\n}\n", "logical_volumes {\n",
                                            "# c\n", "\\", "\t", "seqno = 9\n"]))
        text = text[:at] + insert + text[at + cut:]
    assert _outcome(reader.report, text, "incvg", _uuids(layout)) == _outcome(
        report_from_text, text, "incvg", _uuids(layout))


def test_a_removed_origin_still_named_is_refused_as_the_full_parse_refuses_it():
    layout = _layout(60)
    reader = IncrementalReader()
    reader.report(vgmeta.metadata_text(layout), "incvg", _uuids(layout))
    origin = next(lv.origin for lv in layout.thin_lvs if lv.origin)
    broken = dataclasses.replace(layout, seqno=2, thin_lvs=tuple(
        lv for lv in layout.thin_lvs if lv.name != origin))
    text = vgmeta.metadata_text(broken)
    with pytest.raises(MetadataUnsupported):
        report_from_text(text, "incvg", _uuids(layout))
    with pytest.raises(MetadataUnsupported):
        reader.report(text, "incvg", _uuids(layout))


def test_a_duplicate_lv_section_is_refused():
    layout = _layout(30)
    reader = IncrementalReader()
    text = vgmeta.metadata_text(layout)
    reader.report(text, "incvg", _uuids(layout))
    lines = text.split("\n")
    first = lines.index(f"\t\t{layout.thin_lvs[0].name} {{")
    end = lines.index("\t\t}", first) + 1
    last_lv = lines.index(f"\t\t{layout.thin_lvs[-1].name} {{")
    doubled = "\n".join(lines[:last_lv] + lines[first:end] + [""] + lines[last_lv:])
    with pytest.raises(MetadataUnsupported):
        report_from_text(doubled, "incvg", _uuids(layout))
    with pytest.raises(MetadataUnsupported):
        reader.report(doubled, "incvg", _uuids(layout))


# -- random commands on the simulator ------------------------------------------------

_NAMES = ["a", "b", "c.d", "e_f", "g+h"]
COMMANDS = st.lists(st.tuples(
    st.sampled_from(["thin", "snapshot", "thick", "cow", "remove", "extend", "rename",
                     "addtag", "deltag", "deactivate"]),
    st.sampled_from(_NAMES), st.sampled_from(_NAMES)), min_size=1, max_size=10)


def _argv(vg: str, command: tuple[str, str, str]) -> list[str]:
    kind, name, other = command
    return {
        "thin": ["lvcreate", "-T", "-V", "64m", "-n", name, f"{vg}/pool"],
        "snapshot": ["lvcreate", "-s", "-n", name, f"{vg}/{other}"],
        "thick": ["lvcreate", "-L", "8m", "-n", name, vg],
        "cow": ["lvcreate", "-s", "-L", "8m", "-n", name, f"{vg}/{other}"],
        "remove": ["lvremove", "-f", f"{vg}/{name}"],
        "extend": ["lvextend", "-L", "+8m", f"{vg}/{name}"],
        "rename": ["lvrename", vg, name, other],
        "addtag": ["lvchange", "--addtag", "t1", f"{vg}/{name}"],
        "deltag": ["lvchange", "--deltag", "t1", f"{vg}/{name}"],
        "deactivate": ["lvchange", "-an", f"{vg}/{name}"],
    }[kind]


@settings(max_examples=25, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(commands=COMMANDS)
def test_random_commands_on_the_simulator_read_as_the_full_parse_reads_them(commands):
    with tempfile.TemporaryDirectory() as folder:
        simulator = LVMSimulator(state_file=f"{folder}/state.json")
        simulator.create_vg("simvg", 2 * GiB)
        executor = simulator.executor(timeout_s=30)
        executor.run(["lvcreate", "-T", "-L", "512m", "simvg/pool"], readonly=False)
        cache = ReportCache(sources_of(executor), parse_metadata=True)
        cache.learn(parse_pvs_report(executor.run(
            ["pvs", "--readonly", "--reportformat", "json", "-o",
             "pv_name,pv_uuid,pv_fmt,pv_mda_count,vg_name"], readonly=True).stdout, "simvg"))
        reader = IncrementalReader()
        for command in [("thin", "a", "a"), *commands]:
            try:
                executor.run(_argv("simvg", command), readonly=False)
            except LVMCommandError:
                continue  # refused: nothing changed
            fingerprint = cache.fingerprint()
            text = mda.read_metadata_text(next(pv for pv in fingerprint if pv.areas),
                                          read=cache.sources.read_block).decode()
            uuids = [pv.pv_uuid for pv in fingerprint]
            assert _outcome(reader.report, text, "simvg", uuids) == _outcome(
                report_from_text, text, "simvg", uuids), command


@pytest.mark.parametrize("setting, value", [
    ("thin_pool", "no-such-pool"), ("thin_pool", "pool_tdata"), ("origin", "no-such-lv"),
    ("origin", "pool"), ("status", None)])
def test_a_changed_lv_that_names_what_is_not_there_is_refused(setting, value):
    layout = _layout(60)
    reader = IncrementalReader()
    reader.report(vgmeta.metadata_text(layout), "incvg", _uuids(layout))
    changed = _apply(layout, ("snapshot", 4, 0))
    new = changed.thin_lvs[-1].name
    text = vgmeta.metadata_text(changed)
    start = text.index(f"\t\t{new} {{")
    section = text[start:text.index("\n\t\t}\n", start)]
    if setting == "status":  # a hidden thin LV: of no known use
        broken = section.replace('"READ", "WRITE", "VISIBLE"', '"READ", "WRITE"')
    else:
        broken = re.sub(rf'{setting} = "[^"]*"', f'{setting} = "{value}"', section)
    assert broken != section
    text = text.replace(section, broken)
    with pytest.raises(MetadataUnsupported):
        report_from_text(text, "incvg", _uuids(layout))
    with pytest.raises(MetadataUnsupported):
        reader.report(text, "incvg", _uuids(layout))


# -- the report a change makes ---------------------------------------------------------

def test_a_report_after_a_change_finds_every_lv_and_none_removed():
    layout = _layout(50)
    reader = IncrementalReader()
    first = reader.report(vgmeta.metadata_text(layout), "incvg", _uuids(layout))
    gone = layout.thin_lvs[3].name
    changed = _apply(_apply(layout, ("remove", 3, 0)), ("create", 8, 8))
    report = reader.report(vgmeta.metadata_text(changed), "incvg", _uuids(layout))
    assert reader.stats.incremental == 1
    assert report.find_lv(gone) is None and first.find_lv(gone) is not None
    with pytest.raises(LookupError):
        report.get_lv(gone)
    assert all(report.find_lv(lv.name) is lv for lv in report.lvs)
    assert all(first.find_lv(lv.name) is lv for lv in first.lvs)  # the old one unchanged


def test_a_summary_is_shared_only_with_reports_that_differ_in_a_pools_usage():
    layout = _layout(20)
    report = IncrementalReader().report(vgmeta.metadata_text(layout), "incvg",
                                        _uuids(layout))
    calls = []
    count = lambda r: calls.append(r) or len(r.lvs)  # noqa: E731
    pool_at = next(i for i, lv in enumerate(report.lvs) if lv.is_thin_pool)
    pool = report.lvs[pool_at]
    with_usage = report.with_lvs({pool_at: pool._replace(data_percent=12.5,
                                                         metadata_percent=3.0)})
    assert report.summary("n", count) == with_usage.summary("n", count) == 21
    assert len(calls) == 1
    volume_at = next(i for i, lv in enumerate(report.lvs) if not lv.is_thin_pool)
    retagged = report.with_lvs({volume_at: report.lvs[volume_at]._replace(tags=("x",))})
    resized = report.with_lvs({pool_at: pool._replace(size_bytes=pool.size_bytes * 2)})
    retagged.summary("n", count)
    resized.summary("n", count)
    assert len(calls) == 3


def test_the_checks_carried_over_a_change_still_see_a_dangling_origin():
    layout = _layout(40)
    report = report_from_text(vgmeta.metadata_text(layout), "incvg", _uuids(layout))
    assert implausible(report, "pool") is None
    snapshot = next(lv for lv in report.lvs if lv.origin is not None)
    rows = tuple(lv for lv in report.lvs if lv.name != snapshot.origin)
    without_origin = report.with_rows(rows, (), (snapshot.origin,))
    assert "names origin" in implausible(without_origin, "pool")
    orphan = snapshot._replace(name="orphan", origin="no-such-lv")
    with_orphan = report.with_rows(tuple(sorted((*report.lvs, orphan))), (orphan,), ())
    assert "names origin 'no-such-lv'" in implausible(with_orphan, "pool")


# -- texts real LVM wrote ------------------------------------------------------------------

def test_the_states_captured_from_real_lvm_read_in_order_as_lvs_printed_them():
    """The metadata areas real LVM wrote through the field-by-field scenario
    (tests/functional/test_metadata_parse.py), read one after another: every state
    as its ``lvs`` printed it, and most of them incrementally."""
    from tests.functional.test_metadata_parse import STEPS
    steps = [step for step in ["pool", *(step for step, *_ in STEPS)]
             if (CAPTURED / f"{step}.mda.txt").exists()]
    assert len(steps) >= 20
    reader = IncrementalReader()
    for step in steps:
        facts = json.loads((CAPTURED / f"{step}.json").read_text())
        raw = (CAPTURED / f"{step}.mda.txt").read_bytes()
        expected = parse_lvs_report(facts["lvs"], facts["vg_name"])
        report = reader.report(raw, facts["vg_name"], facts["pv_uuids"])
        assert _lvs_fields(report) == _lvs_fields(expected), step
    assert reader.stats.incremental >= len(steps) - 2


def _lvs_fields(report):
    return ((report.vg_size_bytes, report.vg_free_bytes, report.extent_size_bytes),
            [(lv.name, lv.size_bytes, lv.attr.raw, lv.pool_lv, lv.origin, lv.tags)
             for lv in report.lvs])


# -- LV ids: one per LV, on the fast path too ----------------------------------------

def _id_of(text: str, name: str) -> str:
    """The id the LV section ``name`` of a metadata text holds."""
    return re.search(rf'\n\t\t{re.escape(name)} \{{\n\t\t\tid = "([^"]+)"', text).group(1)


@pytest.mark.parametrize("donor, removed", [
    ("thin", False), ("pool", False), ("pool_tdata", False), ("lvol0_pmspare", False),
    ("thin", True)])
def test_a_changed_thin_lv_taking_another_lvs_id_reads_as_the_full_parse_reads_it(
        donor, removed):
    """A new thin LV with the id of another LV is refused as the full parse refuses it;
    with the id of a thin LV removed in the same change it is read as the full parse
    reads it."""
    layout = _layout(60)
    reader = IncrementalReader()
    base = vgmeta.metadata_text(layout)
    reader.report(base, "incvg", _uuids(layout))
    donor_name = layout.thin_lvs[7].name if donor == "thin" else donor
    changed = _apply(layout, ("create", 5, 1))
    if removed:
        changed = dataclasses.replace(changed, thin_lvs=tuple(
            lv for lv in changed.thin_lvs if lv.name != donor_name))
    new = changed.thin_lvs[-1]
    changed = dataclasses.replace(changed, thin_lvs=(
        *changed.thin_lvs[:-1], dataclasses.replace(new, uuid=_id_of(base, donor_name))))
    text = vgmeta.metadata_text(changed)
    full = _outcome(report_from_text, text, "incvg", _uuids(layout))
    assert (full == "refused") is not removed
    assert _outcome(reader.report, text, "incvg", _uuids(layout)) == full


def test_two_changed_thin_lvs_swapping_their_ids_read_as_the_full_parse_reads_them():
    layout = _layout(60)
    reader = IncrementalReader()
    reader.report(vgmeta.metadata_text(layout), "incvg", _uuids(layout))
    lvs = list(layout.thin_lvs)
    lvs[2], lvs[9] = (dataclasses.replace(lvs[2], uuid=lvs[9].uuid, tags=("t",)),
                      dataclasses.replace(lvs[9], uuid=lvs[2].uuid, tags=("t",)))
    text = vgmeta.metadata_text(dataclasses.replace(layout, thin_lvs=tuple(lvs), seqno=2))
    full = _outcome(report_from_text, text, "incvg", _uuids(layout))
    assert full != "refused"
    assert _outcome(reader.report, text, "incvg", _uuids(layout)) == full
    assert reader.stats.incremental == 1
