"""``python -m tests.campaign``: run one fault campaign and print its closing table."""

from __future__ import annotations

import argparse
import random
import sys

from tests.campaign.runner import Settings, run_campaign


def parse(argv: list[str]) -> Settings:
    parser = argparse.ArgumentParser(
        prog="python -m tests.campaign",
        description="Randomized fault campaign against the LVM driver on one shared VG "
                    "(the simulator by default). Exit code 1 if any invariant was violated.")
    parser.add_argument("--seed", type=int, default=None,
                        help="decides the plan, faults, kills and pool config "
                             "(default: a random one, printed)")
    parser.add_argument("--ops", type=int, default=2000, help="requests in all (2000)")
    parser.add_argument("--procs", type=int, default=4, help="worker processes (4)")
    parser.add_argument("--threads", type=int, default=3, help="threads per worker (3)")
    parser.add_argument("--kills", type=int, default=None,
                        help="SIGKILLs of the admission lock's holder (ops/2500, at least 1)")
    parser.add_argument("--fault-rate", type=float, default=0.1,
                        help="injected faults per request (0.1)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="lvm_command_timeout and stats_timeout in seconds (0.25; 2 on real LVM)")
    parser.add_argument("--run-dir", default=None,
                        help="where the state, journals and logs go (a new temporary directory)")
    parser.add_argument("--real-lvm", action="store_true",
                        help="run on real LVM (the VG in $DK_REAL_LVM_VG, inside the VM lane)")
    args = parser.parse_args(argv)
    if args.ops < 1 or args.procs < 1 or args.threads < 1:
        parser.error("--ops, --procs and --threads must be at least 1")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10 ** 6)
    return Settings(seed=seed, ops=args.ops, procs=args.procs, threads=args.threads,
                    kills=args.kills, fault_rate=args.fault_rate, timeout_s=args.timeout,
                    run_dir=args.run_dir, mode="real" if args.real_lvm else "sim")


def main(argv: list[str] | None = None) -> int:
    settings = parse(sys.argv[1:] if argv is None else argv)
    print(f"campaign seed {settings.seed}", flush=True)
    result = run_campaign(settings)
    print(result.report)
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
