"""A pytest plugin: every command the LVM driver's code runs in this test session, for
tests/unit/test_rootwrap.py, which checks that each one has its entrypoint in the
privileged daemon (``lvm_argv.parse`` maps it back and the builder rebuilds it
exactly), so an unprivileged driver can do everything a root one does.

Recorded: commands run on a driver's executor from the project's code (the driver,
its LVM wrapper, the kit, the compliance hooks). Not recorded: what tests run as
the operator (``lab.lvm``, ``executor.run`` or ``VolumeGroup`` called from a test),
nor what runs in other processes (Cinder's side, multi-process races).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import pytest

from lvm_driver.driver import ThinLVMDriver
from lvm_driver.run.executor import LVMExecutor

#: argv -> the test that first ran it
RECORDED: dict[tuple[str, ...], str] = {}
_DRIVER_EXECUTORS: "weakref.WeakSet[LVMExecutor]" = weakref.WeakSet()
_WRAPPERS = ("lvm_driver.commands.lvm", "lvm_driver.run.executor")
_current_test = ["(outside a test)"]


def _run_by_project_code() -> bool:
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in _WRAPPERS:
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    return not module.startswith("tests")


def pytest_configure(config: pytest.Config) -> None:
    original_init, original_run = ThinLVMDriver.__init__, LVMExecutor.run

    def init(self: ThinLVMDriver, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        _DRIVER_EXECUTORS.add(self.executor)

    def run(self: LVMExecutor, argv: Any, **kwargs: Any) -> Any:
        if self in _DRIVER_EXECUTORS and _run_by_project_code():
            RECORDED.setdefault(tuple(argv), _current_test[0])
        return original_run(self, argv, **kwargs)

    ThinLVMDriver.__init__ = init  # type: ignore[method-assign]
    LVMExecutor.run = run  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _current_test[0] = item.nodeid


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The test over everything recorded runs last, after every other test."""
    last = [item for item in items if item.name == "test_every_command_the_tests_ran_is_served"]
    items[:] = [item for item in items if item not in last] + last
