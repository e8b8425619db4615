"""The ``driver-kit`` command: stats, pools, volume operations, a demo, checks.

Drivers are loaded by dotted path (``volume_driver``, as in Cinder; see
``driver_kit.loading``). With no ``--config-file`` the default configuration
runs the LVM driver on its embedded simulator, with a state file under the
user's state directory. Nothing imports this module: it is the top layer.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import math
import tempfile
import traceback
from typing import Callable, Sequence

import platformdirs

from driver_kit import scheduler
from driver_kit.config_check import check_configuration, unknown_in_backend
from driver_kit.driver import VolumeDriver
from driver_kit.exceptions import (CapacityExceeded, ConfigError, DriverKitError, InvalidSize,
                                   PoolNotFound, SnapshotNotFound, VolumeNotFound)
from driver_kit.interrupts import Interrupted, SignalGuard
from driver_kit.loading import DEFAULT_BACKEND, default_overrides, import_object, load_driver
from driver_kit.tables import pools_table, stats_table
from driver_kit.units import parse_size_gb

__all__ = ["main"]

EXIT_ERROR, EXIT_USAGE, EXIT_REFUSED, EXIT_NOT_FOUND = 1, 2, 3, 4
DEMO = "lvm_driver.demo:run_demo"


# ---------------------------------------------------------------- commands

def _cmd_stats(driver: VolumeDriver, args: argparse.Namespace) -> int:
    stats = driver.get_volume_stats(refresh=True)
    print(json.dumps(stats, indent=2, sort_keys=True) if args.json else stats_table(stats))
    return 0


def _cmd_pools(driver: VolumeDriver, args: argparse.Namespace) -> int:
    stats = driver.get_volume_stats(refresh=True)
    if args.json:
        print(json.dumps(scheduler.get_pools(stats), indent=2, sort_keys=True))
    else:
        print(pools_table(stats))
    return 0


def _cmd_create(driver: VolumeDriver, args: argparse.Namespace) -> int:
    specs = {"provisioning:type": args.type} if args.type else None
    info = driver.create_volume(args.name, args.size, extra_specs=specs, pool_name=args.pool)
    print(f"created {'thin' if info.thin else 'thick'} volume {info.name} of "
          f"{info.size_gb} GiB in pool {info.pool_name}")
    return 0


def _cmd_extend(driver: VolumeDriver, args: argparse.Namespace) -> int:
    info = driver.extend_volume(args.name, args.size)
    print(f"extended volume {info.name} to {info.size_gb} GiB")
    return 0


def _delete(driver: VolumeDriver, name: str, kind: str,
            find: Callable[[str], object], delete: Callable[[str], None]) -> int:
    """Delete through the API, which is idempotent (as Cinder wants it); the command
    tells a missing name apart by looking first, and fails with VolumeNotFound or
    SnapshotNotFound. The delete runs either way, so that the driver's own rules
    (a bad name, an LV that is not its to delete) answer as they do for any caller.
    """
    existed = find(driver.validate_name(name)) is not None
    delete(name)
    if not existed:
        missing = VolumeNotFound if kind == "volume" else SnapshotNotFound
        raise missing(f"no {kind} {name!r} on backend "
                      f"{driver.configuration.volume_backend_name}")
    print(f"deleted {kind} {name}")
    return 0


def _cmd_delete(driver: VolumeDriver, args: argparse.Namespace) -> int:
    return _delete(driver, args.name, "volume", driver.backend_find_volume,
                   driver.delete_volume)


def _cmd_delete_snapshot(driver: VolumeDriver, args: argparse.Namespace) -> int:
    return _delete(driver, args.name, "snapshot", driver.backend_find_snapshot,
                   driver.delete_snapshot)


def _cmd_snapshot(driver: VolumeDriver, args: argparse.Namespace) -> int:
    info = driver.create_snapshot(args.name, args.volume)
    print(f"created snapshot {info.name} of {args.volume} ({info.size_gb} GiB)")
    return 0


def _cmd_placement(driver: VolumeDriver, args: argparse.Namespace) -> int:
    from driver_kit.placement import resource_providers
    stats = driver.get_volume_stats(refresh=True)
    print(json.dumps(resource_providers(stats), indent=2, sort_keys=True))
    return 0


def _cmd_exporter(driver: VolumeDriver, args: argparse.Namespace) -> int:
    try:
        from driver_kit.exporter import serve, serve_until_stopped
    except ImportError as exc:
        print(f"error: the exporter needs prometheus-client ({exc}): "
              f"pip install 'driver-kit[exporter]'", file=sys.stderr)
        return EXIT_ERROR
    try:
        server = serve(driver, port=args.port, addr=args.addr,
                       min_refresh_interval_s=args.interval or 0.0)
    except OSError as exc:
        print(f"error: cannot listen on {args.addr}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    serve_until_stopped(server, lambda: print(f"serving {server.url} (Ctrl-C or SIGTERM "
                                              f"stops)", flush=True))
    return 0


def _size(text: str) -> int:
    try:
        return parse_size_gb(text, from_text=True)
    except InvalidSize as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _interval(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"interval must be a finite number of seconds "
                                         f"above 0, got {text!r}")
    return seconds


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be a whole number in 0..65535, "
                                         f"got {text!r}")
    return port


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="driver-kit", description="Capacity-correct volume drivers: stats, pools, "
        "volume operations and compliance checks.")
    parser.add_argument("--config-file", action="append", default=[], metavar="FILE",
                        help="cinder.conf-style file with [DEFAULT] enabled_backends and "
                             "one section per backend (repeatable)")
    parser.add_argument("--backend", help="backend section to use")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("demo", help="narrated walkthrough on the LVM simulator")
    for name, helptext in (("stats", "the get_volume_stats() report"),
                           ("pools", "the get-pools view with capacity factors")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--json", action="store_true", help="print JSON")
    p = sub.add_parser("create", help="create a volume (admission enforced)")
    p.add_argument("name")
    p.add_argument("size", type=_size, help="GiB")
    p.add_argument("--type", choices=["thin", "thick"], help="provisioning:type")
    p.add_argument("--pool", help="pool name (default: the first that fits the type)")
    p = sub.add_parser("extend", help="grow a volume (admission enforced)")
    p.add_argument("name")
    p.add_argument("size", type=_size, help="new size in GiB")
    p = sub.add_parser("delete", help="delete a volume (exit code 4: there is none)")
    p.add_argument("name")
    p = sub.add_parser("snapshot", help="snapshot a volume")
    p.add_argument("name")
    p.add_argument("volume")
    p = sub.add_parser("delete-snapshot", help="delete a snapshot (exit code 4: there is none)")
    p.add_argument("name")
    sub.add_parser("placement", help="each pool as a Placement DISK_GB inventory "
                   "with usage (JSON)")
    p = sub.add_parser("exporter", help="serve the pools as Prometheus metrics")
    p.add_argument("--port", type=_port, required=True, help="TCP port (0: any free port)")
    p.add_argument("--addr", default="127.0.0.1",
                   help="address to bind (default: 127.0.0.1, loopback only)")
    p.add_argument("--interval", type=_interval, metavar="SECONDS",
                   help="read the backend at most once per SECONDS (default: every scrape)")
    sub.add_parser("check", help="run the compliance harness (see driver-kit check --help)",
                   add_help=False)
    sub.add_parser("check-config", help="check --config-file before any backend is used: "
                   "values, drivers, unknown options (exit code 2: problems found)")
    return parser


COMMANDS: dict[str, Callable[[VolumeDriver, argparse.Namespace], int]] = {
    "stats": _cmd_stats, "pools": _cmd_pools, "create": _cmd_create,
    "extend": _cmd_extend, "delete": _cmd_delete, "snapshot": _cmd_snapshot,
    "delete-snapshot": _cmd_delete_snapshot,
    "placement": _cmd_placement, "exporter": _cmd_exporter,
}


def _default_state_file() -> str:
    return os.path.join(platformdirs.user_state_dir("driver-kit"), "simulator.json")


def _open_driver(args: argparse.Namespace) -> VolumeDriver:
    overrides = None
    if not args.config_file:
        if args.backend not in (None, DEFAULT_BACKEND):
            raise ConfigError(f"unknown backend {args.backend!r}: with no --config-file "
                              f"the only backend is {DEFAULT_BACKEND!r}")
        state_file = _default_state_file()
        os.makedirs(os.path.dirname(state_file), exist_ok=True)
        print(f"(no --config-file: using the LVM simulator, state in {state_file})",
              file=sys.stderr)
        overrides = default_overrides(state_file)
    driver = load_driver(args.config_file, args.backend, overrides=overrides)
    for unknown in unknown_in_backend(args.config_file, driver.configuration.backend,
                                      type(driver).OPTIONS):
        print(f"warning: {unknown}", file=sys.stderr)
    driver.do_setup()
    driver.check_for_setup_error()
    return driver


def _command_index(argv: list[str]) -> int | None:
    """Where the subcommand stands, past the global options and their values."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token in ("--config-file", "--backend"):
            index += 2
        elif token.startswith("-"):
            index += 1
        else:
            return index
    return None


#: the commands that change the backend: a signal waits until the change is done
CHANGES = frozenset({"create", "extend", "delete", "snapshot", "delete-snapshot"})


def _cmd_check_config(args: argparse.Namespace) -> int:
    if not args.config_file:
        raise ConfigError("check-config needs --config-file (with none, the embedded "
                          "simulator's built-in configuration is used, and it is valid)")
    problems, backends = check_configuration(args.config_file,
                                             [args.backend] if args.backend else None)
    for problem in problems:
        print(f"config error: {problem}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    print(f"configuration OK: {', '.join(args.config_file)} (backends: "
          f"{', '.join(backends)})")
    return 0


def _run(args: argparse.Namespace, guard: SignalGuard) -> int:
    """The command, signals held while it may change the backend."""
    if args.command == "demo":
        # named by path, like the default driver, so driver_kit never imports it
        run_demo = import_object(DEMO, "demo")
        return run_demo(tempfile.mkdtemp(prefix="driver-kit-demo-"))
    if args.command == "check-config":
        return _cmd_check_config(args)
    with guard.holding():  # the setup may make the VG or pool
        driver = _open_driver(args)
    if guard.received is not None:  # it arrived during the setup: stop before the command
        raise Interrupted(guard.received)
    if args.command not in CHANGES:
        return COMMANDS[args.command](driver, args)
    with guard.holding():
        return COMMANDS[args.command](driver, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``driver-kit`` console script; returns the exit code."""
    ending = argv is None  # the console script: the process ends with this command
    argv = list(sys.argv[1:] if argv is None else argv)
    index = _command_index(argv)
    if index is not None and argv[index] == "check":
        from driver_kit.compliance.cli import main_check
        return main_check(argv[:index] + argv[index + 1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.ERROR,
                        format="%(levelname)s %(name)s: %(message)s")
    with SignalGuard(ending=ending) as guard:
        code = _reported(args, guard)
        if args.command in CHANGES and not sys.stderr.closed and (note := guard.held_note()):
            print(note, file=sys.stderr)  # after the result or the error it speaks of
        return code


def _reported(args: argparse.Namespace, guard: SignalGuard) -> int:
    """The command's exit code, its failure reported in one line (a traceback only with
    ``--debug``)."""
    try:
        return _run(args, guard)
    except CapacityExceeded as exc:
        print(f"refused: {exc.decision.explain()}", file=sys.stderr)
        return EXIT_REFUSED
    except DriverKitError as exc:
        if args.debug:
            traceback.print_exc()
        if isinstance(exc, ConfigError):
            print(f"config error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"error: {exc}", file=sys.stderr)
        # a volume, snapshot or pool the user named that is not there
        missing = isinstance(exc, (VolumeNotFound, SnapshotNotFound, PoolNotFound))
        return EXIT_NOT_FOUND if missing else EXIT_ERROR
    except BrokenPipeError:  # e.g. piped into head: not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:
        code = exc.exit_code if isinstance(exc, Interrupted) else 130
        name = exc.args[0] if exc.args else "SIGINT"
        if isinstance(exc, Interrupted) and exc.unknown:
            print(f"interrupted ({name}) inside the {args.command}: whether it was "
                  f"applied is not known; look with driver-kit stats",
                  file=sys.stderr)
        else:
            print(f"interrupted ({name}): stopped before any change", file=sys.stderr)
        return code
    except Exception as exc:  # noqa: BLE001  (no input may end in a traceback)
        if args.debug:
            traceback.print_exc()
        print(f"error: unexpected {type(exc).__name__}: {exc} (a bug: --debug "
              f"shows where)", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
