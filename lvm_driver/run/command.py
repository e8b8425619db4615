"""What every LVM command gives back and the errors shared by its runners: the
executor's (``lvm_driver.run.executor``) and the read session's (``lvm_driver.run.shell``).
Re-exported by ``lvm_driver.run.executor``, the one import for users."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from driver_kit.exceptions import BackendError, BackendTimeout

__all__ = ["CommandResult", "LVMError", "LVMTimeoutError", "quote"]


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one process did: its argv, exit code and decoded output."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str

    def __post_init__(self) -> None:
        if not isinstance(self.argv, tuple):
            object.__setattr__(self, "argv", tuple(self.argv))


def quote(argv: Sequence[str]) -> str:
    """``argv`` as a shell would show it (for messages only: nothing runs through a shell)."""
    return " ".join(shlex.quote(arg) for arg in argv)


class LVMError(BackendError):
    """Root of the LVM driver's backend errors."""


class LVMTimeoutError(LVMError, BackendTimeout):
    """An LVM command did not finish within its timeout and was stopped."""

    def __init__(self, argv: Sequence[str], timeout_s: float):
        self.argv = tuple(argv)
        self.timeout_s = timeout_s
        super().__init__(
            f"LVM command `{quote(self.argv)}` did not finish within "
            f"{timeout_s:g} s")

    def __reduce__(self):
        return (type(self), (self.argv, self.timeout_s))
