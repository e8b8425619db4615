"""What the VM-lane benchmarks share inside the guest: the check that they run there as
root, and the options of those that build ``realdm``'s VG of active thin LVs."""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["outside_the_vm", "vg_options"]


def outside_the_vm(module: str, option: str = "") -> bool:
    """Whether this is anywhere but the VM lane's guest as root; then one line says how
    to run ``module`` (``run_realdm.sh`` with ``option``)."""
    if os.environ.get("DK_REAL_LVM") == "1" and os.geteuid() == 0:
        return False
    print(f"{module}: runs inside the VM lane as root: sudo bash "
          f"tests/benchmarks/run_realdm.sh{option}", file=sys.stderr)
    return True


def vg_options(doc: str | None) -> argparse.ArgumentParser:
    """A parser with the options of a benchmark that builds ``realdm``'s VG: how many
    thin LVs, in how long, in how large a pool, how many rounds, where the report goes."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lvs", type=int, default=1000, help="active thin LVs to create")
    parser.add_argument("--runs", type=int, default=5, help="timed rounds")
    parser.add_argument("--create-budget-s", type=float, default=1500.0,
                        help="stop creating thin LVs after this long (the count reached "
                             "is reported)")
    parser.add_argument("--pool-gb", type=int, default=16)
    parser.add_argument("--markdown-out", help="also write the report to this file")
    return parser
