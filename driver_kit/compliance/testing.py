"""A testtools base class: subclass it in your own tree to certify your driver.

::

    from driver_kit.compliance.testing import ComplianceTestCase

    class TestMyDriverCompliance(ComplianceTestCase):
        def make_driver(self):              # a fresh driver, not yet set up
            return MyDriver(load_backend_config(overrides={...}))

        def break_listing(self, driver):    # hooks the driver does not ship
            ...

Every catalogue check becomes one test method (``test_stats_gib_2_decimals``,
...). A failed *must* check fails its test; a failed *should* check is an
expected failure; a skipped check skips with its reason; an errored check
(the driver raised or hung) is a test error. Set ``driver_spec`` (a
``DriverSpec`` naming the driver by path) to enable the multi-process check;
without ``make_driver`` the spec alone builds the drivers.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

import testtools

from driver_kit.compliance.checks import CATALOGUE, ComplianceHooks
from driver_kit.compliance.runner import CheckResult, DriverSpec, Runner

__all__ = ["ComplianceTestCase", "ComplianceError"]

_HOOKS = tuple(f.name for f in fields(ComplianceHooks))


class ComplianceError(RuntimeError):
    """A check errored: the driver raised, hung, or could not be set up."""


class ComplianceTestCase(testtools.TestCase):
    """Base of a vendor's compliance suite; collected only in subclasses.

    The driver's own hooks (``driver_kit.compliance.hooks``) are used; a method
    named after a ``ComplianceHooks`` field, taking that hook's arguments after
    ``self`` (``create_out_of_band(self, driver, name, size_gb, pool_name)``),
    adds or replaces one.
    """

    __test__ = False
    #: names the driver by path (enables the multi-process check)
    driver_spec: ClassVar[DriverSpec | None] = None
    #: seconds each check may take before it is abandoned
    check_timeout_s: ClassVar[float] = 60.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__test__" not in cls.__dict__:
            cls.__test__ = True

    def make_driver(self) -> Any:
        """A fresh driver, not yet set up (the harness calls do_setup as Cinder does)."""
        raise NotImplementedError

    def compliance_hooks(self) -> ComplianceHooks:
        """The hooks this class defines (methods named after ComplianceHooks fields)."""
        return ComplianceHooks(**{name: getattr(self, name) for name in _HOOKS
                                  if getattr(type(self), name, None) is not None})

    def run_compliance_check(self, check_id: str) -> CheckResult:
        """Run one catalogue check and turn its verdict into this test's outcome."""
        has_factory = type(self).make_driver is not ComplianceTestCase.make_driver
        if not has_factory and self.driver_spec is None:
            self.skipTest("define make_driver() or driver_spec to run the compliance checks")
        runner = Runner(self.make_driver if has_factory else None, spec=self.driver_spec,
                        hooks=self.compliance_hooks(), discover_hooks=True,
                        only=[check_id], timeout_s=self.check_timeout_s)
        result = runner.run_one(check_id)
        text = f"{result.id} [{result.severity}]: {result.reason}\nclause: {result.clause}"
        if result.status in ("skipped", "delegated"):
            self.skipTest(result.reason)
        elif result.status == "errored":
            raise ComplianceError(text)
        elif result.status == "failed" and result.severity == "should":
            # always raises: reported as an expected failure, not a failed test
            self.expectFailure(f"should-level check {result.id} failed", self.fail, text)
        elif result.status == "failed":
            self.fail(text)
        return result


def _test_method(check_id: str, title: str) -> Any:
    def test(self: ComplianceTestCase) -> None:
        self.run_compliance_check(check_id)
    test.__name__ = "test_" + check_id.replace(".", "_").replace("-", "_")
    test.__doc__ = f"{check_id}: {title}"
    return test


for _check in CATALOGUE:
    _method = _test_method(_check.id, _check.title)
    setattr(ComplianceTestCase, _method.__name__, _method)
del _check, _method
