"""The test command of a mutation run: the compliance harness on one target driver.

``python -m tests.mutation.harness TARGET`` runs every check on the driver in
the current directory's tree (cosmic-ray's working copy) and exits 0 when every
*must* check passed or was skipped, 1 when one failed or errored (the mutant is
killed), 3 when the driver module is not the one in the current directory (the
run would test the wrong file).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import time
from pathlib import Path

from driver_kit.compliance import run_checks
from tests.mutation.targets import TARGETS, imported_from

#: seconds each check may take before the harness abandons it (and fails the run)
CHECK_TIMEOUT_S = 20.0


def _die_with_parent() -> None:
    """Linux: be killed when cosmic-ray is (a run stopped half-way leaves no harness
    behind, even one stuck in a mutant that never gives the interpreter back)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere, cosmic-ray's timeout still ends it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation.harness",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--timeout", type=float, default=CHECK_TIMEOUT_S,
                        help=f"seconds per check ({CHECK_TIMEOUT_S:g})")
    args = parser.parse_args(argv)
    _die_with_parent()
    target = TARGETS[args.target]
    expected = (Path.cwd() / target.path).resolve()
    if imported_from(target) != expected:
        print(f"{target.module} comes from {imported_from(target)}, not {expected}",
              file=sys.stderr)
        return 3
    # the checks provoke refusals and broken backends on purpose: their log is noise
    logging.getLogger().addHandler(logging.NullHandler())
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutation-harness-") as scratch:
        report = run_checks(**target.checks(Path(scratch)), timeout_s=args.timeout)
    blocking = [r for r in report.results if r.blocking]
    for result in blocking:
        print(f"{result.id} {result.status}: {result.reason}")
    # the last line, read back by run.py: the verdict and how long the harness took
    print(f"harness: {len(blocking)} must checks failed or errored "
          f"({', '.join(r.id for r in blocking) or 'none'}) in {time.monotonic() - start:.2f} s")
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
