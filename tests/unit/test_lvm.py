"""lvm.py: name rules, lv_attr decoding, report parsing (real and synthetic), commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driver_kit.exceptions import InvalidInput, InvalidName, InvalidSize, NotFound
from lvm_driver.commands.lvm import (
    NAME_MAX_LENGTH, REPORT_FIELDS, LogicalVolume, LVAttr, VGInfo, VolumeGroup,
    parse_lvs_report, parse_vgs_report, size_argument, validate_lv_name, validate_tag,
    validate_vg_name,
)
from lvm_driver.read.report_cache import CacheStats, DeviceSources
from lvm_driver.run.executor import (
    CommandResult, LVMCommandError, LVMExecutor, LVMOutputError,
    LVMVolumeGroupNotFoundError,
)

DATA = Path(__file__).parent / "data" / "lvm"
MiB = 1024 ** 2
GiB = 1024 ** 3

# What LVM 2.03.16 printed for VolumeGroup.report() in the real-LVM VM (a 256 MiB
# pool; vol1 with 10 MiB written and two thin snapshots: snap1 inactive with the
# skip flag, clone1 active; a linear thick1), captured by the VM lane. It was
# captured with four more fields than REPORT_FIELDS now asks for (lv_layout,
# lv_role, lv_metadata_size, lv_uuid), which the parser must ignore.
REAL_REPORT = (
    '  {\n'
    '      "report": [\n'
    '          {\n'
    '              "lv": [\n'
    '                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"clone1", "lv_size":"1073741824", "lv_attr":"Vwi-a-tz--", "lv_layout":"thin,sparse", "lv_role":"public,snapshot,thinsnapshot", "pool_lv":"pool", "origin":"vol1", "data_percent":"0.98", "metadata_percent":"", "lv_metadata_size":"", "lv_uuid":"a9SHEv-m4Zc-epPA-bXhF-qCEW-Pfkq-JfgAZi", "lv_tags":"dk-volume"},\n'
    '                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"pool", "lv_size":"268435456", "lv_attr":"twi-aotz--", "lv_layout":"thin,pool", "lv_role":"private", "pool_lv":"", "origin":"", "data_percent":"3.91", "metadata_percent":"10.94", "lv_metadata_size":"4194304", "lv_uuid":"6sh5I1-nseT-jM7o-qyCO-5MhW-1xjO-EmioA0", "lv_tags":""},\n'
    '                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"snap1", "lv_size":"1073741824", "lv_attr":"Vwi---tz-k", "lv_layout":"thin,sparse", "lv_role":"public,snapshot,thinsnapshot", "pool_lv":"pool", "origin":"vol1", "data_percent":"", "metadata_percent":"", "lv_metadata_size":"", "lv_uuid":"Yq3SNX-cjE6-dwIF-BIW5-qykm-9h2r-VAUCSR", "lv_tags":"dk-snapshot"},\n'
    '                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"thick1", "lv_size":"109051904", "lv_attr":"-wi-a-----", "lv_layout":"linear", "lv_role":"public", "pool_lv":"", "origin":"", "data_percent":"", "metadata_percent":"", "lv_metadata_size":"", "lv_uuid":"LikY7k-GFcn-zFXd-D0PI-bgZm-V9Hr-rh9wVW", "lv_tags":"dk-volume"},\n'
    '                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"vol1", "lv_size":"1073741824", "lv_attr":"Vwi-a-tz--", "lv_layout":"thin,sparse", "lv_role":"public,origin,thinorigin,multithinorigin", "pool_lv":"pool", "origin":"", "data_percent":"0.98", "metadata_percent":"", "lv_metadata_size":"", "lv_uuid":"wSqJgv-Jaar-eBWm-0tZZ-Ydk4-ASoZ-hdMa7G", "lv_tags":"dk-volume,x=y"}\n'
    '              ]\n'
    '          }\n'
    '      ]\n'
    '  }\n'
)


def captured(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def with_tags(text: str) -> str:
    """The VM lane's stats captures predate lv_tags in the field list; add it empty."""
    data = json.loads(text)
    for entry in data["report"]:
        for row in entry.get("lv", []):
            row.setdefault("lv_tags", "")
    return json.dumps(data)


def row(**overrides: str) -> dict[str, str]:
    base = {"vg_name": "vg", "vg_size": "1073741824", "vg_free": "0",
            "vg_extent_size": "4194304", "lv_name": "lv", "lv_size": "4194304",
            "lv_attr": "-wi-a-----", "pool_lv": "", "origin": "", "data_percent": "",
            "metadata_percent": "", "lv_tags": ""}
    base.update(overrides)
    return base


def report_text(*rows: dict) -> str:
    return json.dumps({"report": [{"lv": list(rows)}]})


class Recorder:
    """A runner answering every command with exit 0 (or a scripted result)."""

    def __init__(self, *results: CommandResult):
        self.results = list(results)
        self.argvs: list[list[str]] = []

    def __call__(self, argv, env, timeout_s):
        self.argvs.append(argv)
        if self.results:
            return self.results.pop(0)
        return CommandResult(argv, 0, "", "")


#: a host without device-mapper or PV headers: every pool inactive, no header readable
NO_DEVICES = DeviceSources(read_block=lambda path, offset, length: (0, b""),
                           thin_pool_status=lambda vg_name, pool_name: None)
#: what ``pvs`` prints when no PV is in the VG asked about
NO_PVS = CommandResult(["pvs"], 0, '{"report": [{"pv": []}]}', "")


def volume_group(*results: CommandResult, name: str = "vg") -> tuple[VolumeGroup, Recorder]:
    recorder = Recorder(*results)
    return VolumeGroup(name, executor=LVMExecutor(runner=recorder, retry_delay_s=0),
                       sources=NO_DEVICES), recorder


# -- names -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["volume-1", "a", "A.b_c+d-9", "x" * NAME_MAX_LENGTH,
                                  "_snapshot-1", "lvol0", "pool"])
def test_valid_lv_names_pass(name):
    assert validate_lv_name(name) == name


@pytest.mark.parametrize("name, rule", [
    ("-rf", "starts with '-'"),
    ("a;b", "characters LVM does not allow"),
    ("$(x)", "characters LVM does not allow"),
    ("a/b", "characters LVM does not allow"),
    ("vol\u00e9", "characters LVM does not allow"),
    ("a b", "whitespace"),
    ("a\tb", "whitespace"),
    ("a\0b", "NUL"),
    ("", "empty"),
    (".", "reserved"),
    ("..", "reserved"),
    ("snapshot", "starts with 'snapshot'"),
    ("snapshot-1234", "starts with 'snapshot'"),
    ("pvmove", "starts with 'pvmove'"),
    ("x" * (NAME_MAX_LENGTH + 1), "at most 127"),
    ("x_tdata", "'_tdata'"),
])
def test_invalid_lv_names_name_the_rule(name, rule):
    with pytest.raises(InvalidName, match=rule.replace("(", r"\(").replace("$", r"\$")):
        validate_lv_name(name)


@pytest.mark.parametrize("part", ["_cdata", "_cmeta", "_corig", "_cpool", "_cvol", "_wcorig",
                                  "_mimage", "_mlog", "_rimage", "_rmeta", "_tdata", "_tmeta",
                                  "_vdata", "_imeta", "_iorig", "_pmspare", "_vorigin"])
def test_every_reserved_lvm_suffix_is_refused(part):
    with pytest.raises(InvalidName, match=part):
        validate_lv_name(f"vol{part}1")


@pytest.mark.parametrize("value", [None, 5, b"vol", ["vol"]])
def test_non_strings_are_invalid_names(value):
    with pytest.raises(InvalidName, match="must be a str"):
        validate_lv_name(value)


def test_invalid_names_are_value_errors():
    with pytest.raises(ValueError):
        validate_lv_name("a;b")


def test_vg_names_follow_the_common_rules_only():
    assert validate_vg_name("snapshot") == "snapshot"  # LV-only reservation
    assert validate_vg_name("x_tdata") == "x_tdata"
    for bad in ("-vg", "..", "a b", "vg/x", "", "v" * 128):
        with pytest.raises(InvalidName):
            validate_vg_name(bad)


@pytest.mark.parametrize("tag", ["dk-volume", "owner=x", "a/b:c&d#e!f+g.h_i"])
def test_valid_tags(tag):
    assert validate_tag(tag) == tag


@pytest.mark.parametrize("tag", ["", "a b", "a;b", "a,b", "a@b", "$(x)", 7])
def test_invalid_tags(tag):
    with pytest.raises(InvalidInput):
        validate_tag(tag)


@pytest.mark.parametrize("size, argument", [
    (1, "512b"), (512, "512b"), (513, "1024b"), (GiB, "1073741824b"), (100 * MiB + 1, "104858112b"),
])
def test_sizes_are_exact_bytes_in_whole_sectors(size, argument):
    assert size_argument(size) == argument


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "1", None, float("nan")])
def test_bad_sizes_are_refused(size):
    with pytest.raises(InvalidSize):
        size_argument(size)


# -- lv_attr ---------------------------------------------------------------------------


def test_lv_attr_of_a_busy_thin_pool():
    attr = LVAttr.parse("twi-aotz--")
    assert attr.is_thin_pool and attr.is_active and attr.device_open is True
    assert attr.zero and attr.is_healthy and attr.is_writable and not attr.skip_activation
    assert attr.target_type == "t" and attr.allocation_policy == "i"


def test_lv_attr_of_a_skipped_thin_snapshot():
    attr = LVAttr.parse("Vwi---tz-k")
    assert attr.is_thin_volume and not attr.is_active and attr.skip_activation
    assert attr.device_open is False


def test_lv_attr_when_lvm_could_not_ask_the_kernel():
    attr = LVAttr.parse("Vwi-XXtz--")
    assert not attr.is_state_known and attr.device_open is None and not attr.is_active


def test_lv_attr_health_flags():
    assert LVAttr.parse("twi-aotzD-").health == "D"
    assert not LVAttr.parse("twi-aotzD-").is_healthy
    assert LVAttr.parse("-wi-a---p-").is_partial
    assert LVAttr.parse("-wi-am----").fixed_minor is False
    assert LVAttr.parse("-wim-a----").fixed_minor is True


@pytest.mark.parametrize("raw", ["twi-aotz--", "Vwi-a-tz--", "Vwi---tz-k", "Vwi-XXtz--",
                                 "-wi-a-----", "-wi-------", "Twi-ao----", "ewi-------"])
@pytest.mark.parametrize("origin", [None, "vol1"])
def test_logical_volume_predicates_are_those_of_its_lv_attr(raw, origin):
    attr = LVAttr.parse(raw)
    lv = LogicalVolume("lv", 4 * MiB, attr, "pool", origin, None, None, ())
    assert (lv.is_thin_pool, lv.is_thin_volume, lv.is_active) == \
        (attr.is_thin_pool, attr.is_thin_volume, attr.is_active)
    assert lv.is_thin_snapshot == (attr.is_thin_volume and origin is not None)


@pytest.mark.parametrize("raw", ["", "twi-aotz-", "twi-aotz---", None])
def test_lv_attr_must_have_ten_characters(raw):
    with pytest.raises(LVMOutputError, match="10 characters"):
        LVAttr.parse(raw)


# -- parsing real LVM output -------------------------------------------------------------------


def test_real_report_is_parsed_into_typed_records():
    report = parse_lvs_report(REAL_REPORT, "dkvg")
    assert (report.vg_size_bytes, report.vg_free_bytes) == (4290772992, 3904897024)
    assert report.extent_size_bytes == 4 * MiB
    assert [lv.name for lv in report.lvs] == ["clone1", "pool", "snap1", "thick1", "vol1"]
    pool = report.get_lv("pool")
    assert pool.is_thin_pool and pool.attr.is_active and not pool.is_thin_volume
    assert pool.size_bytes == 256 * MiB and pool.tags == ()
    assert (pool.data_percent, pool.metadata_percent) == (3.91, 10.94)
    vol1 = report.get_lv("vol1")
    assert vol1.is_thin_volume and not vol1.is_thin_snapshot and vol1.pool_lv == "pool"
    assert vol1.tags == ("dk-volume", "x=y") and vol1.data_percent == 0.98
    snap1 = report.get_lv("snap1")
    assert snap1.is_thin_snapshot and snap1.origin == "vol1" and snap1.tags == ("dk-snapshot",)
    assert snap1.attr.skip_activation and snap1.data_percent is None and not snap1.is_active
    clone1 = report.get_lv("clone1")
    assert clone1.is_thin_snapshot and clone1.is_active and not clone1.attr.skip_activation
    thick1 = report.get_lv("thick1")
    assert thick1.is_thick and not thick1.is_thin_volume and thick1.size_bytes == 104 * MiB
    assert thick1.data_percent is None and thick1.metadata_percent is None
    assert [lv.name for lv in report.thin_volumes("pool")] == ["clone1", "snap1", "vol1"]
    assert [lv.name for lv in report.thin_pools()] == ["pool"]
    assert [lv.name for lv in report.thick_volumes()] == ["thick1"]


def test_captured_report_with_hidden_lvs():
    report = parse_lvs_report(with_tags(captured("lvs_stats_full_live")["stdout"]), "dkvg")
    hidden = [lv.name for lv in report.lvs if lv.is_hidden]
    assert hidden == ["[lvol0_pmspare]", "[pool_tdata]", "[pool_tmeta]"]
    assert not any(lv.is_thick for lv in report.lvs if lv.is_hidden)
    pool = report.get_lv("pool")
    assert (pool.data_percent, pool.metadata_percent) == (9.77, 11.91)
    assert report.get_lv("volume-aaa").data_percent == 4.88
    assert report.get_lv("snap-aaa").is_thin_snapshot
    assert [lv.name for lv in report.thin_volumes("pool")] == [
        "operator-made", "snap-aaa", "volume-aaa", "volume-bbb"]
    assert report.vg_free_bytes == 3141533696


def test_readonly_report_has_no_usage_which_is_why_pools_ask_device_mapper():
    """lvs --readonly never asks the kernel: no percentages, state unknown. The full
    report is one (no device-mapper call per LV); the one-LV read stays live."""
    report = parse_lvs_report(with_tags(captured("lvs_stats_full")["stdout"]), "dkvg")
    pool = report.get_lv("pool")
    assert pool.data_percent is None and pool.metadata_percent is None
    assert not pool.attr.is_state_known
    vg = volume_group()[0]
    assert "--readonly" in vg.report_argv()
    assert "--readonly" not in vg.live_report_argv("vg/lv")


def test_captured_empty_vg_report_needs_the_vg_facts():
    text = captured("lvs_stats_empty_vg_live")["stdout"]
    with pytest.raises(LVMOutputError, match="no rows"):
        parse_lvs_report(text, "dkvg")
    info = parse_vgs_report(captured("vgs_report_empty_vg")["stdout"], "dkvg")
    assert info == VGInfo(vg_name="dkvg", vg_size_bytes=4290772992,
                          vg_free_bytes=4290772992, extent_size_bytes=4 * MiB)
    report = parse_lvs_report(text, "dkvg", vg_info=info)
    assert report.lvs == () and report.vg_free_bytes == 4290772992


def test_captured_inactive_pool_has_no_usage():
    report = parse_lvs_report(with_tags(captured("lvs_stats_pool_inactive_live")["stdout"]),
                              "dkvg")
    pool = report.get_lv("pool")
    assert not pool.is_active and pool.data_percent is None


# -- parsing: synthetic edge cases -------------------------------------------------------------


def test_empty_fields_are_none_or_empty():
    lv = parse_lvs_report(report_text(row()), "vg").lvs[0]
    assert lv.pool_lv is None and lv.origin is None and lv.tags == ()
    assert lv.data_percent is None and lv.metadata_percent is None


def test_zero_percent_is_not_unknown():
    lv = parse_lvs_report(report_text(row(data_percent="0.00")), "vg").lvs[0]
    assert lv.data_percent == 0.0


@pytest.mark.parametrize("text, message", [
    ("", "malformed JSON"),
    ("  {\n      \"report\": [\n", "malformed JSON"),
    ("WARNING: something\n{}", "malformed JSON"),
    ("[]", "no 'report' list"),
    ('{"report": {}}', "no 'report' list"),
    ('{"report": [1]}', "not an object"),
    ('{"report": [{"lv": {}}]}', "not a list"),
    ('{"report": [{"lv": [1]}]}', "row 0 of the LVM report is not an object"),
])
def test_malformed_output_is_reported(text, message):
    with pytest.raises(LVMOutputError, match=message):
        parse_lvs_report(text, "vg")


@pytest.mark.parametrize("field", REPORT_FIELDS)
def test_every_missing_field_is_named(field):
    broken = row()
    del broken[field]
    with pytest.raises(LVMOutputError, match=f"lacks field\\(s\\) {field}"):
        parse_lvs_report(report_text(row(lv_name="ok"), broken), "vg")


@pytest.mark.parametrize("field, value", [
    ("lv_size", "12.5"), ("lv_size", "1e3"), ("lv_size", ""), ("lv_size", "-1"),
    ("lv_size", " 12"), ("lv_size", "\u0661\u0662"), ("lv_size", "4.00m"),
    ("vg_size", "1G"), ("vg_extent_size", "4m"),
])
def test_non_numeric_sizes_are_refused(field, value):
    with pytest.raises(LVMOutputError, match=f"'{field}' should be a byte count"):
        parse_lvs_report(report_text(row(**{field: value})), "vg")


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-1.00", "100.01"])
def test_bad_percentages_are_refused(value):
    with pytest.raises(LVMOutputError, match="'data_percent' should be a percentage"):
        parse_lvs_report(report_text(row(lv_name="ok"), row(data_percent=value)), "vg")


def test_non_string_values_are_refused():
    with pytest.raises(LVMOutputError, match="'lv_size' is not a string"):
        parse_lvs_report(report_text(row(lv_size=4194304)), "vg")


def test_rows_of_another_vg_are_refused():
    with pytest.raises(LVMOutputError, match="row 1 belongs to volume group 'other'"):
        parse_lvs_report(report_text(row(lv_name="a"), row(vg_name="other")), "vg")


def test_an_empty_lv_name_is_refused():
    with pytest.raises(LVMOutputError, match="'lv_name' is empty"):
        parse_lvs_report(report_text(row(lv_name="")), "vg")


def test_a_bad_lv_attr_names_its_row():
    with pytest.raises(LVMOutputError, match="row 0: lv_attr must be 10 characters"):
        parse_lvs_report(report_text(row(lv_attr="-wi-a")), "vg")


def test_several_report_sections_are_joined():
    text = json.dumps({"report": [{"lv": [row(lv_name="a")]}, {"lv": [row(lv_name="b")]}],
                       "log": []})
    assert [lv.name for lv in parse_lvs_report(text, "vg").lvs] == ["a", "b"]


def test_records_are_immutable_and_compare_by_value():
    lv = parse_lvs_report(report_text(row(lv_tags="b,a")), "vg").lvs[0]
    assert type(lv) is LogicalVolume and lv.tags == ("b", "a")
    with pytest.raises(AttributeError):
        lv.name = "other"
    with pytest.raises(AttributeError):
        lv.uuid = "x"  # no __dict__: nothing can be added either
    assert lv == lv._replace() and hash(lv) == hash(lv._replace())
    assert lv != lv._replace(size_bytes=lv.size_bytes + 1)


def test_extra_fields_are_ignored_and_only_the_needed_ones_asked_for():
    extra = {"lv_layout": "linear", "lv_role": "public", "lv_metadata_size": "",
             "lv_uuid": "u", "segtype": "linear"}
    lv = parse_lvs_report(report_text(row(**extra)), "vg").lvs[0]
    assert lv == parse_lvs_report(report_text(row()), "vg").lvs[0]
    assert not {"lv_layout", "lv_role", "lv_metadata_size", "lv_uuid"} & set(REPORT_FIELDS)


@pytest.mark.parametrize("field, value", [
    ("vg_size", "2147483648"), ("vg_free", "4194304"), ("vg_extent_size", "8388608")])
def test_rows_must_repeat_the_vg_facts_of_row_0(field, value):
    with pytest.raises(LVMOutputError, match=f"row 1: field '{field}' is '{value}' but row 0"):
        parse_lvs_report(report_text(row(lv_name="a"), row(**{field: value})), "vg")


@pytest.mark.parametrize("field", ["lv_name", "lv_attr", "pool_lv", "origin", "lv_tags",
                                   "metadata_percent", "vg_name"])
def test_every_non_string_value_is_named(field):
    bad = row(**{field: ["x"]})
    with pytest.raises(LVMOutputError, match=f"field '{field}' is not a string"
                       if field != "vg_name" else "belongs to volume group"):
        parse_lvs_report(report_text(row(lv_name="ok"), bad), "vg")


def test_find_and_get():
    report = parse_lvs_report(report_text(row(lv_name="a")), "vg")
    assert report.find_lv("a").name == "a" and report.find_lv("b") is None
    with pytest.raises(NotFound, match="no logical volume 'b' in volume group 'vg'"):
        report.get_lv("b")


_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=20)
_rows = st.fixed_dictionaries({
    "lv_name": _names,
    "lv_size": st.integers(0, 2 ** 62).map(str),
    "lv_attr": st.sampled_from(["twi-aotz--", "Vwi-a-tz--", "Vwi---tz-k", "-wi-a-----"]),
    "data_percent": st.one_of(st.just(""), st.integers(0, 10000).map(lambda n: f"{n / 100:.2f}")),
    "metadata_percent": st.one_of(st.just(""),
                                  st.integers(0, 10000).map(lambda n: f"{n / 100:.2f}")),
    "origin": st.one_of(st.just(""), _names),
    "lv_tags": st.lists(_names, max_size=3).map(",".join),
    "pool_lv": st.one_of(st.just(""), _names),
})


@settings(max_examples=60, deadline=None)
@given(st.lists(_rows, min_size=1, max_size=8))
def test_parsing_keeps_every_value(generated):
    rows = [row(**values) for values in generated]
    report = parse_lvs_report(report_text(*rows), "vg")
    for source, lv in zip(rows, report.lvs):
        assert lv.name == source["lv_name"] and lv.size_bytes == int(source["lv_size"])
        assert lv.attr.raw == source["lv_attr"]
        assert lv.data_percent == (float(source["data_percent"]) if source["data_percent"]
                                   else None)
        assert lv.metadata_percent == (float(source["metadata_percent"])
                                       if source["metadata_percent"] else None)
        assert lv.origin == (source["origin"] or None)
        assert lv.tags == (tuple(source["lv_tags"].split(",")) if source["lv_tags"] else ())
        assert lv.pool_lv == (source["pool_lv"] or None)


# -- VolumeGroup: reads ---------------------------------------------------------------------------


def ok(stdout: str) -> CommandResult:
    return CommandResult(["lvs"], 0, stdout, "")


def test_constructor_does_no_io_and_validates_the_vg_name():
    vg, recorder = volume_group()
    assert recorder.argvs == [] and vg.vg_name == "vg"
    with pytest.raises(InvalidName):
        volume_group(name="-vg")


def test_a_full_report_is_pvs_then_one_readonly_lvs():
    vg, recorder = volume_group(NO_PVS, ok(REAL_REPORT), name="dkvg")
    report = vg.report()
    assert len(report.lvs) == 5
    assert recorder.argvs == [
        ["pvs", "--readonly", "--reportformat", "json", "-o",
         "pv_name,pv_uuid,pv_fmt,pv_mda_count,vg_name"],
        ["lvs", "--readonly", "--reportformat", "json", "--units", "b", "--nosuffix", "-o",
         ",".join(REPORT_FIELDS + ("pv_count", "vg_mda_count")), "dkvg"]]
    assert vg.executor.commands_run == 2
    assert vg.report_cache_stats == CacheStats(hits=0, misses=1, doubts=0)


def test_report_of_an_empty_vg_asks_vgs_for_the_vg_facts():
    vg, recorder = volume_group(NO_PVS, ok(captured("lvs_stats_empty_vg_live")["stdout"]),
                                ok(captured("vgs_report_empty_vg")["stdout"]), name="dkvg")
    report = vg.report()
    assert report.lvs == () and report.vg_size_bytes == 4290772992
    assert [argv[0] for argv in recorder.argvs] == ["pvs", "lvs", "vgs"]
    assert "--readonly" in recorder.argvs[2]


def test_report_of_a_missing_vg_is_not_found():
    record = captured("err_lvs_missing_vg_live")
    vg, _ = volume_group(NO_PVS, CommandResult(record["argv"], record["exit_code"],
                                               record["stdout"], record["stderr"]),
                         name="no-such-vg")
    with pytest.raises(LVMVolumeGroupNotFoundError) as info:
        vg.report()
    assert isinstance(info.value, NotFound)


def test_report_refuses_malformed_output():
    vg, _ = volume_group(ok('  {\n      "report": [\n'))
    with pytest.raises(LVMOutputError):
        vg.report()


def test_vg_exists_and_info():
    record = captured("err_vgs_missing_vg")
    missing = CommandResult(record["argv"], 5, record["stdout"], record["stderr"])
    vg, _ = volume_group(ok(captured("vgs_report")["stdout"]), missing, name="dkvg")
    assert vg.vg_exists() is True
    assert vg.vg_exists() is False


def test_vg_exists_propagates_other_failures():
    vg, _ = volume_group(CommandResult(["vgs"], 5, "", "  Internal error\n"))
    with pytest.raises(LVMCommandError):
        vg.vg_exists()


def test_supports_thin_and_version_from_real_output():
    vg, _ = volume_group(ok(captured("lvm_segtypes")["stdout"]),
                         ok(captured("lvm_version")["stdout"]), ok("  linear\n  striped\n"))
    assert vg.supports_thin() is True
    assert vg.lvm_version() == (2, 3, 16)
    assert vg.supports_thin() is False


# -- VolumeGroup: commands ---------------------------------------------------------------------------


def test_command_forms():
    vg, recorder = volume_group()
    vg.create_thin_pool("pool", 10 * GiB)
    vg.create_thin_pool("pool2", GiB, metadata_size_bytes=64 * MiB)
    vg.create_thin_volume("vol", 1 * GiB + 1, pool="pool", tags=("dk-volume", "a=b"))
    vg.create_thick_volume("thick", 2 * GiB, tags=["dk-volume"])
    vg.create_thin_snapshot("snap", "vol", tags=("dk-snapshot",))
    vg.create_thin_snapshot("clone", "snap", activate=True)
    vg.extend("vol", 3 * GiB)
    vg.delete("vol")
    vg.rename("old", "new")
    vg.activate("snap")
    vg.add_tags("vol", ["t1"])
    vg.remove_tags("vol", ["t1"])
    assert recorder.argvs == [
        ["lvcreate", "--type", "thin-pool", "--size", "10737418240b", "--name", "pool",
         "--yes", "vg"],
        ["lvcreate", "--type", "thin-pool", "--size", "1073741824b", "--poolmetadatasize",
         "67108864b", "--name", "pool2", "--yes", "vg"],
        ["lvcreate", "--type", "thin", "--virtualsize", "1073742336b", "--thinpool", "pool",
         "--name", "vol", "--addtag", "dk-volume", "--addtag", "a=b", "--yes", "vg"],
        ["lvcreate", "--type", "linear", "--size", "2147483648b", "--name", "thick",
         "--addtag", "dk-volume", "--yes", "vg"],
        ["lvcreate", "--snapshot", "--setactivationskip", "y", "--name", "snap",
         "--addtag", "dk-snapshot", "--yes", "vg/vol"],
        ["lvcreate", "--snapshot", "--setactivationskip", "n", "--activate", "y",
         "--name", "clone", "--yes", "vg/snap"],
        ["lvextend", "--size", "3221225472b", "vg/vol"],
        ["lvremove", "--force", "vg/vol"],
        ["lvrename", "vg", "old", "new"],
        ["lvchange", "--activate", "y", "--ignoreactivationskip", "vg/snap"],
        ["lvchange", "--addtag", "t1", "vg/vol"],
        ["lvchange", "--deltag", "t1", "vg/vol"],
    ]


@pytest.mark.parametrize("call", [
    lambda vg: vg.create_thin_pool("-rf", GiB),
    lambda vg: vg.create_thin_volume("a;b", GiB, pool="pool"),
    lambda vg: vg.create_thin_volume("vol", GiB, pool="$(x)"),
    lambda vg: vg.create_thick_volume("snapshot", GiB),
    lambda vg: vg.create_thin_snapshot("ok", "x_tdata"),
    lambda vg: vg.extend("a b", GiB),
    lambda vg: vg.delete(".."),
    lambda vg: vg.rename("ok", "x" * 128),
    lambda vg: vg.activate(""),
])
def test_bad_names_never_reach_lvm(call):
    vg, recorder = volume_group()
    with pytest.raises(InvalidName):
        call(vg)
    assert recorder.argvs == []


@pytest.mark.parametrize("call, error", [
    (lambda vg: vg.create_thin_volume("v", 0, pool="p"), InvalidSize),
    (lambda vg: vg.create_thick_volume("v", -GiB), InvalidSize),
    (lambda vg: vg.extend("v", 1.5), InvalidSize),
    (lambda vg: vg.create_thin_volume("v", GiB, pool="p", tags=["a b"]), InvalidInput),
    (lambda vg: vg.create_thick_volume("v", GiB, tags="dk-volume"), InvalidInput),
    (lambda vg: vg.add_tags("v", ["x,y"]), InvalidInput),
])
def test_bad_sizes_and_tags_never_reach_lvm(call, error):
    vg, recorder = volume_group()
    with pytest.raises(error):
        call(vg)
    assert recorder.argvs == []


def test_extend_to_the_current_size_succeeds():
    record = captured("err_lvextend_same_size")
    vg, _ = volume_group(CommandResult(record["argv"], 5, "", record["stderr"]), name="dkvg")
    vg.extend("volume-aaa", 2 * GiB)


def test_extend_never_shrinks():
    record = captured("err_lvextend_smaller")
    vg, _ = volume_group(CommandResult(record["argv"], 5, "", record["stderr"]), name="dkvg")
    with pytest.raises(LVMCommandError, match="not larger than existing size"):
        vg.extend("volume-aaa", GiB)


def test_writes_are_not_retried_on_a_crash():
    vg, recorder = volume_group(CommandResult(["lvcreate"], 139, "", ""))
    with pytest.raises(LVMCommandError):
        vg.create_thin_volume("v", GiB, pool="p")
    assert len(recorder.argvs) == 1
