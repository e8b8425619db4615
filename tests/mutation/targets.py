"""The drivers mutation testing mutates, and how the harness is run on each of them."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

__all__ = ["TARGETS", "Target"]


@dataclass(frozen=True, slots=True)
class Target:
    """One driver file to mutate and the ``run_checks`` arguments that certify it."""

    name: str
    #: the file cosmic-ray mutates, relative to the repository root
    path: str
    #: the module that file is imported as
    module: str
    #: ``run_checks`` keyword arguments for a fresh scratch directory
    checks: Callable[[Path], dict[str, Any]]


def _sparse(scratch: Path) -> dict[str, Any]:
    from driver_kit.compliance import DriverSpec
    from tests.compliance.drivers import sparse_config

    # named by path, so the multi-process check runs too; hooks: the module's own
    return {"spec": DriverSpec(driver="contrib.sparse_file_driver:SparseFileDriver",
                               config_files=(sparse_config(scratch),))}


def _memory(scratch: Path) -> dict[str, Any]:
    from tests.compliance import drivers
    from tests.unit import memdriver

    # the driver's own hooks when its module has them (the harness finds those),
    # else the ones the harness's tests give it
    hooks = None if hasattr(memdriver, "COMPLIANCE_HOOKS") else drivers.MEMORY_HOOKS
    return {"factory": drivers.memory_factory(scratch, memdriver.MemoryDriver),
            "hooks": hooks}


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("sparse", "contrib/sparse_file_driver.py", "contrib.sparse_file_driver", _sparse),
    Target("memory", "tests/unit/memdriver.py", "tests.unit.memdriver", _memory),
)}


def imported_from(target: Target) -> Path:
    """The file ``target``'s module is actually imported from."""
    return Path(importlib.import_module(target.module).__file__).resolve()
