"""pytest plugin: every compliance check becomes a test item.

Registered as the ``pytest11`` entry point ``driver_kit`` (or load it with
``-p driver_kit.compliance.pytest_plugin``). It does nothing unless
``--driver-kit-driver`` or ``--driver-kit-config`` is given::

    pytest --driver-kit-driver contrib.sparse_file_driver:SparseFileDriver \\
           --driver-kit-config pool.conf --driver-kit-backend sparse

A *must* check that fails is a failed test; an errored check (the driver raised
or hung) is a test error; a skipped check is skipped with its reason; a *should*
check that fails is reported as xfail, so it is seen without failing the run.
"""

from __future__ import annotations

from typing import Any

import pytest

from driver_kit.compliance.checks import SETUP
from driver_kit.compliance.options import OPTIONS, add_options, build_runner
from driver_kit.compliance.runner import CheckResult, Runner

_RUNNER = pytest.StashKey[Runner]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("driver-kit", "driver_kit compliance harness")
    add_options(group.addoption, "pytest")


def pytest_configure(config: pytest.Config) -> None:
    if not (config.getoption("driver_kit_driver") or config.getoption("driver_kit_config")
            or config.getoption("driver_kit_cinder_driver")):
        return
    try:
        runner = build_runner({option.key: config.getoption(option.pytest_dest)
                               for option in OPTIONS})
    except ValueError as exc:
        raise pytest.UsageError(f"driver-kit: {exc}") from None
    config.stash[_RUNNER] = runner


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect, so they apply to checks too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if config.stash.get(_RUNNER, None) is None:
        return
    suite = ComplianceSuite.from_parent(session, name="driver-kit", nodeid="driver-kit")
    checks = suite.collect()
    # reported like any collector's result, so the items are counted and listed
    config.hook.pytest_collectreport(
        report=pytest.CollectReport(suite.nodeid, "passed", None, checks))
    items.extend(checks)


def _explain(result: CheckResult) -> str:
    return (f"{result.id} [{result.severity}] {result.status}: {result.title}\n"
            f"  clause: {result.clause}\n  reason: {result.reason}")


class ComplianceSuite(pytest.Collector):
    """The catalogue as a collector of one item per check (setup first)."""

    def collect(self) -> list[pytest.Item]:
        runner = self.config.stash[_RUNNER]
        return [ComplianceItem.from_parent(self, name=check.id, check_id=check.id)
                for check in (SETUP, *runner.checks)]


class ComplianceItem(pytest.Item):
    """One check; it runs in setup so that an errored check shows as a test error."""

    def __init__(self, *, check_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check_id = check_id
        self.result: CheckResult | None = None

    def setup(self) -> None:
        runner = self.config.stash[_RUNNER]
        self.result = runner.setup() if self.check_id == SETUP.id \
            else runner.run_one(self.check_id)
        if self.result.status == "errored":
            pytest.fail(_explain(self.result), pytrace=False)

    def runtest(self) -> None:
        result = self.result
        assert result is not None
        if result.status in ("skipped", "delegated"):
            pytest.skip(result.reason)
        if result.status == "failed":
            if result.severity == "should":
                pytest.xfail(f"should-level check failed: {result.reason}")
            pytest.fail(_explain(result), pytrace=False)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"driver-kit check {self.check_id}"
