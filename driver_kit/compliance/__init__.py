"""driver_kit.compliance: certify a volume driver against Cinder's capacity specs.

A catalogue of checks (``CATALOGUE``), each with a stable id, a title, the spec
clause it enforces and a severity (must / should), run three ways over the same
code: ``run_checks()`` / ``driver-kit check`` (table, JSON, JUnit XML), the
pytest plugin (``pytest --driver-kit-driver module:Class``), and the testtools
base class ``driver_kit.compliance.testing.ComplianceTestCase``. The driver's
``ComplianceHooks`` (``driver_kit.compliance.hooks``) let the checks compare its
reports with what the backend itself says.
"""

from driver_kit.compliance.checks import CATALOGUE, SETUP, Check, find_checks
from driver_kit.compliance.hooks import (REQUIRED_HOOKS, BackendTruth, ComplianceHooks,
                                         PoolTruth, VolumeTruth, find_hooks, register_hooks)
from driver_kit.compliance.report import (format_table, junit_xml, report_to_dict,
                                          write_json, write_junit)
from driver_kit.compliance.runner import (CheckResult, DriverSpec, LoadError, RunReport,
                                          Runner, load_driver, load_hooks, run_checks)

__all__ = ["CATALOGUE", "REQUIRED_HOOKS", "SETUP", "BackendTruth", "Check", "CheckResult",
           "ComplianceHooks", "DriverSpec", "LoadError", "PoolTruth", "RunReport", "Runner",
           "VolumeTruth", "find_checks", "find_hooks", "format_table", "junit_xml",
           "load_driver", "load_hooks", "register_hooks", "report_to_dict", "run_checks",
           "write_json", "write_junit"]
