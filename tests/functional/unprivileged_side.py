"""The unprivileged side of the VM lane's unprivileged tests: a Cinder-like process.

Run by the test as the guest's ``cinder`` user (``runuser -u cinder``), never as
root. It builds the driver from the backend's config file, as ``cinder-volume``
does, so everything root goes through the root helper, ``privsep-helper`` and the
driver's privileged daemon. It then answers requests, one JSON object per line on
stdin, one JSON reply per line on stdout:

- ``{"op": "driver", "method": m, "args": [...], "kwargs": {...}}``: a driver call;
- ``{"op": "refresh"}``: ``get_volume_stats(refresh=True)``, its own wall time
  (``refresh_seconds``), the LVM commands it sent (``executor.commands_run``), the
  report cache's counters and the LVs of the report;
- ``{"op": "profile", "refreshes": n}``: n such refreshes under cProfile (the read in
  this thread, not the stats read's own), the functions that took the most time;
- ``{"op": "entry", "module": "commands"|"devices", "name": n, "args": [...],
  "kwargs": {...}}``: a privileged entrypoint called directly, as an attacker who
  owns this process would, with whatever arguments;
- ``{"op": "raw", "name": n, "args": [...], "kwargs": {...}}``: a call of any
  Python name through the daemon's channel, entrypoint or not.

A reply is ``{"ok": <result>, "seconds": <wall time of the request>}`` or
``{"error": <exception class>, "message": ...}``.

    python unprivileged_side.py <config file> <backend section> [<lock dir>]
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from typing import Any


def _plain(value: Any) -> Any:
    """``value`` as JSON can carry it (dataclasses as dicts, bytes by length)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": len(value)}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _cache_stats(driver: Any) -> Any:
    stats = getattr(driver.vg, "report_cache_stats", None)
    return _plain(stats() if callable(stats) else stats)


def _brick(root_helper: str, vg_name: str, pool: str, lvm_conf: str | None) -> Any:
    """os-brick's ``LVM`` as Cinder's LVM driver builds it for lvm_type=thin, running
    each command with ``processutils.execute`` and ``root_helper`` (Cinder's
    ``utils.execute``). Built as 'default' and given the pool, as
    tests/benchmarks/refresh.make_brick does (the thin constructor only adds a pool
    activation); the pool's empty data% under ``lvs --readonly`` is filled in the
    same way. Returns (the commands run, the LVM object)."""
    import shlex

    from os_brick.local_dev import lvm as brick_lvm
    from oslo_concurrency import processutils
    from oslo_privsep import priv_context
    # as cinder-volume does at start: os-brick's own privsep daemon through the root helper
    priv_context.init(root_helper=shlex.split(root_helper))
    commands: list[tuple[str, ...]] = []

    def execute(*cmd: str, **kwargs: Any) -> tuple[str, str]:
        commands.append(cmd)
        out, err = processutils.execute(*cmd, **kwargs)
        if "size,data_percent" in cmd and out.strip().endswith(":"):
            out = out.rstrip() + "37.21\n"  # refresh.DATA_PERCENT
        return out, err

    vg = brick_lvm.LVM(vg_name, root_helper, lvm_type="default", executor=execute,
                       lvm_conf=lvm_conf, suppress_fd_warn=True)
    vg.vg_thin_pool = pool
    return commands, vg


def _cinder_refresh(vg: Any) -> dict[str, Any]:
    """What Cinder's ``LVMVolumeDriver._update_volume_stats`` asks os-brick for."""
    vg.update_volume_group_info()
    return {"total_volumes": len(vg.get_volumes()), "total_capacity_gb": vg.vg_thin_pool_size,
            "free_capacity_gb": vg.vg_thin_pool_free_space,
            "provisioned_capacity_gb": vg.vg_provisioned_capacity}


def _profile(driver: Any, refreshes: int) -> dict[str, Any]:
    """``refreshes`` refreshes under cProfile, the backend read run in this thread (the
    profiler sees one thread): per refresh, the wall time and the 15 functions of most
    own time (ms)."""
    import cProfile
    import pstats

    threaded = driver._read_pools_in_time
    driver._read_pools_in_time = driver._read_pools_or_raise
    profile = cProfile.Profile()
    try:
        started = time.perf_counter()
        profile.enable()
        for _ in range(refreshes):
            driver.get_volume_stats(refresh=True)
        profile.disable()
        seconds = time.perf_counter() - started
    finally:
        driver._read_pools_in_time = threaded
    rows = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    top = sorted(rows.items(), key=lambda item: item[1][2], reverse=True)[:15]
    return {"refreshes": refreshes, "ms_per_refresh": seconds * 1000 / refreshes,
            "top": [{"function": f"{os.path.basename(file)}:{line}({name})",
                     "calls": calls / refreshes, "own_ms": own * 1000 / refreshes,
                     "cumulative_ms": cumulative * 1000 / refreshes}
                    for (file, line, name), (_, calls, own, cumulative, _) in top]}


def main(argv: list[str]) -> int:
    if os.geteuid() == 0:
        print(json.dumps({"error": "RuntimeError", "message": "runs as root"}), flush=True)
        return 2
    config_file, section = argv[0], argv[1]
    from driver_kit import load_backend_config
    from driver_kit.config import make_conf
    from lvm_driver.driver import LVM_OPTS, ThinLVMDriver
    from lvm_driver.privileged import commands, default, devices

    overrides = {"lock_path": argv[2]} if len(argv) > 2 else {}
    conf = load_backend_config(make_conf([config_file]), section, extra_opts=LVM_OPTS,
                               overrides=overrides)
    driver = ThinLVMDriver(conf)
    modules = {"commands": commands, "devices": devices}

    def handle(request: dict[str, Any]) -> Any:
        op = request["op"]
        args, kwargs = request.get("args", []), request.get("kwargs", {})
        if op == "whoami":
            return {"uid": os.geteuid(), "gid": os.getegid(), "pid": os.getpid()}
        if op == "setup":
            driver.do_setup()
            driver.check_for_setup_error()
            return {"runner": type(driver.executor.runner).__name__}
        if op == "driver":
            return getattr(driver, request["method"])(*args, **kwargs)
        if op == "refresh":
            start = driver.executor.commands_run
            started = time.perf_counter()
            stats = driver.get_volume_stats(refresh=True)
            seconds = time.perf_counter() - started
            return {"stats": stats, "commands": driver.executor.commands_run - start,
                    "refresh_seconds": seconds, "cache": _cache_stats(driver),
                    "lvs": sorted(lv.name for lv in driver.vg.report().lvs)}
        if op == "profile":
            return _profile(driver, int(request["refreshes"]))
        if op == "entry":
            return getattr(modules[request["module"]], request["name"])(*args, **kwargs)
        if op == "raw":
            if default.channel is None:
                default.start()
            return default.channel.remote_call(request["name"], tuple(args), kwargs, 120.0)
        if op == "helper":
            return with_helper(request["command"], request["then"])
        if op == "brick_refresh":
            return brick_refresh(request)
        raise ValueError(f"unknown op {op!r}")

    def with_helper(command: str, then: dict[str, Any]) -> Any:
        """``then`` with the daemon started anew by ``command``; the driver's own
        daemon is started again by its next call."""
        from oslo_config import cfg
        group = default.cfg_section
        previous = cfg.CONF[group].helper_command
        default.stop()
        cfg.CONF.set_override("helper_command", command, group=group)
        try:
            return handle(then)
        finally:
            default.stop()
            cfg.CONF.set_override("helper_command", previous, group=group)

    bricks: dict[str, Any] = {}

    def brick_refresh(request: dict[str, Any]) -> Any:
        key = json.dumps(request, sort_keys=True)
        if key not in bricks:
            bricks[key] = _brick(request["root_helper"], request["vg"], request["pool"],
                                 request.get("lvm_conf"))
        commands, vg = bricks[key]
        start = len(commands)
        started = time.perf_counter()
        stats = _cinder_refresh(vg)
        seconds = time.perf_counter() - started
        return {"stats": stats, "commands": len(commands) - start,
                "refresh_seconds": seconds}

    for line in sys.stdin:
        request = json.loads(line)
        started = time.perf_counter()
        try:
            reply = {"ok": _plain(handle(request)), "seconds": time.perf_counter() - started}
        except Exception as exc:  # every outcome goes back to the test
            reply = {"error": f"{type(exc).__module__}.{type(exc).__name__}",
                     "message": str(exc)[:2000],
                     "trace": traceback.format_exc()[-3000:]}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
