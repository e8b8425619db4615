"""The unprivileged side of ``test_unprivileged_realvm.py``: a Cinder-like process.

Run by the test as the guest's ``cinder`` user (``runuser -u cinder``), never as
root. It builds the driver from the backend's config file, as ``cinder-volume``
does, so everything root goes through the root helper, ``privsep-helper`` and the
driver's privileged daemon. It then answers requests, one JSON object per line on
stdin, one JSON reply per line on stdout:

- ``{"op": "driver", "method": m, "args": [...], "kwargs": {...}}``: a driver call;
- ``{"op": "refresh"}``: ``get_volume_stats(refresh=True)`` and the LVM commands it
  sent (``executor.commands_run``) and the report cache's counters;
- ``{"op": "entry", "module": "commands"|"devices", "name": n, "args": [...],
  "kwargs": {...}}``: a privileged entrypoint called directly, as an attacker who
  owns this process would, with whatever arguments;
- ``{"op": "raw", "name": n, "args": [...], "kwargs": {...}}``: a call of any
  Python name through the daemon's channel, entrypoint or not.

A reply is ``{"ok": <result>}`` or ``{"error": <exception class>, "message": ...}``.

    python unprivileged_side.py <config file> <backend section> [<lock dir>]
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
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
            stats = driver.get_volume_stats(refresh=True)
            return {"stats": stats, "commands": driver.executor.commands_run - start,
                    "cache": _cache_stats(driver),
                    "lvs": sorted(lv.name for lv in driver.vg.report().lvs)}
        if op == "entry":
            return getattr(modules[request["module"]], request["name"])(*args, **kwargs)
        if op == "raw":
            if default.channel is None:
                default.start()
            return default.channel.remote_call(request["name"], tuple(args), kwargs, 120.0)
        if op == "helper":
            return with_helper(request["command"], request["then"])
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

    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"ok": _plain(handle(request))}
        except Exception as exc:  # every outcome goes back to the test
            reply = {"error": f"{type(exc).__module__}.{type(exc).__name__}",
                     "message": str(exc)[:2000],
                     "trace": traceback.format_exc()[-3000:]}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
