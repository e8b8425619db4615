"""The three ways to run the harness: driver-kit check, the pytest plugin, testtools."""

import json
import os
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET
from collections import Counter
from importlib import metadata
from pathlib import Path

import testtools

from driver_kit import load_backend_config
from driver_kit.compliance import CATALOGUE, DriverSpec, Runner, load_driver
from driver_kit.compliance.cli import main_check
from driver_kit.compliance.testing import ComplianceTestCase
from tests.compliance.broken import AlwaysRefreshes, DeleteMissingRaises
from tests.compliance.drivers import SnapMemoryDriver, sparse_config

ROOT = Path(__file__).resolve().parents[2]
SPARSE = "contrib.sparse_file_driver:SparseFileDriver"
IDS = ["driver.setup"] + [c.id for c in CATALOGUE]
#: what the sparse driver is not tested on: it has no copies and no request counter
NO_COPIES = ["admission.copy-over-cap", "ops.copy-readback", "hooks.calls-counted"]


def memory_config(tmp_path):
    path = tmp_path / "mem.conf"
    path.write_text(f"[DEFAULT]\nenabled_backends = mem\n\n[mem]\nlock_path = {tmp_path}/locks\n"
                    f"max_over_subscription_ratio = 2.0\n")
    return str(path)


# ------------------------------------------------------------------ driver-kit check

def test_check_command_writes_table_json_and_junit(tmp_path, capsys):
    out_json, out_xml = tmp_path / "r.json", tmp_path / "r.xml"
    code = main_check(["--driver", SPARSE, "--config-file", sparse_config(tmp_path),
                       "--json", str(out_json), "--junit", str(out_xml), "--timeout", "30"])
    table = capsys.readouterr().out
    assert code == 0, table
    assert table.splitlines()[0].split() == ["CHECK", "RESULT", "REASON"]
    assert "admission.parallel-processes" in table and "exit code 0" in table

    doc = json.loads(out_json.read_text())
    assert [r["id"] for r in doc["results"]] == IDS
    statuses = {r["id"]: r["status"] for r in doc["results"] if r["status"] != "passed"}
    assert statuses == {c: "skipped" for c in NO_COPIES}
    assert doc["exit_code"] == 0 and doc["summary"]["passed"] == len(IDS) - len(NO_COPIES)
    profile = doc["profile"]
    assert profile["thin_provisioning"] is True
    assert profile["ratio_enforced"] == {"create": True, "extend": True, "snapshot": True,
                                         "copy": None}
    assert profile["agrees_with_backend"] == dict.fromkeys(
        ["pools", "total", "free", "provisioned", "total-volumes", "total-volumes-group",
         "snapshot-capacity", "ratio"], True)
    assert profile["out_of_band_counted"] is True and profile["snapshots_apart"] is True
    # which hooks were there, where they were found and what they enabled
    truth = profile["hooks"]["read_truth"]
    assert truth["present"] and truth["required"] and "truth.free" in truth["enables"]
    assert truth["found_in"] == "contrib.sparse_file_driver.SparseFileDriver"
    assert profile["hooks"]["backend_calls"] == {
        "present": False, "required": False, "found_in": None,
        "enables": ["hooks.calls-counted", "stats.refresh-cached"]}
    assert "hooks: read_truth, create_out_of_band," in table
    assert "; missing backend_calls: hooks.calls-counted, stats.refresh-cached" in table

    suite = ET.parse(out_xml).getroot().find("testsuite")
    assert suite.get("tests") == str(len(IDS)) and suite.get("failures") == "0"
    assert [case.get("name") for case in suite.iter("testcase")] == IDS


def test_check_command_fails_on_a_must_check(tmp_path, capsys):
    out_json, out_xml = tmp_path / "r.json", tmp_path / "r.xml"
    code = main_check(["--driver", "tests.compliance.broken:DeleteMissingRaises",
                       "--config-file", memory_config(tmp_path),
                       "--json", str(out_json), "--junit", str(out_xml)])
    assert code == 1
    assert "ops.delete-missing" in capsys.readouterr().out
    doc = json.loads(out_json.read_text())
    failed = {r["id"]: r["severity"] for r in doc["results"] if r["status"] == "failed"}
    assert failed == {"ops.delete-missing": "must"}
    # the hooks of its base class were found; its memory is no backend processes share
    assert doc["profile"]["hooks"]["break_backend"]["present"] is True
    assert doc["profile"]["parallel_safe"] == {"threads": True, "processes": None}
    processes = next(r for r in doc["results"] if r["id"] == "admission.parallel-processes")
    assert processes["status"] == "skipped" and "not shared" in processes["reason"]
    failures = {case.get("name"): case.find("failure") for case in ET.parse(out_xml).iter(
        "testcase") if case.find("failure") is not None}
    assert {name: f.get("type") for name, f in failures.items()} == failed
    assert "idempotent" in failures["ops.delete-missing"].get("message")


def test_a_failed_should_check_does_not_fail_the_exit_code(tmp_path, capsys):
    code = main_check(["--driver", "tests.compliance.broken:AlwaysRefreshes",
                       "--config-file", memory_config(tmp_path), "--only", "stats.*"])
    table = capsys.readouterr().out
    assert code == 0
    assert "FAIL (should)" in table and "stats.refresh-cached" in table
    assert "provisioned.create-delete" not in table  # --only patterns select


def test_check_command_only_is_repeatable(tmp_path):
    out = tmp_path / "r.json"
    assert main_check(["--driver", SPARSE, "--config-file", sparse_config(tmp_path),
                       "--only", "stats.ratio-ge-1", "--only", "ops.delete-missing",
                       "ops.create-existing", "--json", str(out)]) == 0
    assert [r["id"] for r in json.loads(out.read_text())["results"]] == [
        "driver.setup", "stats.ratio-ge-1", "ops.create-existing", "ops.delete-missing"]


def test_check_command_usage_errors(capsys):
    assert main_check(["--only", "no.such-check"]) == 2
    assert "no check matches 'no.such-check'" in capsys.readouterr().err
    assert main_check(["--timeout", "soon"]) == 2
    assert main_check(["--scale", "0"]) == 2
    assert "scale must be a whole number of volumes >= 1" in capsys.readouterr().err


def test_check_command_defaults_to_the_lvm_simulator(capsys):
    assert main_check(["--only", "stats.*", "provisioned.create-delete"]) == 0
    assert "lvm_driver.driver.ThinLVMDriver" in capsys.readouterr().out


def test_a_driver_named_by_path_is_built_only_to_be_used(tmp_path):
    """No driver is built just to learn its class: one for the set-up and one for
    the check in this process, one in each child of the multi-process check."""
    spec = DriverSpec(driver="tests.compliance.drivers:LogsEachBuild",
                      config_files=(sparse_config(tmp_path),))
    report = Runner(spec=spec, only=["admission.parallel-processes"], timeout_s=30).run()
    assert report.by_status("passed") == {"driver.setup", "admission.parallel-processes"}
    builds = Counter((tmp_path / "builds.log").read_text().split())
    assert builds.pop(str(os.getpid())) == 2
    assert list(builds.values()) == [1, 1, 1, 1]


# ------------------------------------------------------------------ pytest plugin

def run_pytest(tmp_path, *args):
    plugin_installed = any(ep.name == "driver_kit"
                           for ep in metadata.entry_points(group="pytest11"))
    load = [] if plugin_installed else ["-p", "driver_kit.compliance.pytest_plugin"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "pytest", *load, "-p", "no:cacheprovider",
                           "-rfEsx", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_pytest_plugin_passes_the_sparse_driver(tmp_path):
    run = run_pytest(tmp_path, "--driver-kit-driver", SPARSE,
                     "--driver-kit-config", sparse_config(tmp_path),
                     "--driver-kit-backend", "sparse", "--junitxml", "out.xml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(IDS) - len(NO_COPIES)} passed, {len(NO_COPIES)} skipped" in run.stdout
    names = [c.get("name") for c in ET.parse(tmp_path / "out.xml").iter("testcase")]
    assert names == IDS


def test_pytest_plugin_reports_failures_skips_and_errors(tmp_path):
    run = run_pytest(tmp_path, "--driver-kit-driver", "tests.compliance.drivers:RaisesOnCreate",
                     "--driver-kit-config", memory_config(tmp_path),
                     "--driver-kit-hooks", "tests.compliance.drivers:SNAP_MEMORY_HOOKS",
                     "-k", "stats or ops")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "RuntimeError: array exploded" in run.stdout
    assert "ERROR at setup of driver-kit check ops.create-existing" in run.stdout
    assert "ops.create-existing [must] errored" in run.stdout
    selected = [i for i in IDS if "stats" in i or "ops" in i]
    assert f"collected {len(IDS)} items / {len(IDS) - len(selected)} deselected / " \
        f"{len(selected)} selected" in run.stdout  # -k applies


def test_pytest_plugin_only_is_repeatable(tmp_path):
    run = run_pytest(tmp_path, "--driver-kit-config", sparse_config(tmp_path),
                     "--driver-kit-only", "stats.ratio-ge-1",
                     "--driver-kit-only", "ops.delete-missing", "--junitxml", "out.xml")
    assert run.returncode == 0, run.stdout + run.stderr
    names = [c.get("name") for c in ET.parse(tmp_path / "out.xml").iter("testcase")]
    assert names == ["driver.setup", "stats.ratio-ge-1", "ops.delete-missing"]


def test_pytest_plugin_is_inert_without_a_driver(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    run = run_pytest(tmp_path)
    assert run.returncode == 0 and "1 passed" in run.stdout


# ------------------------------------------------------------------ testtools base

class TestMemoryDriverCompliance(ComplianceTestCase):
    """How a vendor uses the base: a factory, and hooks as methods (here the fault
    hooks; the others are the driver's own, found on its class)."""

    def setUp(self):
        super().setUp()
        self.lock_path = self.useFixture(TempDir()).path

    def make_driver(self):
        return SnapMemoryDriver(load_backend_config(overrides={
            "lock_path": self.lock_path, "max_over_subscription_ratio": "2.0"}))

    def break_backend(self, driver):
        driver.broken = True

    def break_listing(self, driver):
        driver.listing_broken = True

    def repair_backend(self, driver):
        driver.broken = driver.listing_broken = False
        driver.delay_s = 0.0


class TempDir:
    """A tiny testtools fixture (the fixtures package is not a dependency)."""

    def setUp(self):
        import tempfile
        self._dir = tempfile.TemporaryDirectory()
        self.path = self._dir.name

    def cleanUp(self):
        self._dir.cleanup()

    def getDetails(self):
        return {}


class TwoBugs(DeleteMissingRaises, AlwaysRefreshes):
    """Breaks a must rule (delete) and a should rule (cache)."""


class BrokenVendorSuite(ComplianceTestCase):
    __test__ = False  # run below through unittest, to look at its outcomes

    def make_driver(self):
        return TwoBugs(load_backend_config(overrides={
            "lock_path": os.path.join(self.tmp, "locks")}))

    break_backend = TestMemoryDriverCompliance.break_backend
    repair_backend = TestMemoryDriverCompliance.repair_backend


def test_testtools_base_maps_verdicts_to_outcomes(tmp_path):
    BrokenVendorSuite.tmp = str(tmp_path)
    result = testtools.TestResult()
    unittest.TestLoader().loadTestsFromTestCase(BrokenVendorSuite).run(result)
    assert result.testsRun == len(CATALOGUE)
    assert [t.id().rsplit(".", 1)[1] for t, _ in result.failures] == ["test_ops_delete_missing"]
    assert result.errors == []
    assert [t.id().rsplit(".", 1)[1] for t, _ in result.expectedFailures] == [
        "test_stats_refresh_cached"]
    # the processes are forked from make_driver; a memory array is not shared with them
    assert [t.id().rsplit(".", 1)[1] for reason, tests in result.skip_reasons.items()
            if "it is not shared between processes" in reason
            for t in tests] == ["test_admission_parallel_processes"]


def test_testtools_base_without_a_factory_skips():
    class Empty(ComplianceTestCase):
        __test__ = False
    result = testtools.TestResult()
    unittest.TestLoader().loadTestsFromTestCase(Empty).run(result)
    assert result.testsRun == len(CATALOGUE) and len(result.skip_reasons) == 1
    assert DriverSpec().describe() == "volume_driver of the config"


# ------------------------------------------------------------------ the three alike

class SparseByFactory(ComplianceTestCase):
    """A vendor's suite that only knows how to make its driver (no spec by path)."""

    __test__ = False  # run below, beside the other front ends
    config = ""

    def make_driver(self):
        return load_driver(DriverSpec(config_files=(self.config,)))()


def _method_id(test):
    name = test.id().rsplit(".", 1)[1]
    return next(c.id for c in CATALOGUE
                if name == "test_" + c.id.replace(".", "_").replace("-", "_"))


def test_the_three_front_ends_run_the_same_checks(tmp_path, capsys):
    """Each front end runs (does not skip) the same checks on the sparse driver, the
    multi-process admission check included, given a factory only in testtools."""
    config = sparse_config(tmp_path)
    assert main_check(["--config-file", config, "--json", str(tmp_path / "r.json"),
                       "--timeout", "30"]) == 0, capsys.readouterr().out
    command = {r["id"] for r in json.loads((tmp_path / "r.json").read_text())["results"]
               if r["status"] != "skipped"}
    run = run_pytest(tmp_path, "--driver-kit-config", config, "--junitxml", "out.xml")
    assert run.returncode == 0, run.stdout + run.stderr
    plugin = {case.get("name") for case in ET.parse(tmp_path / "out.xml").iter("testcase")
              if case.find("skipped") is None}
    SparseByFactory.config = config
    result = testtools.TestResult()
    unittest.TestLoader().loadTestsFromTestCase(SparseByFactory).run(result)
    assert result.wasSuccessful(), result.failures + result.errors
    skipped = {_method_id(t) for tests in result.skip_reasons.values() for t in tests}
    testtools_ran = {c.id for c in CATALOGUE} - skipped | {"driver.setup"}
    assert command == plugin == testtools_ran
    assert "admission.parallel-processes" in testtools_ran
