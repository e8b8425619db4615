"""How an emulated LVM command ends: LVM's exit codes, its failures, the simulator's errors.

Every command module raises ``Fail`` to stop with LVM's exit code and error
lines; ``SimulatorError`` and ``StateFileError`` are what callers of the
simulator itself (helpers, the state file) may meet.
"""

from __future__ import annotations

from typing import Final

from driver_kit.exceptions import BackendError

EXIT_OK: Final = 0
EXIT_NO_SUCH_CMD: Final = 2
EXIT_INVALID: Final = 3
EXIT_FAILED: Final = 5


class SimulatorError(BackendError):
    """The simulator was misused (bad helper argument) or cannot use its state file."""


class StateFileError(SimulatorError):
    """The state file cannot be locked, read or written, or holds no simulator state.

    A command meeting it fails as LVM does when it cannot read or write its
    metadata: exit code 5, one line naming the file, nothing changed.
    """


class Fail(Exception):
    """Ends a command with LVM's exit code and error lines."""

    def __init__(self, exit_code: int, *lines: str):
        super().__init__(lines)
        self.exit_code = exit_code
        self.lines = lines


def invalid(command: str, *lines: str) -> Fail:
    return Fail(EXIT_INVALID, *lines, f"Run `{command} --help' for more information.")


def parse_error(*lines: str) -> Fail:
    return Fail(EXIT_INVALID, *lines, "Error during parsing of command line.")
