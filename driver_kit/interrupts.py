"""SIGINT and SIGTERM in the ``driver-kit`` command: the exit code and the output say
what happened.

Outside a change, a signal stops the command at once (``Interrupted``, exit code
128 + the signal's number, nothing changed). While a change runs (a create,
extend, delete, snapshot, the setup that may make the pool), stopping half-way
would leave a volume made but reported as not made, so the signal is held: the
change finishes (every backend command has its own timeout), its result is
printed as usual and the exit code is the change's own. A second signal stops
it at once, saying that whether the change was applied is not known.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from types import FrameType
from typing import Any, Iterator

__all__ = ["Interrupted", "SignalGuard"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A signal stopped the command outside a change (a ``KeyboardInterrupt``, so no
    ``except Exception`` in a driver mistakes it for a backend failure)."""

    def __init__(self, signum: int, *, unknown: bool = False) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        #: stopped inside a change: whether it was applied is not known
        self.unknown = unknown

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def report(self, command: str = "command") -> str:
        """The one line that says what the signal stopped."""
        name = signal.Signals(self.signum).name
        if self.unknown:
            return (f"interrupted ({name}) inside the {command}: whether it was applied "
                    f"is not known; look with driver-kit stats")
        return f"interrupted ({name}): stopped before any change"


class SignalGuard:
    """Handlers of SIGINT and SIGTERM for the span of one command (``with guard:``).

    ``ending``: the process exits right after the command, so a late signal is
    ignored rather than the old handlers restored (a create that printed "created"
    must not end killed by a Ctrl-C that came after it).
    """

    def __init__(self, *, ending: bool = False) -> None:
        self.ending = ending
        self.received: int | None = None
        self._holding = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "SignalGuard":
        if threading.current_thread() is threading.main_thread():
            for signum in _SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if self.ending else handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not self._holding:
            raise Interrupted(signum)
        if self.received is None:
            self.received = signum
            print(f"{name} received: stopping once the step under way is done (a second "
                  f"one stops at once)", file=sys.stderr, flush=True)
            return
        # the operator insists (a hung backend): stop, and say the outcome is unknown
        self.received = None  # no "it ran to its end" note: it did not
        raise Interrupted(signum, unknown=True)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Hold signals while a change runs; one held is in ``received`` after it."""
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1

    def held_note(self) -> str | None:
        """The line to print after a change that a signal waited for (None: none did)."""
        if self.received is None:
            return None
        return (f"({signal.Signals(self.received).name} arrived while the change ran; it "
                f"ran to its end, as reported above)")
