"""The ``driver-kit`` console script's entry: Ctrl-C and SIGTERM are handled from the
first moment, before the command's heavy imports, so they end in one line and exit
128 + the signal's number, never in a traceback."""

from __future__ import annotations

import sys

from driver_kit.interrupts import Interrupted, SignalGuard

__all__ = ["main"]


def main() -> int:
    """Run the ``driver-kit`` command (``driver_kit.cli.main``) with signals handled."""
    # ending: the process exits with this command, so a late signal changes nothing
    with SignalGuard(ending=True):
        try:
            from driver_kit.cli import main as run_command
            return run_command()
        except Interrupted as stop:  # before the command's own handling began
            print(stop.report(), file=sys.stderr)
            return stop.exit_code
