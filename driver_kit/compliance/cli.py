"""``driver-kit check``: run the compliance catalogue against a driver named by path.

The table goes to stdout (``-f json``: the JSON report; ``-f value``: each check's id
and status), while a terminal shows a progress bar on stderr; ``--json`` and
``--junit`` write files. Exit code 0
when every *must* check passed or was skipped, 1 when any failed or errored
(a driver that does not load is a failed ``driver.setup`` check), 2 for a
usage error. With neither ``--driver`` nor ``--config-file`` it checks the
default driver, the LVM driver on its simulator, in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile

from driver_kit.compliance.checks import CATALOGUE
from driver_kit.compliance.options import add_options, build_runner
from driver_kit.compliance.report import format_table, report_to_dict, write_json, write_junit
from driver_kit.compliance.runner import RunReport
from driver_kit.loading import DEFAULT_BACKEND, default_overrides
from driver_kit.output import FORMATS, FormattedParser, error_document, requested_format
from driver_kit.progress import steps

__all__ = ["build_parser", "main_check"]


def build_parser(prog: str = "driver-kit check", *,
                 json_errors: bool = False) -> argparse.ArgumentParser:
    parser = FormattedParser(
        prog=prog, description="Run driver_kit's compliance checks against a volume driver.",
        epilog="checks: " + ", ".join(c.id for c in CATALOGUE), json_errors=json_errors)
    add_options(parser.add_argument, "command")
    parser.add_argument("--json", metavar="FILE", help="write results and profile as JSON")
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML for a CI server")
    parser.add_argument("--debug", action="store_true",
                        help="show the driver's log (refusals the checks provoke included)")
    parser.add_argument("-f", "--format", choices=FORMATS, default="table",
                        help="stdout: the table, the JSON report, or each check's id and "
                             "status (value)")
    return parser


def _printed(report: RunReport, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report_to_dict(report), indent=2, default=str) + "\n"
    if fmt == "value":
        return "".join(f"{r.id} {r.status}\n" for r in report.results)
    return format_table(report)


def _failed(args: argparse.Namespace, message: str, code: int) -> int:
    if args.format == "json":
        print(error_document("CheckError", message, code))
    else:
        print(f"driver-kit check: {message}", file=sys.stderr)
    return code


def _run(args: argparse.Namespace, scratch: str) -> int:
    values, overrides = vars(args), {}
    if not args.driver and not args.config_files and not args.cinder_driver:
        overrides = default_overrides(os.path.join(scratch, "simulator.json"))
        values = {**values, "backend": args.backend or DEFAULT_BACKEND}
    try:
        runner = build_runner(values, overrides=overrides)
    except ValueError as exc:
        return _failed(args, str(exc), 2)
    with steps("checking", total=len(runner.checks) + 1) as step:
        report = runner.run(on_result=lambda result: step(result.id))
    sys.stdout.write(_printed(report, args.format))
    try:
        if args.json:
            write_json(report, args.json)
        if args.junit:
            write_junit(report, args.junit)
    except OSError as exc:
        return _failed(args, f"cannot write the report: {exc}", max(report.exit_code, 1))
    return report.exit_code


def main_check(argv: list[str]) -> int:
    """Entry point of ``driver-kit check``; returns the exit code."""
    parser = build_parser(json_errors=requested_format(argv) == "json")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 0 for --help, 2 for bad usage
        return int(exc.code or 0)
    root = logging.getLogger()
    # The checks provoke refusals and broken backends on purpose: their log lines
    # are noise unless asked for (the table carries every reason).
    handler = logging.StreamHandler() if args.debug else logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    level = root.level
    if args.debug:
        root.setLevel(logging.DEBUG)
    try:
        with tempfile.TemporaryDirectory(prefix="driver-kit-check-") as scratch:
            return _run(args, scratch)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


if __name__ == "__main__":
    sys.exit(main_check(sys.argv[1:]))
