"""A pytest plugin: every command the LVM driver's code runs in this test session,
as its root helper receives it (``LVMExecutor.helper_argv``; an lvm shell's start
as ``LVMExecutor.shell_helper_argv``), for
tests/unit/test_rootwrap.py, which checks them against the shipped rootwrap filters.

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
from lvm_driver.executor import LVMExecutor

#: helper argv -> the test that first ran it
RECORDED: dict[tuple[str, ...], str] = {}
_DRIVER_EXECUTORS: "weakref.WeakSet[LVMExecutor]" = weakref.WeakSet()
_WRAPPERS = ("lvm_driver.lvm", "lvm_driver.executor")
_current_test = ["(outside a test)"]


def _run_by_project_code() -> bool:
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in _WRAPPERS:
        frame = frame.f_back
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    return not module.startswith("tests")


def pytest_configure(config: pytest.Config) -> None:
    original_init, original_run = ThinLVMDriver.__init__, LVMExecutor.run
    original_started = LVMExecutor._started

    def init(self: ThinLVMDriver, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        _DRIVER_EXECUTORS.add(self.executor)

    def run(self: LVMExecutor, argv: Any, **kwargs: Any) -> Any:
        if self in _DRIVER_EXECUTORS and _run_by_project_code():
            helper = tuple(self.helper_argv(list(argv), lvm_env=kwargs.get("lvm_env", True)))
            RECORDED.setdefault(helper, _current_test[0])
        return original_run(self, argv, **kwargs)

    def started(self: LVMExecutor, argv: Any, env: Any) -> None:
        """An lvm shell of the read session started: as ``<helper> env ... lvm``."""
        if self in _DRIVER_EXECUTORS:
            RECORDED.setdefault(tuple(self.shell_helper_argv(env)), _current_test[0])
        original_started(self, argv, env)

    ThinLVMDriver.__init__ = init  # type: ignore[method-assign]
    LVMExecutor.run = run  # type: ignore[method-assign]
    LVMExecutor._started = started  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _current_test[0] = item.nodeid


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The test over everything recorded runs last, after every other test."""
    last = [item for item in items if item.name == "test_every_command_the_tests_ran_is_allowed"]
    items[:] = [item for item in items if item not in last] + last
