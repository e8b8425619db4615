"""The simulator as LVM's interactive shell, as ``lvm_driver.run.shell`` configures it:
``python -m lvm_driver.simulator --state FILE lvm``.

One command per stdin line; each answered with one JSON document on
``LVM_REPORT_FD`` (stdout without it): the report as a fresh command prints
it, then the command log (errors and warnings, what it printed, and the
``shell`` status entry with LVM's return code: 1 processed, else the exit
code). No prompt (LVM built with editline prints none on a pipe), no history.
Injected faults behave as in a real shell: a hang hangs until the client
stops the process, a slow command is slow, a cut output arrives cut.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any, Final

from lvm_driver.run.executor import CommandResult, LVMTimeoutError

#: the "timeout" a command in the shell runs under: a hang lasts until it is killed
HANG_S: Final = 86_400.0
_REPORT_END: Final = "\n  }\n"


def serve(simulator: Any, stdin: IO[bytes] | None = None,
          env: dict[str, str] | None = None) -> int:
    """Answer commands from ``stdin`` until end of file, ``exit`` or ``quit``."""
    env = dict(os.environ if env is None else env)
    stdin = sys.stdin.buffer if stdin is None else stdin
    fd = env.get("LVM_REPORT_FD")
    out = os.fdopen(int(fd), "w") if fd else sys.stdout
    for raw in stdin:
        args = raw.decode(errors="replace").split()
        if args[:1] == ["lvm"]:
            args = args[1:]
        if not args:
            continue
        if args[0] in ("exit", "quit"):
            break
        try:
            result = simulator(args, env, HANG_S)
        except LVMTimeoutError:  # a day-long hang nobody stopped
            continue
        out.write(document(result))
        out.flush()
    return 0


def document(result: CommandResult) -> str:
    """The report-channel document LVM's shell prints for one command."""
    entries: list[tuple[str, str, str, str]] = []
    for line in result.stderr.splitlines():
        if not line.startswith("  "):  # getopt's complaints: plain stderr, as in LVM
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            continue
        text = line.strip()
        entries.append(("warn" if text.startswith("WARNING") else "error",
                         "processing", text, "0"))
    report = result.stdout if result.stdout.lstrip().startswith("{") else ""
    if not report:
        entries += [("print", "shell", line.strip(), "0")
                    for line in result.stdout.splitlines() if line.strip()]
    ok = result.exit_code == 0
    entries.append(("status", "shell", "success" if ok else "failure",
                    "1" if ok else str(result.exit_code)))
    log = ",\n".join(
        "          " + json.dumps({"log_seq_num": str(seq), "log_type": kind,
                                   "log_context": context, "log_object_type": "cmd",
                                   "log_object_name": result.argv[0], "log_message": message,
                                   "log_ret_code": code}, separators=(", ", ":"))
        for seq, (kind, context, message, code) in enumerate(entries, 1))
    tail = f'      "log": [\n{log}\n      ]\n  }}\n'
    if report:
        head = report[:-len(_REPORT_END)] if report.endswith(_REPORT_END) else report
        return f"{head}\n      ,\n{tail}"
    return "  {\n" + tail
