"""``driver-kit check --cinder-driver``: existing Cinder drivers judged as they are,
through Cinder's driver interface and Cinder's own objects.

Cinder runs in a process of its own (the harness's command, as a user runs it):
importing Cinder imports eventlet, which would break this process's other tests.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from driver_kit.compliance.cinder_front import ADMISSION_CHECKS, CINDER_MANAGER_GUARDS
from driver_kit.compliance.options import build_runner
from driver_kit.compliance.report import format_table, junit_xml
from driver_kit.compliance.runner import CheckResult, RunReport
from tests.compliance import cinder_lvm

# found, not imported: importing Cinder here would import eventlet into this process
if importlib.util.find_spec("cinder") is None:
    pytest.skip("Cinder is not installed (the cinder extra)", allow_module_level=True)

#: the checks the host lane runs on Cinder's LVM driver: each LVM command is a process
#: through cinder-rootwrap (about a second), the report checks' tour ~130 of them, so the
#: whole catalogue takes ~8 minutes (docs/cinder-lvm-findings.md has its figures)
HOST_LANE = ("hooks.independent", "stats.required-fields", "truth.*",
             "provisioned.excludes-snapshots", "ops.unaligned-size", "ops.create-existing",
             "admission.*")


def check(env: dict[str, str], workdir: Path, driver: str, hooks: str,
          only: tuple[str, ...] = ()) -> dict:
    """Run ``driver-kit check --cinder-driver`` and return its JSON report."""
    out = workdir / "report.json"
    argv = [sys.executable, "-m", "driver_kit.cli", "check", "--cinder-driver", driver,
            "--cinder-config", str(workdir / "cinder.conf"), "--hooks", hooks,
            "--json", str(out), "--scale", "2", "--timeout", "300"]
    if only:
        argv += ["--only", *only]
    proc = subprocess.run(argv, env=env, cwd=workdir, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert out.is_file(), proc.stdout + proc.stderr
    return json.loads(out.read_text())


def by_id(report: dict) -> dict[str, dict]:
    return {r["id"]: r for r in report["results"]}


def test_cinder_lvm_driver_on_the_simulator(tmp_path):
    env = cinder_lvm.make_host(tmp_path, state=tmp_path / "state.json")
    report = check(env, tmp_path, cinder_lvm.DRIVER,
                   "tests.compliance.cinder_lvm:simulator_hooks", HOST_LANE)
    results = by_id(report)
    assert results["driver.setup"]["status"] == "passed", results["driver.setup"]
    # enforcing the cap is Cinder's scheduler's job: said so, apart from wrong numbers
    for check_id in ADMISSION_CHECKS:
        assert results[check_id]["status"] == "delegated"
        assert "relies on the scheduler" in results[check_id]["reason"]
    assert results["ops.create-existing"]["status"] == "skipped"
    # what docs/cinder-lvm-findings.md publishes
    expected = {
        "stats.required-fields": "failed",       # the ratio is the string '20.0'
        "truth.provisioned": "failed",           # snapshots counted as provisioned
        "provisioned.excludes-snapshots": "failed",
        "truth.total-volumes": "failed",         # the thin pool and snapshots counted
        "truth.free": "failed",                  # the thin pool's metadata ignored
        "hooks.independent": "passed", "truth.pools": "passed", "truth.total": "passed",
        "ops.unaligned-size": "passed",          # managed as 3 GiB, extended from there
    }
    assert {k: results[k]["status"] for k in expected} == expected, \
        {k: results[k]["reason"] for k in expected}
    assert "'20.0'" in results["stats.required-fields"]["reason"]
    assert "reports total_volumes 1, the backend has 0" in \
        results["truth.total-volumes"]["reason"]
    assert report["exit_code"] == 1  # must checks failed: the findings above


def test_this_projects_cinder_adapter(tmp_path):
    env = cinder_lvm.make_adapter_host(tmp_path)
    report = check(env, tmp_path, "contrib.cinder_adapter.DriverKitVolumeDriver",
                   "tests.compliance.cinder_lvm:adapter_hooks")  # every check: seconds
    results = by_id(report)
    blocking = {k: r["reason"] for k, r in results.items()
                if r["severity"] == "must" and r["status"] in ("failed", "errored")}
    assert blocking == {}
    assert report["exit_code"] == 0
    assert {k for k, r in results.items() if r["status"] == "delegated"} == \
        set(ADMISSION_CHECKS)


def test_the_pytest_plugin_takes_a_cinder_driver_too(tmp_path):
    env = cinder_lvm.make_adapter_host(tmp_path)
    proc = subprocess.run(
        # the plugin comes by its pytest11 entry point
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs",
         "--rootdir", str(tmp_path),
         "--driver-kit-cinder-driver", "contrib.cinder_adapter.DriverKitVolumeDriver",
         "--driver-kit-cinder-config", str(tmp_path / "cinder.conf"),
         "--driver-kit-backend", "kit-lvm",
         "--driver-kit-hooks", "tests.compliance.cinder_lvm:adapter_hooks",
         "--driver-kit-only", "stats.required-fields",
         "--driver-kit-only", "admission.create-over-cap"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed, 1 skipped" in proc.stdout  # driver.setup, the stats check
    assert "relies on the scheduler" in proc.stdout


@pytest.mark.parametrize("values, message", [
    ({"cinder_config": ["c.conf"]}, "--cinder-config goes with --cinder-driver"),
    ({"cinder_driver": "x.Y", "cinder_config": ["c.conf"], "driver": "a:B"},
     "not --driver or --config-file"),
    ({"cinder_driver": "x.Y"}, "needs its cinder.conf"),
    ({"cinder_driver": "x.Y", "cinder_config": ["/nonexistent/cinder.conf"]},
     "no cinder.conf at '/nonexistent/cinder.conf'"),
])
def test_usage_errors_say_what_to_give(values, message):
    base = {"driver": None, "config_files": [], "backend": None, "hooks": None,
            "only": [], "timeout": 60.0, "scale": 64, "cinder_driver": None,
            "cinder_config": []}
    with pytest.raises(ValueError, match=message):
        build_runner({**base, **values})


def test_relying_on_the_scheduler_is_reported_apart_and_never_blocks():
    result = CheckResult(id="admission.create-over-cap", title="t", clause="c",
                         severity="must", status="delegated",
                         reason="relies on the scheduler: ...", duration_s=0.0)
    report = RunReport(driver="d", started_at="now", duration_s=1.0, results=(result,),
                       profile={})
    assert report.exit_code == 0 and report.counts()["delegated"] == 1
    table = format_table(report)
    assert "SCHEDULER" in table and "1 relying on the scheduler" in table
    assert '<skipped message="relies on the scheduler' in junit_xml(report)


def test_every_check_not_for_cinder_is_in_the_catalogue():
    from driver_kit.compliance import CATALOGUE
    ids = {c.id for c in CATALOGUE}
    assert set(ADMISSION_CHECKS) | set(CINDER_MANAGER_GUARDS) <= ids
    assert {c for c in ids if c.startswith("admission.")} == set(ADMISSION_CHECKS)
