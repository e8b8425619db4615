"""Feedback during long work (a thick wipe, a compliance run), on a terminal only.

Drawn with rich on stderr and erased when the work ends, so stdout stays the
answer and a pipe, a file or a CI log sees nothing of it.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, TextIO

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["activity", "steps"]


def _console(stream: TextIO | None) -> Console | None:
    """A rich console on ``stream`` (stderr by default) when it is a terminal, else None."""
    stream = sys.stderr if stream is None else stream
    if not stream.isatty():
        return None
    from rich.console import Console  # only a terminal pays for the import
    return Console(file=stream, stderr=stream is sys.stderr)


@contextmanager
def activity(description: str, *, stream: TextIO | None = None) -> Iterator[None]:
    """A spinner with the time spent while work of unknown length runs (one command the
    kit cannot see into, such as the ``dd`` of a wipe)."""
    console = _console(stream)
    if console is None:
        yield
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        progress.add_task(description, total=None)
        yield


@contextmanager
def steps(description: str, total: int, *,
          stream: TextIO | None = None) -> Iterator[Callable[[str], None]]:
    """A bar of ``total`` steps; the caller calls what it yields after each step with the
    step's name, shown beside the bar."""
    console = _console(stream)
    if console is None:
        yield lambda name: None
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.fields[step]}"),
                  console=console, transient=True) as progress:
        task = progress.add_task(description, total=total, step="")
        yield lambda name: progress.update(task, advance=1, step=name)
