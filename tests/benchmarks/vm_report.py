"""What the VM-lane benchmarks' reports share: the command that made them, their first
lines (title, command, machine), and how they are printed and kept in a Markdown file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.benchmarks.run import describe_machine

__all__ = ["command", "header", "publish", "save"]


def command(module: str) -> str:
    """The command a report names: the wrapper script's, or this module run directly."""
    return os.environ.get("DK_BENCH_COMMAND", f"python -m tests.benchmarks.{module}")


def header(title: str, result: dict[str, Any], setting: str) -> list[str]:
    """A report's title, its command and the machine inside the VM with ``setting``."""
    return [f"## {title}\n", f"- Command: `{result['command']}`",
            f"- Machine (inside the VM): {describe_machine(result['machine'])}; {setting}"]


def save(text: str, markdown_out: str | None) -> None:
    """Keep the report in ``--markdown-out`` when one was given."""
    if markdown_out:
        Path(markdown_out).write_text(text + "\n", encoding="utf-8")


def publish(text: str, markdown_out: str | None) -> None:
    """Print the report, and keep it in ``--markdown-out`` when one was given."""
    print(text)
    save(text, markdown_out)
