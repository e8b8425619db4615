"""The argv of every LVM command the driver issues, built in one place.

``VolumeGroup`` (``lvm_driver.commands.lvm``) runs them itself as root; the privileged
daemon (``lvm_driver.privileged``) builds the very same ones from arguments it
validated and a VG it read from root-owned configuration. ``parse`` maps an
argv back to its operation and arguments (what the daemon's client,
``lvm_driver.privsep_runner``, sends), and only accepts an argv that the
builder gives back exactly. Names, tags and sizes are validated here
(``lvm_driver.run.names``) on both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from lvm_driver.read.report import REPORT_FIELDS, VG_FIELDS
from lvm_driver.read.report_cache import PV_CHECK_FIELDS, PV_FIELDS
from lvm_driver.run.names import (size_argument, validate_lv_name, validate_tag,
                                  validate_vg_name)

__all__ = ["BUILDERS", "WRITES", "READS", "parse", "report", "live_report", "vg_report",
           "pv_report", "lvm_query", "create_thin_pool", "create_thin", "create_thick",
           "create_snapshot", "extend", "remove", "rename", "activate", "deactivate",
           "merge", "add_tags", "remove_tags", "zero", "LVM_QUERIES"]

Tags = Sequence[str]
_JSON_BYTES: Final = ["--reportformat", "json", "--units", "b", "--nosuffix"]
#: what ``lvm <query>`` may ask: the thin support and the version of this LVM
LVM_QUERIES: Final = ("segtypes", "version")


def _lv(vg: str, name: str) -> str:
    return f"{validate_vg_name(vg)}/{validate_lv_name(name)}"


def _tag_args(tags: Tags, flag: str = "--addtag") -> list[str]:
    if isinstance(tags, str):
        from driver_kit.exceptions import InvalidInput
        raise InvalidInput("tags must be a sequence of tags, not one string")
    args: list[str] = []
    for tag in tags:
        args += [flag, validate_tag(tag)]
    return args


# -- reads --------------------------------------------------------------------

def report(vg: str) -> list[str]:
    """The full report of the VG: metadata only (``--readonly``), with the PV counts."""
    return ["lvs", "--readonly", *_JSON_BYTES, "-o",
            ",".join(REPORT_FIELDS + PV_CHECK_FIELDS), validate_vg_name(vg)]


def live_report(vg: str, name: str | None = None) -> list[str]:
    """``lvs`` asking the kernel too, of LV ``name`` (default: the whole VG)."""
    target = _lv(vg, name) if name is not None else validate_vg_name(vg)
    return ["lvs", *_JSON_BYTES, "-o", ",".join(REPORT_FIELDS), target]


def vg_report(vg: str) -> list[str]:
    """The VG's size, free space and extent size."""
    return ["vgs", *_JSON_BYTES, "--readonly", "-o", ",".join(VG_FIELDS),
            validate_vg_name(vg)]


def pv_report() -> list[str]:
    """The PVs and their metadata areas (every VG's: the caller keeps its VG's)."""
    return ["pvs", "--readonly", "--reportformat", "json", "-o", ",".join(PV_FIELDS)]


def lvm_query(what: str) -> list[str]:
    """``lvm segtypes`` or ``lvm version``."""
    if what not in LVM_QUERIES:
        raise ValueError(f"lvm {what!r} is not a query the driver runs")
    return ["lvm", what]


# -- writes -------------------------------------------------------------------

def create_thin_pool(vg: str, name: str, size_bytes: int, *,
                     metadata_size_bytes: int | None = None) -> list[str]:
    """A thin pool of ``size_bytes`` of data (plus LVM's metadata)."""
    argv = ["lvcreate", "--type", "thin-pool", "--size", size_argument(size_bytes)]
    if metadata_size_bytes is not None:
        argv += ["--poolmetadatasize", size_argument(metadata_size_bytes)]
    return argv + ["--name", validate_lv_name(name), "--yes", validate_vg_name(vg)]


def create_thin(vg: str, name: str, size_bytes: int, *, pool: str,
                tags: Tags = ()) -> list[str]:
    """A thin volume of virtual ``size_bytes`` in ``pool`` (active)."""
    return ["lvcreate", "--type", "thin", "--virtualsize", size_argument(size_bytes),
            "--thinpool", validate_lv_name(pool), "--name", validate_lv_name(name),
            *_tag_args(tags), "--yes", validate_vg_name(vg)]


def create_thick(vg: str, name: str, size_bytes: int, *, tags: Tags = ()) -> list[str]:
    """A linear LV from the VG's free extents (active)."""
    return ["lvcreate", "--type", "linear", "--size", size_argument(size_bytes),
            "--name", validate_lv_name(name), *_tag_args(tags), "--yes",
            validate_vg_name(vg)]


def create_snapshot(vg: str, name: str, origin: str, *, tags: Tags = (),
                    activate: bool = False) -> list[str]:
    """A thin snapshot of ``origin``: inactive and skip-activation, or (``activate``)
    an active copy."""
    argv = ["lvcreate", "--snapshot", "--setactivationskip", "n" if activate else "y"]
    if activate:
        argv += ["--activate", "y"]
    return argv + ["--name", validate_lv_name(name), *_tag_args(tags), "--yes",
                   _lv(vg, origin)]


def extend(vg: str, name: str, size_bytes: int) -> list[str]:
    """Grow LV ``name`` to ``size_bytes``."""
    return ["lvextend", "--size", size_argument(size_bytes), _lv(vg, name)]


def remove(vg: str, name: str) -> list[str]:
    """Remove LV ``name`` without prompting."""
    return ["lvremove", "--force", _lv(vg, name)]


def rename(vg: str, old: str, new: str) -> list[str]:
    """Rename LV ``old`` to ``new``."""
    return ["lvrename", validate_vg_name(vg), validate_lv_name(old), validate_lv_name(new)]


def activate(vg: str, name: str) -> list[str]:
    """Activate LV ``name``, even if flagged skip-activation."""
    return ["lvchange", "--activate", "y", "--ignoreactivationskip", _lv(vg, name)]


def deactivate(vg: str, name: str) -> list[str]:
    """Deactivate LV ``name``."""
    return ["lvchange", "--activate", "n", _lv(vg, name)]


def merge(vg: str, name: str) -> list[str]:
    """Merge snapshot ``name`` into its origin."""
    return ["lvconvert", "--merge", _lv(vg, name)]


def add_tags(vg: str, name: str, tags: Tags) -> list[str]:
    """Add ``tags`` (at least one) to LV ``name``."""
    return ["lvchange", *_some(_tag_args(tags)), _lv(vg, name)]


def remove_tags(vg: str, name: str, tags: Tags) -> list[str]:
    """Remove ``tags`` (at least one) from LV ``name``."""
    return ["lvchange", *_some(_tag_args(tags, "--deltag")), _lv(vg, name)]


def zero(vg: str, name: str, nbytes: int) -> list[str]:
    """``dd`` of ``nbytes`` zeros onto active LV ``name``, as Cinder's ``clear_volume``
    runs it, plus ``conv=fdatasync``."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
        from driver_kit.exceptions import InvalidInput
        raise InvalidInput(f"bytes to zero must be a positive int, got {nbytes!r}")
    return ["dd", "if=/dev/zero", f"of=/dev/{_lv(vg, name)}", f"count={nbytes}", "bs=1M",
            "iflag=count_bytes", "oflag=direct", "conv=fdatasync"]


def _some(args: list[str]) -> list[str]:
    if not args:
        raise ValueError("at least one tag is needed")
    return args


#: operation name -> builder (first argument the VG, except pv_report and lvm_query)
READS: Final[dict[str, Callable[..., list[str]]]] = {
    "report": report, "live_report": live_report, "vg_report": vg_report,
    "pv_report": pv_report, "lvm_query": lvm_query}
WRITES: Final[dict[str, Callable[..., list[str]]]] = {
    "create_thin_pool": create_thin_pool, "create_thin": create_thin,
    "create_thick": create_thick, "create_snapshot": create_snapshot, "extend": extend,
    "remove": remove, "rename": rename, "activate": activate, "deactivate": deactivate,
    "merge": merge, "add_tags": add_tags, "remove_tags": remove_tags, "zero": zero}
BUILDERS: Final = {**READS, **WRITES}
_NO_VG: Final = frozenset({"pv_report", "lvm_query"})

# -- the way back: argv -> (operation, VG, arguments) ---------------------------------

_VALUED: Final = frozenset({"--type", "--size", "--poolmetadatasize", "--name",
                            "--virtualsize", "--thinpool", "--addtag", "--deltag",
                            "--setactivationskip", "--activate", "--reportformat",
                            "--units", "-o"})


def _split(argv: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    options: dict[str, list[str]] = {}
    positionals: list[str] = []
    items = iter(argv[1:])
    for item in items:
        if item in _VALUED:
            options.setdefault(item, []).append(next(items, ""))
        elif item.startswith("-"):
            options.setdefault(item, [])
        else:
            positionals.append(item)
    return options, positionals


def _bytes(text: str) -> int:
    if not (text.endswith("b") and text[:-1].isdigit() and text.isascii()):
        raise ValueError(f"size {text!r} is not <n>b")
    return int(text[:-1])


def _vg_lv(path: str) -> tuple[str, str]:
    vg, sep, lv = path.partition("/")
    if not sep:
        raise ValueError(f"{path!r} is not vg/lv")
    return vg, lv


def _guess(argv: Sequence[str]) -> tuple[str, str | None, dict[str, Any]]:
    command = argv[0]
    options, pos = _split(argv)
    one = options.get
    last = pos[-1] if pos else ""
    if command == "lvm" and len(argv) == 2:
        return "lvm_query", None, {"what": argv[1]}
    if command == "pvs":
        return "pv_report", None, {}
    if command == "vgs":
        return "vg_report", last, {}
    if command == "lvs":
        if "--readonly" in options:
            return "report", last, {}
        if "/" in last:
            vg, lv = _vg_lv(last)
            return "live_report", vg, {"name": lv}
        return "live_report", last, {}
    if command == "dd":
        ops = dict(arg.partition("=")[::2] for arg in argv[1:])
        vg, lv = _vg_lv(ops.get("of", "").removeprefix("/dev/"))
        return "zero", vg, {"name": lv, "nbytes": int(ops.get("count", "0"))}
    tags = (one("--addtag") or []) + (one("--deltag") or [])
    if command == "lvcreate":
        kind = (one("--type") or [""])[0]
        name = (one("--name") or [""])[0]
        if "--snapshot" in options:
            vg, origin = _vg_lv(last)
            return "create_snapshot", vg, {
                "name": name, "origin": origin, "tags": tags,
                "activate": (one("--setactivationskip") or [""])[0] == "n"}
        if kind == "thin-pool":
            md = one("--poolmetadatasize")
            return "create_thin_pool", last, {
                "name": name, "size_bytes": _bytes((one("--size") or [""])[0]),
                "metadata_size_bytes": _bytes(md[0]) if md else None}
        if kind == "thin":
            return "create_thin", last, {
                "name": name, "size_bytes": _bytes((one("--virtualsize") or [""])[0]),
                "pool": (one("--thinpool") or [""])[0], "tags": tags}
        return "create_thick", last, {
            "name": name, "size_bytes": _bytes((one("--size") or [""])[0]), "tags": tags}
    if command == "lvrename" and len(pos) == 3:
        return "rename", pos[0], {"old": pos[1], "new": pos[2]}
    vg, lv = _vg_lv(last)
    if command == "lvextend":
        return "extend", vg, {"name": lv, "size_bytes": _bytes((one("--size") or [""])[0])}
    if command == "lvremove":
        return "remove", vg, {"name": lv}
    if command == "lvconvert":
        return "merge", vg, {"name": lv}
    if command == "lvchange":
        if "--activate" in options:
            on = (one("--activate") or [""])[0] == "y"
            return ("activate" if on else "deactivate"), vg, {"name": lv}
        return ("add_tags" if "--addtag" in options else "remove_tags"), vg, {
            "name": lv, "tags": tags}
    raise ValueError(f"{command!r} is not a command the driver runs")


def parse(argv: Sequence[str]) -> tuple[str, str | None, dict[str, Any]]:
    """The operation, VG (None for ``pv_report`` and ``lvm_query``) and keyword
    arguments of an argv the builders make; ValueError for any other argv (an
    option more or less, another order, another command), InvalidInput for a bad
    name, tag or size."""
    if not argv or isinstance(argv, str):
        raise ValueError("argv is empty")
    try:
        operation, vg, kwargs = _guess(list(argv))
    except (StopIteration, IndexError, KeyError) as exc:
        raise ValueError(f"`{' '.join(argv)}` is not a command the driver runs") from exc
    builder = BUILDERS[operation]
    rebuilt = builder(**kwargs) if operation in _NO_VG else builder(vg, **kwargs)
    if rebuilt != list(argv):
        raise ValueError(f"`{' '.join(argv)}` is not a command the driver runs")
    return operation, vg, kwargs
