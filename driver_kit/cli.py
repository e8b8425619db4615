# PYTHON_ARGCOMPLETE_OK
"""The ``driver-kit`` command: stats, pools, volume operations, a demo, checks.

Drivers are loaded by dotted path (``volume_driver``, as in Cinder; see
``driver_kit.loading``). The configuration is ``--config-file``, else
``$DRIVER_KIT_CONFIG``, else ``/etc/driver-kit/driver-kit.conf`` (see
``driver_kit.cli_config``); with none of them the LVM driver runs on its embedded
simulator, with a state file under the user's state directory. Every command prints
as ``-f table|json|value`` asks (``driver_kit.output``), errors included. Nothing
imports this module: it is the top layer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import math
import tempfile
import traceback
from typing import Any, Callable, Sequence

import argcomplete
import platformdirs

import driver_kit
from driver_kit import scheduler
from driver_kit.cli_config import adapter_overrides, choose_config_files
from driver_kit.config_check import report_configuration, unknown_in_backend
from driver_kit.config_files import check_config_files
from driver_kit.driver import VolumeDriver, VolumeInfo
from driver_kit.exceptions import (CapacityExceeded, ConfigError, DriverKitError, InvalidSize,
                                   PoolNotFound, SnapshotNotFound, VolumeNotFound)
from driver_kit.interrupts import Interrupted, SignalGuard
from driver_kit.listing import ListsVolumes, VolumeRecord
from driver_kit.loading import DEFAULT_BACKEND, default_overrides, import_object, load_driver
from driver_kit.output import (FORMATS, FormattedParser, error_document, render_document,
                               render_record, render_rows, requested_format)
from driver_kit.progress import activity
from driver_kit.tables import (POOLS_HEADERS, STATS_HEADERS, pools_rows, pools_table,
                               stats_rows, stats_table)
from driver_kit.units import bytes_to_gb_up, parse_size_gb

__all__ = ["main"]

EXIT_ERROR, EXIT_USAGE, EXIT_REFUSED, EXIT_NOT_FOUND = 1, 2, 3, 4
DEMO = "lvm_driver.demo:run_demo"


# ---------------------------------------------------------------- commands

def _format(args: argparse.Namespace) -> str | None:
    """The format asked for; None: the command's own default for people."""
    return getattr(args, "format", None)


def _cmd_stats(driver: VolumeDriver, args: argparse.Namespace) -> int:
    stats = driver.get_volume_stats(refresh=True)
    fmt = _format(args) or "table"
    if fmt == "json":
        print(render_document(stats))
    else:
        print(stats_table(stats) if fmt == "table" else
              render_rows(STATS_HEADERS, stats_rows(stats), fmt))
    return 0


def _cmd_pools(driver: VolumeDriver, args: argparse.Namespace) -> int:
    stats = driver.get_volume_stats(refresh=True)
    fmt = _format(args) or "table"
    if fmt == "json":
        print(render_document(scheduler.get_pools(stats)))
    else:
        print(pools_table(stats) if fmt == "table" else
              render_rows(POOLS_HEADERS, pools_rows(stats), fmt))
    return 0


def _done(args: argparse.Namespace, sentence: str, record: dict[str, Any]) -> int:
    """A change's answer: the sentence for people, else the changed object as asked."""
    fmt = _format(args)
    print(sentence if fmt is None else render_record(record, fmt))
    return 0


def _info_record(info: VolumeInfo, kind: str) -> dict[str, Any]:
    return {"name": info.name, "kind": kind,
            "provisioning": "thin" if info.thin else "thick",
            "size_gb": bytes_to_gb_up(info.size_bytes), "size_bytes": info.size_bytes,
            "pool": info.pool_name}


def _cmd_create(driver: VolumeDriver, args: argparse.Namespace) -> int:
    specs = {"provisioning:type": args.type} if args.type else None
    info = driver.create_volume(args.name, args.size, extra_specs=specs, pool_name=args.pool)
    return _done(args, f"created {'thin' if info.thin else 'thick'} volume {info.name} of "
                       f"{info.size_gb} GiB in pool {info.pool_name}",
                 _info_record(info, "volume"))


def _cmd_extend(driver: VolumeDriver, args: argparse.Namespace) -> int:
    info = driver.extend_volume(args.name, args.size)
    return _done(args, f"extended volume {info.name} to {info.size_gb} GiB",
                 _info_record(info, "volume"))


def _wipe_note(driver: VolumeDriver, info: VolumeInfo) -> str | None:
    """What a terminal shows while a thick volume is wiped before its delete (Cinder's
    ``volume_clear``); None when no wipe runs."""
    conf = driver.configuration
    if info.thin or conf.get("volume_clear", "none") == "none":
        return None
    clear_mib = conf.get("volume_clear_size", 0)
    nbytes = min(info.size_bytes, clear_mib * 1024 ** 2) if clear_mib else info.size_bytes
    return (f"deleting thick volume {info.name}: writing {bytes_to_gb_up(nbytes):.2f} GiB of "
            f"zeros first (volume_clear)")


def _delete(driver: VolumeDriver, args: argparse.Namespace, kind: str,
            find: Callable[[str], VolumeInfo | None], delete: Callable[[str], None]) -> int:
    """Delete through the API, which is idempotent (as Cinder wants it); the command
    tells a missing name apart by looking first, and fails with VolumeNotFound or
    SnapshotNotFound. The delete runs either way, so that the driver's own rules
    (a bad name, an LV that is not its to delete) answer as they do for any caller.
    """
    name = args.name
    found = find(driver.validate_name(name))
    note = _wipe_note(driver, found) if found is not None and kind == "volume" else None
    with activity(note) if note else contextlib.nullcontext():
        delete(name)
    if found is None:
        missing = VolumeNotFound if kind == "volume" else SnapshotNotFound
        raise missing(f"no {kind} {name!r} on backend "
                      f"{driver.configuration.volume_backend_name}")
    return _done(args, f"deleted {kind} {name}", {"name": name, "kind": kind, "deleted": True})


def _cmd_delete(driver: VolumeDriver, args: argparse.Namespace) -> int:
    return _delete(driver, args, "volume", driver.backend_find_volume, driver.delete_volume)


def _cmd_delete_snapshot(driver: VolumeDriver, args: argparse.Namespace) -> int:
    return _delete(driver, args, "snapshot", driver.backend_find_snapshot,
                   driver.delete_snapshot)


def _cmd_snapshot(driver: VolumeDriver, args: argparse.Namespace) -> int:
    info = driver.create_snapshot(args.name, args.volume)
    return _done(args, f"created snapshot {info.name} of {args.volume} ({info.size_gb} GiB)",
                 {**_info_record(info, "snapshot"), "origin": args.volume})


def _records(driver: VolumeDriver) -> list[VolumeRecord]:
    if not isinstance(driver, ListsVolumes):
        raise DriverKitError(f"{type(driver).__name__} cannot list its backend's volumes "
                             f"(it has no backend_list_volumes)")
    return list(driver.backend_list_volumes())


LIST_HEADERS = ("name", "kind", "provisioning", "size_gb", "pool", "origin", "owner")


def _cmd_list(driver: VolumeDriver, args: argparse.Namespace) -> int:
    records = [r.to_dict() for r in _records(driver)
               if args.kind is None or r.kind == args.kind]
    fmt = _format(args) or "table"
    if fmt == "json":  # every field, exact bytes too, as show gives them
        print(json.dumps(records, indent=2))
    else:
        print(render_rows(LIST_HEADERS, [[r[h] for h in LIST_HEADERS] for r in records], fmt))
    return 0


def _cmd_show(driver: VolumeDriver, args: argparse.Namespace) -> int:
    name = driver.validate_name(args.name)
    records = _records(driver)
    found = [r for r in records if r.name == name]
    if not found:
        raise VolumeNotFound(f"no volume or snapshot {name!r} on backend "
                       f"{driver.configuration.volume_backend_name}")
    record = found[0].to_dict()
    record["snapshots"] = ", ".join(r.name for r in records if r.origin == name
                                    and r.kind == "snapshot") or None
    print(render_record(record, _format(args) or "table"))
    return 0


def _cmd_placement(driver: VolumeDriver, args: argparse.Namespace) -> int:
    from driver_kit.placement import resource_providers
    providers = resource_providers(driver.get_volume_stats(refresh=True))
    fmt = _format(args) or "json"  # the Placement API's own shape, as it always printed
    if fmt == "json":
        print(render_document(providers))
        return 0
    headers = ("provider", "total", "reserved", "allocation_ratio", "max_unit", "used",
               "state")
    rows = []
    for entry in providers["resource_providers"]:
        inventory = next(iter(entry["inventories"].values()), {})
        used = next(iter(entry["usages"].values()), None)
        rows.append([entry["name"], inventory.get("total"), inventory.get("reserved"),
                     inventory.get("allocation_ratio"), inventory.get("max_unit"), used,
                     entry.get("backend_state", "up")])
    print(render_rows(headers, rows, fmt))
    return 0


def _cmd_exporter(driver: VolumeDriver, args: argparse.Namespace) -> int:
    try:
        from driver_kit.exporter import serve, serve_until_stopped
    except ImportError as exc:
        raise DriverKitError(f"the exporter needs prometheus-client ({exc}): "
                             f"pip install 'driver-kit[exporter]'") from None
    try:
        server = serve(driver, port=args.port, addr=args.addr,
                       min_refresh_interval_s=args.interval or 0.0)
    except OSError as exc:
        raise DriverKitError(f"cannot listen on {args.addr}:{args.port}: {exc}") from None

    def started() -> None:
        fmt = _format(args)
        print(f"serving {server.url} (Ctrl-C or SIGTERM stops)" if fmt is None else
              render_record({"url": server.url}, fmt), flush=True)

    serve_until_stopped(server, started)
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


FORMAT_HELP = ("output format: table (for people), json (one document, errors too), "
               "value (values only, for scripts); before or after the command")


def _add_format(parser: argparse.ArgumentParser, *, default: Any, shown: bool) -> None:
    parser.add_argument("-f", "--format", choices=FORMATS, default=default,
                        help=FORMAT_HELP if shown else argparse.SUPPRESS)


def _parser(*, json_errors: bool = False) -> argparse.ArgumentParser:
    """The command line; ``check`` is parsed by the harness's own parser, which completion
    (argcomplete: ``eval "$(register-python-argcomplete driver-kit)"``) borrows."""
    parser = FormattedParser(
        prog="driver-kit", description="Capacity-correct volume drivers: stats, pools, "
        "volume operations and compliance checks.",
        epilog="configuration: --config-file, else $DRIVER_KIT_CONFIG, else "
               "/etc/driver-kit/driver-kit.conf, else the LVM simulator",
        json_errors=json_errors)
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {driver_kit.__version__}")
    parser.add_argument("--config-file", action="append", default=[], metavar="FILE",
                        help="cinder.conf-style file with [DEFAULT] enabled_backends and "
                             "one section per backend (repeatable)")
    parser.add_argument("--backend", help="backend section to use")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    _add_format(parser, default=None, shown=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, helptext: str, **kwargs: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=helptext, epilog=f"-f, --format {{table,json,value}}: "
                           f"{FORMAT_HELP}", **kwargs)
        # after the command too, as openstack takes it; kept out of the usage line
        _add_format(p, default=argparse.SUPPRESS, shown=False)
        return p

    command("demo", "narrated walkthrough on the LVM simulator")
    for name, helptext in (("stats", "the get_volume_stats() report"),
                           ("pools", "the get-pools view with capacity factors")):
        p = command(name, helptext)
        p.add_argument("--json", dest="format", action="store_const", const="json",
                       default=argparse.SUPPRESS, help="the same as -f json")
    p = command("list", "volumes and snapshots: size, pool, provisioning, origin, owner")
    p.add_argument("--kind", choices=["volume", "snapshot"], help="only volumes, or snapshots")
    p = command("show", "one volume or snapshot (exit code 4: there is none)")
    p.add_argument("name")
    p = command("create", "create a volume (admission enforced)")
    p.add_argument("name")
    p.add_argument("size", type=_size, help="GiB")
    p.add_argument("--type", choices=["thin", "thick"], help="provisioning:type")
    p.add_argument("--pool", help="pool name (default: the first that fits the type)")
    p = command("extend", "grow a volume (admission enforced)")
    p.add_argument("name")
    p.add_argument("size", type=_size, help="new size in GiB")
    p = command("delete", "delete a volume (exit code 4: there is none)")
    p.add_argument("name")
    p = command("snapshot", "snapshot a volume")
    p.add_argument("name")
    p.add_argument("volume")
    p = command("delete-snapshot", "delete a snapshot (exit code 4: there is none)")
    p.add_argument("name")
    command("placement", "each pool as a Placement DISK_GB inventory with usage (JSON "
            "unless -f says otherwise)")
    p = command("exporter", "serve the pools as Prometheus metrics")
    p.add_argument("--port", type=_port, required=True, help="TCP port (0: any free port)")
    p.add_argument("--addr", default="127.0.0.1",
                   help="address to bind (default: 127.0.0.1, loopback only)")
    p.add_argument("--interval", type=_interval, metavar="SECONDS",
                   help="read the backend at most once per SECONDS (default: every scrape)")
    completing = "_ARGCOMPLETE" in os.environ
    if completing:  # only then: the harness is slow to import
        from driver_kit.compliance.cli import build_parser as check_parser
    sub.add_parser("check", help="run the compliance harness (see driver-kit check --help)",
                   add_help=False, parents=[check_parser()] if completing else [])
    command("check-config", "check --config-file before any backend is used: values, "
            "drivers, unknown options (exit code 2: problems found)")
    return parser


COMMANDS: dict[str, Callable[[VolumeDriver, argparse.Namespace], int]] = {
    "stats": _cmd_stats, "pools": _cmd_pools, "create": _cmd_create,
    "extend": _cmd_extend, "delete": _cmd_delete, "snapshot": _cmd_snapshot,
    "delete-snapshot": _cmd_delete_snapshot, "list": _cmd_list, "show": _cmd_show,
    "placement": _cmd_placement, "exporter": _cmd_exporter,
}


def _default_state_file() -> str:
    return os.path.join(platformdirs.user_state_dir("driver-kit"), "simulator.json")


def _open_driver(args: argparse.Namespace) -> VolumeDriver:
    files, chosen_by = choose_config_files(args.config_file)
    try:
        driver = _load(files, args.backend)
    except ConfigError as exc:
        if chosen_by in ("--config-file", ""):
            raise
        raise ConfigError(f"{exc} (configuration from {chosen_by})") from exc
    for unknown in unknown_in_backend(files, driver.configuration.backend,
                                      type(driver).OPTIONS):
        print(f"warning: {unknown}", file=sys.stderr)
    driver.do_setup()
    driver.check_for_setup_error()
    return driver


def _load(files: list[str], backend: str | None) -> VolumeDriver:
    """The driver of ``backend`` in ``files``; with no file, the embedded simulator's."""
    if files:
        check_config_files(files)  # what is wrong with a file, before anything reads it
        return load_driver(files, backend, overrides=adapter_overrides(files, backend) or None)
    if backend not in (None, DEFAULT_BACKEND):
        raise ConfigError(f"unknown backend {backend!r}: with no --config-file "
                          f"the only backend is {DEFAULT_BACKEND!r}")
    state_file = _default_state_file()
    os.makedirs(os.path.dirname(state_file), exist_ok=True)
    print(f"(no --config-file: using the LVM simulator, state in {state_file})",
          file=sys.stderr)
    return load_driver(files, backend, overrides=default_overrides(state_file))


def _command_index(argv: list[str]) -> int | None:
    """Where the subcommand stands, past the global options and their values."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token in ("--config-file", "--backend", "-f", "--format"):
            index += 2
        elif token.startswith("-"):
            index += 1
        else:
            return index
    return None


def _failed(fmt: str | None, exc: BaseException, message: str, code: int,
            prefix: str) -> int:
    """Say what failed, in one line on stderr or as a JSON document on stdout."""
    if fmt == "json":
        print(error_document(type(exc).__name__, message, code))
    else:
        print(f"{prefix}{message}", file=sys.stderr)
    return code


#: the commands that change the backend: a signal waits until the change is done
CHANGES = frozenset({"create", "extend", "delete", "snapshot", "delete-snapshot"})


def _run(args: argparse.Namespace, guard: SignalGuard) -> int:
    """The command, signals held while it may change the backend."""
    if args.command == "demo":
        # named by path, like the default driver, so driver_kit never imports it
        run_demo = import_object(DEMO, "demo")
        return run_demo(tempfile.mkdtemp(prefix="driver-kit-demo-"))
    if args.command == "check-config":
        return report_configuration(args.config_file, args.backend)
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
    parser = _parser(json_errors=requested_format(argv) == "json")
    # a no-op unless a shell is completing; -f after a command is left out of its usage line,
    # not out of completion
    argcomplete.autocomplete(parser, print_suppressed=True)
    index = _command_index(argv)
    if index is not None and argv[index] == "check":
        from driver_kit.compliance.cli import main_check
        return main_check(argv[:index] + argv[index + 1:])
    args = parser.parse_args(argv)
    fmt = _format(args)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.ERROR,
                        format="%(levelname)s %(name)s: %(message)s")
    with SignalGuard(ending=ending) as guard:
        code = _reported(args, guard, fmt)
        if args.command in CHANGES and not sys.stderr.closed and (note := guard.held_note()):
            print(note, file=sys.stderr)  # after the result or the error it speaks of
        return code


def _reported(args: argparse.Namespace, guard: SignalGuard, fmt: str | None) -> int:
    """The command's exit code, its failure reported in one line (a traceback only with
    ``--debug``)."""
    try:
        return _run(args, guard)
    except CapacityExceeded as exc:
        return _failed(fmt, exc, exc.decision.explain(), EXIT_REFUSED, "refused: ")
    except DriverKitError as exc:
        if args.debug:
            traceback.print_exc()
        if isinstance(exc, ConfigError):
            return _failed(fmt, exc, str(exc), EXIT_USAGE, "config error: ")
        # a volume, snapshot or pool the user named that is not there
        missing = isinstance(exc, (VolumeNotFound, SnapshotNotFound, PoolNotFound))
        return _failed(fmt, exc, str(exc), EXIT_NOT_FOUND if missing else EXIT_ERROR,
                       "error: ")
    except BrokenPipeError:  # e.g. piped into head: not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt as exc:
        stop = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
        print(stop.report(args.command), file=sys.stderr)
        return stop.exit_code
    except Exception as exc:  # noqa: BLE001  (no input may end in a traceback)
        if args.debug:
            traceback.print_exc()
        print(f"error: unexpected {type(exc).__name__}: {exc} (a bug: --debug "
              f"shows where)", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
