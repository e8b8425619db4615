"""``dd`` of zeros onto an LV: the wipe the driver runs on a thick volume before
removing it (``volume_clear``), with dd's ``key=value`` arguments, its record
counts on stderr and its messages.

Not an LVM command (no getopt options, no LVM version); the command table in
``dispatch`` lists it apart from LVM's. Each wipe is recorded in the state
(``LVMSimulator.wipes``) so tests can see what was zeroed.
"""

from __future__ import annotations

import re
from typing import Final

from lvm_driver.simulator.errors import Fail
from lvm_driver.simulator.session import Session, ranges_without
from lvm_driver.simulator.sizes import GiB, KiB, MiB

_DD_UNITS: Final = {"": 1, "c": 1, "w": 2, "b": 512, "K": KiB, "M": MiB, "G": GiB}


def _dd_number(text: str) -> int:
    """A dd number (``4096``, ``1M``) in bytes or blocks, as dd reads it."""
    match = re.fullmatch(r"(\d+)([cwbKMG]?)", text)
    if not match:
        raise Fail(1, f"dd: invalid number: '{text}'")
    return int(match[1]) * _DD_UNITS[match[2]]


def cmd_dd(session: Session, argv: list[str]) -> None:
    """``dd if=/dev/zero of=/dev/<vg>/<lv> count=N bs=... [iflag=count_bytes] ...``:
    the LV's data (thick) is zeroed, a thin LV gets the blocks mapped, and the wipe
    is recorded in the state (``LVMSimulator.wipes``)."""
    ops = dict(arg.partition("=")[::2] for arg in argv)
    if ops.get("if") != "/dev/zero":
        raise Fail(1, f"dd: the LVM simulator copies only if=/dev/zero, got "
                      f"'{ops.get('if', '')}'")
    device = ops.get("of", "")
    vg_name, _, lv_name = device.removeprefix("/dev/").partition("/")
    vg = session.state["vgs"].get(vg_name)
    lv = vg["lvs"].get(lv_name) if vg is not None and "/" not in lv_name else None
    if lv is None or not lv["active"] or lv["kind"] == "thin-pool":
        raise Fail(1, f"dd: failed to open '{device}': No such file or directory")
    block = _dd_number(ops.get("bs", "512"))
    count = _dd_number(ops.get("count", "0"))
    wanted = count if "count_bytes" in ops.get("iflag", "").split(",") else count * block
    size = lv["extents"] * vg["extent_size"]
    written = min(wanted, size)
    if lv["kind"] == "thin":
        session.map_thin(vg, lv, written)
    else:
        lv["data"] = ranges_without(lv.get("data", []), 0, written)
    session.state.setdefault("wipes", []).append({"device": device, "bytes": written})
    session.touch(vg)
    full, part = divmod(written, block)
    records = f"{full}+{1 if part else 0} records"
    session.out.err += [f"{records} in\n", f"{records} out\n",
                        f"{written} bytes copied, 0.001 s, {written // 1000} kB/s\n"]
    if wanted > size:
        raise Fail(1, f"dd: error writing '{device}': No space left on device")
