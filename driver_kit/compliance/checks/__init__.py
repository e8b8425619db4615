"""The catalogue: every compliance check with its id, title, spec clause and severity.

Two kinds. *Report* checks judge every report the run sees (the first, and one per
state of the tour, ``checks.tour``): their form with ``driver_kit.validate_stats``
(each maps to its violation ids; the rules live in one place) and their content
against the backend's truth (``checks.truth``). *Behaviour* checks drive a live
driver through the kit's operations API on every pool and provisioning type and
read the effect back from its reports and from the truth hook. A check raises
``CheckFailed``, ``CheckSkipped`` or ``CheckError``; returning means it passed (a
returned string is a note for the result). A check lists the hooks it needs; the
runner skips it without them (``hooks.required`` fails instead).

Every volume a check creates is named with the run's prefix and registered for
clean-up *before* the create is attempted, so the runner can remove it even when
the check fails, raises or hangs.

One module per family of checks, each with its ``CHECKS``; the catalogue is
assembled here, in the order a run reports them.
"""

from __future__ import annotations

import fnmatch
from typing import Mapping

from driver_kit.compliance.checks import (admission, data, failclosed, operations,
                                          provisioned, races, report, resources, truth)
from driver_kit.compliance.checks.base import (Check, CheckContext, CheckError, CheckFailed,
                                               CheckSkipped, set_up)
from driver_kit.compliance.hooks import (BackendTruth, ComplianceHooks, PoolTruth,
                                         VolumeTruth, register_hooks)

__all__ = ["BY_ID", "CATALOGUE", "SETUP", "BackendTruth", "Check", "CheckContext", "CheckError",
           "CheckFailed", "CheckSkipped", "ComplianceHooks", "PoolTruth", "VolumeTruth",
           "find_checks", "register_hooks", "set_up"]

SETUP = Check(
    id="driver.setup", title="The driver loads, is a driver_kit VolumeDriver and sets up",
    clause="harness: the volume manager's lifecycle (construct, do_setup, "
           "check_for_setup_error)", severity="must", kind="setup")

CATALOGUE: tuple[Check, ...] = (
    *truth.HOOK_CHECKS, *report.CHECKS, *truth.CHECKS, *provisioned.CHECKS,
    *admission.CHECKS, *races.CHECKS, *operations.CHECKS, *data.CHECKS, *resources.CHECKS,
    *failclosed.CHECKS,
)

#: the catalogue indexed by check id
BY_ID: Mapping[str, Check] = {c.id: c for c in CATALOGUE}


def find_checks(patterns: list[str] | tuple[str, ...] | None) -> tuple[Check, ...]:
    """The catalogue entries matching ids or shell patterns (all when ``patterns`` is empty).

    Raises ``ValueError`` naming any pattern that matches nothing.
    """
    if not patterns:
        return CATALOGUE
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(c.id, p) for c in CATALOGUE)]
    if unknown:
        raise ValueError(f"no check matches {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(BY_ID)}")
    return tuple(c for c in CATALOGUE if any(fnmatch.fnmatchcase(c.id, p) for p in patterns))
