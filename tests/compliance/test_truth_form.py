"""A report field of the wrong form is the report rules' to flag; it must not hide what
the truth checks find wrong in the other fields (Cinder's LVM driver reports its ratio
as the string '20.0': every truth check then passed unexamined)."""

from __future__ import annotations

from driver_kit import GiB
from driver_kit.compliance import BackendTruth, PoolTruth, VolumeTruth
from driver_kit.compliance.checks import truth
from driver_kit.compliance.checks.expect import Settings

TRUTH = BackendTruth(
    pools=(PoolTruth(pool_name="p", capacity_bytes=10 * GiB, used_bytes=0),),
    volumes=(VolumeTruth(name="v", pool_name="p", size_bytes=GiB, thin=True),
             VolumeTruth(name="s", pool_name="p", size_bytes=GiB, thin=True,
                         snapshot_of="v")))
SETTINGS = Settings(ratio=20.0, reserved_percentage=0)


def report(**pool: object) -> dict:
    base = {"pool_name": "p", "total_capacity_gb": 10.0, "free_capacity_gb": 10.0,
            "provisioned_capacity_gb": 1.0, "reserved_percentage": 0,
            "max_over_subscription_ratio": 20.0, "thin_provisioning_support": True,
            "thick_provisioning_support": False, "total_volumes": 1,
            "location_info": "x", "QoS_support": False, "multiattach": False}
    return {"volume_backend_name": "b", "vendor_name": "v", "driver_version": "1",
            "storage_protocol": "iSCSI", "pools": [{**base, **pool}]}


def problems(check_id: str, doc: dict) -> list[str]:
    return truth.problems_in(doc, TRUTH, SETTINGS, truth._COMPARISONS[check_id],
                             truth._READS[check_id])


def test_a_string_ratio_does_not_hide_a_wrong_provisioned_or_volume_count():
    doc = report(max_over_subscription_ratio="20.0", provisioned_capacity_gb=2.0,
                 total_volumes=3)
    assert problems("truth.provisioned", doc)
    assert problems("truth.total-volumes", doc)
    assert not problems("truth.total", doc)


def test_the_malformed_field_itself_is_left_to_the_report_rules():
    doc = report(max_over_subscription_ratio="20.0")
    assert not problems("truth.ratio", doc)
    doc = report(provisioned_capacity_gb="1.0")
    assert not problems("truth.provisioned", doc)
