"""``driver-kit check``: run the compliance catalogue against a driver named by path.

The table goes to stdout; ``--json`` and ``--junit`` write files. Exit code 0
when every *must* check passed or was skipped, 1 when any failed or errored
(a driver that does not load is a failed ``driver.setup`` check), 2 for a
usage error. With neither ``--driver`` nor ``--config-file`` it checks the
default driver, the LVM driver on its simulator, in a temporary directory.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

from driver_kit.compliance.checks import CATALOGUE
from driver_kit.compliance.options import add_options, build_runner
from driver_kit.compliance.report import format_table, write_json, write_junit
from driver_kit.loading import DEFAULT_BACKEND, default_overrides

__all__ = ["build_parser", "main_check"]


def build_parser(prog: str = "driver-kit check") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Run driver_kit's compliance checks against a volume driver.",
        epilog="checks: " + ", ".join(c.id for c in CATALOGUE))
    add_options(parser.add_argument, "command")
    parser.add_argument("--json", metavar="FILE", help="write results and profile as JSON")
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML for a CI server")
    parser.add_argument("--debug", action="store_true",
                        help="show the driver's log (refusals the checks provoke included)")
    return parser


def _run(args: argparse.Namespace, scratch: str) -> int:
    values, overrides = vars(args), {}
    if not args.driver and not args.config_files and not args.cinder_driver:
        overrides = default_overrides(os.path.join(scratch, "simulator.json"))
        values = {**values, "backend": args.backend or DEFAULT_BACKEND}
    try:
        runner = build_runner(values, overrides=overrides)
    except ValueError as exc:
        print(f"driver-kit check: {exc}", file=sys.stderr)
        return 2
    report = runner.run()
    sys.stdout.write(format_table(report))
    try:
        if args.json:
            write_json(report, args.json)
        if args.junit:
            write_junit(report, args.junit)
    except OSError as exc:
        print(f"driver-kit check: cannot write the report: {exc}", file=sys.stderr)
        return max(report.exit_code, 1)
    return report.exit_code


def main_check(argv: list[str]) -> int:
    """Entry point of ``driver-kit check``; returns the exit code."""
    parser = build_parser()
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
