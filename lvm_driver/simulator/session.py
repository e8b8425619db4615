"""One command's view of the simulated state, and LVM's arithmetic on it.

``Session`` holds the state a command works on and what it prints, and knows
how LVM counts: extents used and free, thin pool data and metadata use (a
model fitted to LVM 2.03.16), and the over-provisioning warnings. Every
command module works through it.
"""

from __future__ import annotations

import re
import secrets
import string
from typing import Any, Final

from lvm_driver.simulator.errors import EXIT_FAILED, EXIT_INVALID, Fail, parse_error
from lvm_driver.simulator.sizes import KiB, MAX_EXTENT_COUNT, human

#: Pool metadata model, fitted to LVM 2.03.16 on kernel 6.1 (exact on the
#: captured cases): metadata is counted in 4 KiB blocks: a fixed part, one
#: space-map bitmap block per 16,320 data chunks and per 16,320 metadata
#: blocks, and per mapping tree one block per 252 mappings (plus index
#: blocks). A thin snapshot shares its origin's tree until either is written.
MD_BLOCK_BYTES: Final = 4 * KiB
MD_FIXED_BLOCKS: Final = 109
MD_BITMAP_ENTRIES: Final = 16_320
MD_BTREE_ENTRIES: Final = 252


def lvm_uuid() -> str:
    """A new random UUID in LVM's 32-character, 7-group form."""
    alphabet = string.ascii_letters + string.digits
    raw = "".join(secrets.choice(alphabet) for _ in range(32))
    groups = (6, 4, 4, 4, 4, 4, 6)
    parts, start = [], 0
    for length in groups:
        parts.append(raw[start:start + length])
        start += length
    return "-".join(parts)


#: lines printed unindented: getopt's complaints, and everything dd prints
_GETOPT_LINE = re.compile(r"[a-z]+: (unrecognized|invalid) option|[a-z]+: option |dd: ")


class Output:
    """What one command prints, indented as LVM indents it."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.err: list[str] = []

    def print(self, line: str) -> None:
        self.out.append(f"  {line}\n")

    def error(self, line: str) -> None:
        # getopt's own complaints ("lvs: unrecognized option ...") are not indented.
        self.err.append(f"{line}\n" if _GETOPT_LINE.match(line) else f"  {line}\n")

    def raw(self, text: str) -> None:
        self.out.append(text)

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def stderr(self) -> str:
        return "".join(self.err)


def thin_lvs(vg: dict[str, Any], pool_name: str) -> dict[str, dict[str, Any]]:
    """The thin LVs (and thin snapshots) of pool ``pool_name``, by name."""
    return {name: lv for name, lv in vg["lvs"].items()
            if lv["kind"] == "thin" and lv["pool"] == pool_name}


class Session:
    """One command's view of the state; ``dirty`` when it changed something."""

    def __init__(self, state: dict[str, Any], out: Output):
        self.state = state
        self.out = out
        self.dirty = False

    # -- lookups ---------------------------------------------------------------

    def vg(self, name: str) -> dict[str, Any]:
        vg = self.state["vgs"].get(name)
        if vg is None:
            raise Fail(EXIT_FAILED, f'Volume group "{name}" not found',
                       f"Cannot process volume group {name}")
        return vg

    @staticmethod
    def split_lv(arg: str) -> tuple[str, str]:
        if arg.startswith("/dev/"):
            arg = arg[5:]
        vg_name, slash, lv_name = arg.partition("/")
        if not slash or not lv_name or "/" in lv_name:
            raise Fail(EXIT_INVALID, f'"{arg}": Invalid path for Logical Volume.')
        return vg_name, lv_name

    # -- VG arithmetic -----------------------------------------------------------

    @staticmethod
    def used_extents(vg: dict[str, Any]) -> int:
        total = vg["pmspare_extents"]
        for lv in vg["lvs"].values():
            if lv["kind"] in ("linear", "cow"):
                total += lv["extents"]
            elif lv["kind"] == "thin-pool":
                total += lv["extents"] + lv["metadata_extents"]
        return total

    def free_extents(self, vg: dict[str, Any]) -> int:
        return vg["extent_count"] - self.used_extents(vg)

    @staticmethod
    def to_extents(vg: dict[str, Any], size_bytes: int) -> int:
        """Whole extents for ``size_bytes``, rounded up; LVM counts them in 32 bits."""
        extents = -(-size_bytes // vg["extent_size"])
        if extents > MAX_EXTENT_COUNT:
            extent = vg["extent_size"]
            raise Fail(EXIT_FAILED, f"Volume too large ({human(extents * extent)}) for "
                                    f"extent size {human(extent)}. Upper limit is less "
                                    f"than {human(MAX_EXTENT_COUNT * extent)}.")
        return extents

    def rounding_note(self, vg: dict[str, Any], size_bytes: int) -> None:
        extents = self.to_extents(vg, size_bytes)
        if extents * vg["extent_size"] != size_bytes:
            self.out.print("Rounding up size to full physical extent "
                           f"{human(extents * vg['extent_size'])}")

    @staticmethod
    def pool_used_bytes(vg: dict[str, Any], pool_name: str) -> int:
        pool = vg["lvs"][pool_name]
        referenced = {ref for lv in thin_lvs(vg, pool_name).values() for ref in lv["refs"]}
        return sum(pool["chunks"][ref] for ref in referenced)

    @staticmethod
    def thin_mapped_bytes(vg: dict[str, Any], lv: dict[str, Any]) -> int:
        pool = vg["lvs"][lv["pool"]]
        return min(sum(pool["chunks"][ref] for ref in lv["refs"]),
                   lv["extents"] * vg["extent_size"])

    def pool_metadata_used(self, vg: dict[str, Any], pool_name: str) -> int:
        pool = vg["lvs"][pool_name]
        metadata_bytes = pool["metadata_extents"] * vg["extent_size"]
        data_chunks = pool["extents"] * vg["extent_size"] // pool["chunk_bytes"]
        blocks = (MD_FIXED_BLOCKS
                  + -(-metadata_bytes // MD_BLOCK_BYTES // MD_BITMAP_ENTRIES)
                  + -(-data_chunks // MD_BITMAP_ENTRIES))
        trees: dict[int, int] = {}
        for lv in thin_lvs(vg, pool_name).values():
            mapped = self.thin_mapped_bytes(vg, lv) // pool["chunk_bytes"]
            trees[lv["tree"]] = max(trees.get(lv["tree"], 0), mapped)
        blocks += sum(_btree_blocks(entries) for entries in trees.values())
        return min(blocks * MD_BLOCK_BYTES, metadata_bytes)

    def map_thin(self, vg: dict[str, Any], rec: dict[str, Any], nbytes: int) -> int:
        """Map ``nbytes`` more of thin LV ``rec`` (rounded up to chunks, capped at the LV's
        size and at the pool's room); returns how many bytes the pool could not map."""
        pool = vg["lvs"][rec["pool"]]
        chunk = pool["chunk_bytes"]
        room_in_lv = rec["extents"] * vg["extent_size"] - self.thin_mapped_bytes(vg, rec)
        wanted = min(-(-nbytes // chunk) * chunk, max(room_in_lv, 0))
        room_in_pool = pool["extents"] * vg["extent_size"] - \
            self.pool_used_bytes(vg, rec["pool"])
        granted = min(wanted, room_in_pool)
        if granted > 0:
            if any(other is not rec and other["tree"] == rec["tree"]
                   for other in thin_lvs(vg, rec["pool"]).values()):
                pool["next_tree"] = pool.get("next_tree", 1) + 1
                rec["tree"] = pool["next_tree"]  # copy-on-write of a shared tree
            ref = str(pool["next_chunk"])
            pool["next_chunk"] += 1
            pool["chunks"][ref] = granted
            rec["refs"].append(ref)
        return wanted - granted

    @staticmethod
    def prune_chunks(vg: dict[str, Any]) -> None:
        for pool_name, pool in vg["lvs"].items():
            if pool["kind"] != "thin-pool":
                continue
            live = {ref for lv in thin_lvs(vg, pool_name).values() for ref in lv["refs"]}
            pool["chunks"] = {ref: size for ref, size in pool["chunks"].items() if ref in live}

    def check_overprovisioning(self, vg: dict[str, Any], lv_name: str) -> None:
        """LVM's warnings after a change when thin volumes outgrow their pools.

        Follows pool_check_overprovisioning() of LVM 2.03 with the default
        autoextend settings (threshold 100): over-provisioning is allowed,
        only warned about. Runs on the state after the change.
        """
        extent = vg["extent_size"]
        lvs = vg["lvs"]
        lv = lvs[lv_name]
        pool_name = lv["pool"] if lv["kind"] == "thin" else (
            lv_name if lv["kind"] == "thin-pool" else None)

        def thin_sum(pool: str) -> int:
            return sum(rec["extents"] * extent for rec in thin_lvs(vg, pool).values())

        pool_sum = total = 0
        if pool_name is not None:
            pool_sum = lvs[pool_name]["extents"] * extent
            total = thin_sum(pool_name)
            if total <= pool_sum:
                return
        more_pools = 0
        for name, rec in lvs.items():
            if rec["kind"] == "thin-pool" and name != pool_name:
                more_pools += 1
                pool_sum += rec["extents"] * extent
                total += thin_sum(name)
        if total <= pool_sum:
            return
        vg_bytes = vg["extent_count"] * extent
        free_bytes = self.free_extents(vg) * extent
        if vg_bytes < total:
            text, limit = " and the size of whole volume group", vg_bytes
        elif free_bytes < total:
            text = " and the amount of free space in volume group" if free_bytes else ""
            limit = free_bytes
        else:
            text, limit = "", pool_sum
        which = "s" if more_pools else f" {vg['name']}/{pool_name}"
        limit_text = human(limit) if limit > 0 else "no free space in volume group"
        self.out.error(f"WARNING: Sum of all thin volume sizes ({human(total)}) exceeds "
                       f"the size of thin pool{which}{text} ({limit_text}).")
        self.out.print("WARNING: You have not turned on protection against thin pools "
                       "running out of space.")
        self.out.print("WARNING: Set activation/thin_pool_autoextend_threshold below 100 "
                       "to trigger automatic extension of thin pools before they get full.")

    def touch(self, vg: dict[str, Any]) -> None:
        """Record a change of ``vg``'s metadata (LVM bumps its seqno)."""
        vg["seqno"] += 1
        self.dirty = True

    def new_lv(self, vg: dict[str, Any], name: str, kind: str, extents: int,
               tags: list[str], **extra: Any) -> None:
        """Add LV ``name``; ``extra`` adds kind-specific fields or overrides
        ``active`` and ``skip``."""
        vg["lvs"][name] = {"kind": kind, "uuid": lvm_uuid(), "extents": extents,
                           "active": True, "skip": False, "tags": sorted(set(tags)),
                           **extra}
        self.touch(vg)

    @staticmethod
    def auto_name(vg: dict[str, Any]) -> str:
        number = 0
        while f"lvol{number}" in vg["lvs"]:
            number += 1
        return f"lvol{number}"


def ranges_without(ranges: list[list[int]], start: int, end: int) -> list[list[int]]:
    """Byte ranges ``[a, b)`` less ``[start, end)`` (a thick LV's data less a wipe)."""
    kept = []
    for a, b in ranges:
        kept += [r for r in ([a, min(b, start)], [max(a, end), b]) if r[0] < r[1]]
    return kept


def _btree_blocks(entries: int) -> int:
    """Blocks of a dm-persistent-data btree holding ``entries`` mappings."""
    nodes = max(1, -(-entries // MD_BTREE_ENTRIES))
    total = nodes
    while nodes > 1:
        nodes = -(-nodes // MD_BTREE_ENTRIES)
        total += nodes
    return total


def extents_option(session: Session, vg: dict[str, Any], text: str) -> int:
    """An ``--extents`` argument (N, +N, N%FREE, N%VG) as a count of extents."""
    match = re.fullmatch(r"\+?(\d+)(?:%(FREE|VG))?", text)
    if not match:
        raise parse_error(f"Invalid argument for --extents: {text}")
    number, base = int(match[1]), match[2]
    if base == "FREE":
        return session.free_extents(vg) * number // 100
    if base == "VG":
        return vg["extent_count"] * number // 100
    return number
