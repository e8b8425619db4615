"""How the ``driver-kit`` command prints its answers: ``-f table|json|value``, as the
OpenStack client does.

``table`` is for people (columns, or Field/Value for one object), ``json`` for
programs (one document on stdout, errors included, so ``| jq`` never meets prose),
``value`` for shell scripts (values only, no headers: one row a line, or one value a
line for one object).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Mapping, NoReturn, Sequence

from driver_kit.tables import format_columns

__all__ = ["FORMATS", "EXIT_USAGE", "FormattedParser", "error_document", "render_document", "render_record", "render_rows",
           "requested_format"]

FORMATS = ("table", "json", "value")
#: argparse's exit code for a usage error, kept under -f json
EXIT_USAGE = 2


def requested_format(argv: Sequence[str]) -> str | None:
    """The ``-f``/``--format`` asked for in ``argv``, read before argparse has run, so
    that even a usage error comes out in that format (None: not asked, or invalid)."""
    wanted = None
    for index, token in enumerate(argv):
        if token in ("-f", "--format") and index + 1 < len(argv):
            wanted = argv[index + 1]
        elif token.startswith("--format="):
            wanted = token.partition("=")[2]
        elif token.startswith("-f") and len(token) > 2 and not token.startswith("--"):
            wanted = token[2:]
    return wanted if wanted in FORMATS else None


def _value(cell: Any) -> str:
    return "-" if cell is None else str(cell)


def render_rows(headers: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> str:
    """Rows under ``headers``: columns, a JSON list of objects, or space-separated values."""
    if fmt == "json":
        return json.dumps([dict(zip(headers, row)) for row in rows], indent=2)
    if fmt == "value":
        return "\n".join(" ".join(_value(cell) for cell in row) for row in rows)
    return format_columns(rows, headers)


def render_record(record: Mapping[str, Any], fmt: str) -> str:
    """One object: a Field/Value table, a JSON object, or one value a line."""
    if fmt == "json":
        return json.dumps(record, indent=2)
    if fmt == "value":
        return "\n".join(_value(value) for value in record.values())
    return format_columns([[key, _value(value)] for key, value in record.items()],
                          ["Field", "Value"])


def render_document(document: Any) -> str:
    """A JSON answer as the command prints it (keys sorted, as the reports always were)."""
    return json.dumps(document, indent=2, sort_keys=True)


def error_document(error_type: str, message: str, exit_code: int) -> str:
    """An error as one JSON object: its kind (the exception's name), the one-line message
    a person would read, and the exit code the command ends with."""
    return json.dumps({"error": {"type": error_type, "message": message,
                                 "exit_code": exit_code}})


class FormattedParser(argparse.ArgumentParser):
    """argparse whose usage errors are a JSON document on stdout when ``json_errors``
    (``-f json`` was asked for); its subcommands' parsers inherit the choice."""

    def __init__(self, *args: Any, json_errors: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.json_errors = json_errors

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("parser_class", lambda **kw: FormattedParser(
            json_errors=self.json_errors, **kw))
        return super().add_subparsers(**kwargs)

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            print(error_document("UsageError", f"{self.prog}: {message}", EXIT_USAGE))
            sys.exit(EXIT_USAGE)
        super().error(message)
