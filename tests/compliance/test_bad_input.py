"""Bad input: each problem is a failed or errored check with its reason, the run goes
on, and what the harness created is cleaned up."""

import json
import os
import threading

import pytest

from driver_kit.compliance import CATALOGUE, DriverSpec, Runner, run_checks
from driver_kit.compliance.cli import main_check
from tests.compliance.drivers import (HAND_WRITTEN_HOOKS, HAND_WRITTEN_OPERATIONS_HOOKS,
                                      RELEASE, SPARSE_HOOKS, HandWrittenOperations,
                                      HandWrittenReport, HangsOnStats, RaisesOnCreate,
                                      memory_factory, sparse_config)

ALL = {c.id for c in CATALOGUE}


def setup_failure(report):
    setup = report.results[0]
    assert setup.id == "driver.setup" and setup.status == "failed"
    assert report.by_status("errored") == ALL  # every check says it was not run
    assert all("not run: driver.setup failed" in r.reason for r in report.results[1:])
    assert report.exit_code == 1
    return setup.reason


@pytest.mark.parametrize("spec, expected", [
    (DriverSpec(driver="no_such_vendor.driver:Driver"),
     "cannot import 'no_such_vendor.driver' for driver 'no_such_vendor.driver:Driver': "
     "ModuleNotFoundError: No module named"),
    (DriverSpec(driver="contrib.sparse_file_driver:NoSuchDriver"),
     "module 'contrib.sparse_file_driver' has no 'NoSuchDriver'"),
    (DriverSpec(driver="collections:OrderedDict"), "not a driver_kit.VolumeDriver subclass"),
    (DriverSpec(driver="contrib.sparse_file_driver:SparseFileDriver",
                config_files=("/nonexistent/driver-kit.conf",)),
     "config file /nonexistent/driver-kit.conf: no such file"),
    (DriverSpec(driver="contrib.sparse_file_driver:SparseFileDriver"),
     "sparse_pool_dir is required"),  # do_setup raises: the driver is not usable
], ids=["module", "class", "not-a-driver", "config-file", "setup-raises"])
def test_a_driver_that_cannot_be_set_up(spec, expected):
    assert expected in setup_failure(run_checks(spec=spec, timeout_s=10))


def test_a_backend_that_does_not_exist(tmp_path):
    spec = DriverSpec(config_files=(sparse_config(tmp_path),), backend="nosuch")
    assert "unknown backend 'nosuch'" in setup_failure(run_checks(spec=spec, timeout_s=10))


def test_hooks_that_do_not_load(tmp_path):
    spec = DriverSpec(config_files=(sparse_config(tmp_path),))
    report = Runner(spec=spec, hooks_path="tests.compliance.drivers:NO_HOOKS").run()
    assert "has no 'NO_HOOKS'" in setup_failure(report)
    report = Runner(spec=spec, hooks_path="tests.compliance.drivers:LEAKED_FILES").run()
    assert "not ComplianceHooks" in setup_failure(report)


def test_the_command_reports_a_driver_that_does_not_import(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main_check(["--driver", "no_such_vendor:Driver", "--json", str(out)]) == 1
    table = capsys.readouterr().out
    assert "driver.setup" in table and "FAIL (must)" in table and "no_such_vendor" in table
    doc = json.loads(out.read_text())
    assert len(doc["results"]) == len(ALL) + 1 and doc["exit_code"] == 1


def test_a_factory_that_makes_no_driver():
    report = run_checks(lambda: object(), timeout_s=10)
    assert "has no get_volume_stats(): not a driver" in setup_failure(report)


def test_a_report_only_object_gets_report_checks_and_says_why_no_more():
    report = run_checks(lambda: HandWrittenReport(lambda pool: None), hooks=HAND_WRITTEN_HOOKS,
                        timeout_s=10)
    assert report.by_status("failed", "errored") == set()
    behaviour = {c.id for c in CATALOGUE if c.kind == "behaviour"}
    skipped = {r.id: r.reason for r in report.results if r.status == "skipped"}
    assert set(skipped) == behaviour | {"admission.fill-to-cap"}
    assert "lacks driver_kit's operations API" in skipped["ops.delete-missing"]
    assert "no operations API: only the first report is judged" in \
        skipped["admission.fill-to-cap"]


def test_a_pool_whose_room_cannot_be_told(tmp_path):
    """No configuration to read and no ratio in the report: the checks that need the
    room of the pool error, saying why; the others still run."""
    make = memory_factory(tmp_path)
    report = run_checks(lambda: HandWrittenOperations(make(), omit=(
        "capacity_factors", "max_volume_size_gb", "max_over_subscription_ratio"),
        settings=False), hooks=HAND_WRITTEN_OPERATIONS_HOOKS,
        only=["provisioned.*", "admission.*-over-cap", "ops.*"], timeout_s=20)
    errored = {r.id: r.reason for r in report.results if r.status == "errored"}
    runs_without_room = {"provisioned.counts-out-of-band", "ops.create-existing",
                         "ops.delete-missing", "ops.delete-missing-snapshot",
                         "ops.delete-snapshot", "ops.missing-volume", "ops.snapshot-existing"}
    # no device path, no stray hook
    skipped = {"ops.device-path", "provisioned.ignores-strays"}
    assert report.by_status("skipped") == skipped
    assert set(errored) == {c.id for c in report.results[1:]} - runs_without_room - skipped
    assert set(errored.values()) == {
        "cannot tell how much room pool 'mem' (thin) has: neither the driver's "
        "configuration nor the report of pool 'mem' gives its max_over_subscription_ratio"}
    assert report.by_status("passed") == {"driver.setup"} | runs_without_room


def test_a_driver_that_raises_inside_checks(tmp_path):
    report = run_checks(memory_factory(tmp_path, RaisesOnCreate), timeout_s=10)
    errored = {r.id: r.reason for r in report.results if r.status == "errored"}
    assert "provisioned.create-delete" in errored
    assert all("RuntimeError: array exploded (at drivers.py" in why for why in errored.values())
    assert {c.id for c in CATALOGUE if c.kind == "report"} <= report.by_status("passed")
    assert "ops.delete-missing" in report.by_status("passed")  # the run went on
    assert report.exit_code == 1


def test_a_driver_that_hangs(tmp_path):
    spec = DriverSpec(driver="tests.compliance.drivers:HangsOnExtend",
                      config_files=(sparse_config(tmp_path),))
    runner = Runner(spec=spec, hooks=SPARSE_HOOKS, timeout_s=0.5,
                    only=["admission.*-over-cap", "admission.parallel-threads", "ops.*",
                          "provisioned.create-delete"])
    report = runner.run()
    errored = {r.id: r.reason for r in report.results if r.status == "errored"}
    assert set(errored) == {"admission.extend-over-cap", "ops.extend-readback",
                            "ops.extend-smaller", "ops.missing-volume", "ops.unaligned-size"}
    assert all("did not finish within 0.5 s" in why for why in errored.values())
    assert report.by_status("passed") >= {"ops.create-existing", "ops.delete-missing",
                                           "admission.create-over-cap"}
    # the volumes the abandoned checks created were deleted all the same
    assert sorted(os.listdir(tmp_path / "pool")) == [".snapshots"]


def test_a_report_that_never_comes(tmp_path):
    made, make = [], memory_factory(tmp_path, HangsOnStats)

    def factory():
        made.append(make())
        return made[-1]
    report = run_checks(factory, only=["stats.*"], timeout_s=0.3)
    reasons = {r.id: r.reason for r in report.results if r.status == "errored"}
    assert set(reasons) == {c.id for c in CATALOGUE if c.id.startswith("stats.")}
    assert reasons["stats.gib-2-decimals"] == \
        "an earlier get_volume_stats(refresh=True) never finished"
    assert "did not finish within 0.3 s" in reasons["stats.refresh-cached"]
    # one wait for the report, not one per report check: once every abandoned call
    # has returned, the set-up driver (the first made) was asked exactly once
    RELEASE.set()
    for thread in threading.enumerate():
        if thread.name.startswith("driver-kit-"):
            thread.join(10)
    assert made[0].stats_calls == 1


def test_runner_refuses_nonsense_arguments():
    with pytest.raises(ValueError, match="no check matches"):
        Runner(lambda: None, only=["nope"])
    with pytest.raises(ValueError, match="factory or a DriverSpec"):
        Runner()
    with pytest.raises(ValueError, match="timeout"):
        Runner(lambda: None, timeout_s=0)
    with pytest.raises(ValueError, match="unknown check"):
        Runner(lambda: None).run_one("nope")
