"""COW snapshots as real LVM 2.03.16 wrote them (data/vg_metadata's captures, each
combination of tests/functional/test_cow_combinations.py): one classification of
every LV through ``lvs`` and through the metadata text, no report refused, a thin
origin a thin volume of its pool, a COW store thick space of no pool. Then absurd
but parseable figures: refused in one line naming the figure, never an exception
from the arithmetic."""

from __future__ import annotations

import json
import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path

import pytest

from driver_kit import BackendUnavailable, GiB, PoolFacts
from driver_kit.exceptions import InvalidInput
from driver_kit.stats import build_pool_stats
from driver_kit.units import MAX_CAPACITY_BYTES, bytes_to_gb_down, bytes_to_gb_up
from lvm_driver.policy.pool_facts import implausible, pool_facts
from lvm_driver.read.report import parse_lvs_report
from lvm_driver.read.vg_metadata import MetadataUnsupported, report_from_text
from lvm_driver.run.executor import LVMOutputError
from tests.unit.test_data_safety import make, report_rows, serve_report
from tests.unit.test_lvm_driver import sim  # noqa: F401 - the fixture: a 10 GiB pool

CAPTURED = Path(__file__).parent / "data" / "vg_metadata"
WITH_COW = sorted(path.stem for path in CAPTURED.glob("*.json")
                  if '"swi-' in path.read_text() or "combination-" in path.stem)


def _both_reports(state):
    capture = json.loads((CAPTURED / f"{state}.json").read_text())
    text = (CAPTURED / f"{state}.mda.txt").read_text()
    return (parse_lvs_report(capture["lvs"], capture["vg_name"]),
            report_from_text(text, capture["vg_name"], capture["pv_uuids"]))


def _kinds(report):
    return [(lv.name, lv.is_thin_pool, lv.is_thin_volume, lv.is_thin_snapshot, lv.is_thick,
             lv.is_cow_snapshot) for lv in report.lvs]


def test_the_captures_hold_cow_snapshots_of_thin_and_thick_lvs():
    attrs = {lv.attr.raw for state in WITH_COW for lv in _both_reports(state)[0].lvs}
    assert {"owi-XXtz--", "owi-XXtz-k", "owi-XXs---", "swi-XXs---"} <= attrs
    assert len(WITH_COW) >= 9


@pytest.mark.parametrize("state", WITH_COW)
def test_every_lv_is_what_it_is_the_same_through_lvs_and_the_text(state):
    through_lvs, through_text = _both_reports(state)
    assert _kinds(through_lvs) == _kinds(through_text)
    for report in (through_lvs, through_text):
        assert implausible(report, "pool") is None
        for lv in report.lvs:
            thin = lv.attr.target_type == "t" and not lv.is_thin_pool
            assert lv.is_thin_volume == thin, lv  # an origin (o) or not (V)
            assert lv.is_cow_snapshot == (lv.attr.volume_type == "s"), lv
            assert not (lv.is_thick and (lv.is_thin_volume or lv.is_cow_snapshot)), lv
        pool = report.get_lv("pool")
        known = report.with_lvs({report.lvs.index(pool): pool._replace(
            data_percent=1.0, metadata_percent=1.0)})  # as a live read gives them
        thin, thick = pool_facts(known, report.vg_name, "pool", offer_thick=True)
        thin_lvs = [lv for lv in report.lvs if lv.is_thin_volume and lv.pool_lv == "pool"]
        assert thin.provisioned_bytes + thin.snapshot_bytes == sum(
            lv.size_bytes for lv in thin_lvs)
        cow = sum(lv.size_bytes for lv in report.lvs if lv.attr.volume_type == "s")
        thick_lvs = sum(lv.size_bytes for lv in report.lvs if lv.is_thick)
        assert (thick.provisioned_bytes, thick.snapshot_bytes, thick.used_bytes,
                thick.total_bytes) == (thick_lvs, cow, thick_lvs + cow,
                                       report.vg_free_bytes + thick_lvs + cow)


# -- absurd but parseable figures -------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, GiB - 1, GiB, 29 * GiB // 100, 2 ** 40 + 12345,
                                   2 ** 64 - 1, 2 ** 64, 10 ** 22 + 7, MAX_CAPACITY_BYTES])
def test_gib_rounding_is_exact_up_to_the_largest_figure(value):
    exact = Decimal(value) / Decimal(GiB)
    cent = Decimal("0.01")
    assert bytes_to_gb_down(value) == float(exact.quantize(cent, rounding=ROUND_FLOOR))
    assert bytes_to_gb_up(value) == float(exact.quantize(cent, rounding=ROUND_CEILING))


@pytest.mark.parametrize("value", [MAX_CAPACITY_BYTES + 1, 4 * 10 ** 36, 10 ** 400])
def test_a_byte_count_beyond_any_pool_is_refused_in_one_line(value):
    with pytest.raises(ValueError, match="is more than 2.76 bytes") as refused:
        bytes_to_gb_down(value)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200
    facts = PoolFacts(pool_name="p", total_bytes=value, free_bytes=0, provisioned_bytes=0,
                      thin_provisioning_support=True, thick_provisioning_support=False)
    with pytest.raises(InvalidInput, match="total_bytes is .* more than 2.76") as refused:
        build_pool_stats(facts, max_over_subscription_ratio=2.0, reserved_percentage=0)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 300


def _cow_text(pe_count: str) -> tuple[str, str, list[str]]:
    capture = json.loads((CAPTURED / "combination-cow-of-thin-volume.json").read_text())
    text = (CAPTURED / "combination-cow-of-thin-volume.mda.txt").read_text()
    return re.sub(r"\bpe_count = \d+", f"pe_count = {pe_count}", text), \
        capture["vg_name"], capture["pv_uuids"]


@pytest.mark.parametrize("pe_count, named", [
    (str(10 ** 30), "integer 100000000000000000000000... (31 characters)"),
    ("9" * 5000, "(5000 characters) is beyond the 64 bits"),
    (str(2 ** 64), "integer 18446744073709551616"),
    (str(2 ** 32), "pe_count 4294967296 is more than LVM's 32-bit extent count"),
])
def test_a_metadata_text_with_an_absurd_extent_count_is_not_read(pe_count, named):
    with pytest.raises(MetadataUnsupported, match=re.escape(named)):
        report_from_text(*_cow_text(pe_count))


@pytest.mark.parametrize("field, value, named", [
    ("vg_size", str(10 ** 30 * 4 * 2 ** 20), "field 'vg_size' is 419430400000000000000000000000"),
    ("vg_size", "9" * 5000, "(5000 digits): more than the 2^64 bytes"),
    ("vg_size", str(2 ** 63), "VG size 9223372036854775808 bytes is more than the "
                              "4294967295 extents"),
    ("lv_size", str(2 ** 62), "size 4611686018427387904 bytes is more than the 4294967295"),
    ("vg_extent_size", str(2 ** 50), "extent size 1125899906842624 bytes is not within"),
])
def test_an_lvs_report_with_absurd_figures_takes_the_pools_down_saying_which(
        sim, tmp_path, field, value, named):  # noqa: F811 - the fixture
    """Stats report every pool down with one line naming the figure; a create is refused
    with it; no arithmetic exception (decimal, overflow) reaches the caller."""
    driver = make(tmp_path, lvm_metadata_parse=False)
    driver.create_volume("volume-a", 1)
    rows = report_rows(sim, driver)
    for row in rows:
        if field != "lv_size" or row["lv_name"] == "volume-a":
            row[field] = value
    serve_report(sim, rows)
    stats = driver.get_volume_stats(refresh=True)
    reasons = {pool["pool_name"]: pool.get("down_reason", "") for pool in stats["pools"]}
    assert {pool["backend_state"] for pool in stats["pools"]} == {"down"}
    assert all(named in reason and "\n" not in reason for reason in reasons.values()), reasons
    for extra in (None, {"provisioning:type": "thick"}):
        with pytest.raises(BackendUnavailable, match=re.escape(named)):
            driver.create_volume("volume-b", 1, extra_specs=extra)


def test_lvs_refuses_a_size_of_64_bits_or_more():
    row = {"vg_name": "vg", "vg_size": str(2 ** 64), "vg_free": "0",
           "vg_extent_size": "4194304", "lv_name": "lv", "lv_size": "0",
           "lv_attr": "-wi-a-----", "pool_lv": "", "origin": "", "data_percent": "",
           "metadata_percent": "", "lv_tags": ""}
    with pytest.raises(LVMOutputError, match="more than the 2.64 bytes"):
        parse_lvs_report(json.dumps({"report": [{"lv": [row]}]}), "vg")
