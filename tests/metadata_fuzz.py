"""Random VG metadata texts for the reader's fuzz tests: valid ones, written the way LVM
writes a metadata area, each with the report ``lvs --readonly`` prints of it worked out
from the model here (not by the reader); and mutations of them, whose report nobody
knows beforehand (LVM's own verdict is taken in the VM lane).

The VG fits the VM lane's PV: one PV of 1023 extents of 4 MiB, pe_start 2048 sectors.
"""

from __future__ import annotations

import os
import random
import string
import time
from dataclasses import dataclass, field

VG = "dkvg"
EXTENT_SECTORS = 8192
EXTENT_BYTES = EXTENT_SECTORS * 512
PE_COUNT = 1023
PV_ID = "4CqQec-oM37-ucDh-nMPb-HVkQ-fbh2-yG2JaP"
_ID_CHARS = string.ascii_letters + string.digits
_NAME_CHARS = string.ascii_letters + string.digits + "+_.-"
_TAG_CHARS = string.ascii_letters + string.digits + "_+.-/=!:&#"
#: a report row: name, size in bytes, lv_attr, pool, origin, tags
Row = tuple[str, int, str, "str | None", "str | None", tuple[str, ...]]


def _id(rng: random.Random) -> str:
    chars = "".join(rng.choice(_ID_CHARS) for _ in range(32))
    widths, parts, at = (6, 4, 4, 4, 4, 4, 6), [], 0
    for width in widths:
        parts.append(chars[at:at + width])
        at += width
    return "-".join(parts)


def _name(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = rng.choice(string.ascii_letters) + "".join(
            rng.choice(_NAME_CHARS) for _ in range(rng.randint(0, 12)))
        # names LVM reserves, and those of the pool's own LVs, are left out
        if name not in taken and not name.startswith(("snapshot", "pvmove")) and not any(
                part in name for part in ("_t", "_pmspare", "_c", "_m", "_r", "_v", "_i")):
            taken.add(name)
            return name


def _tags(rng: random.Random) -> tuple[str, ...]:
    tags = {rng.choice(string.ascii_letters) + "".join(
        rng.choice(_TAG_CHARS) for _ in range(rng.randint(0, 8)))
        for _ in range(rng.choice((0, 0, 1, 2, 3)))}
    return tuple(tags)


@dataclass
class _Section:
    name: str
    status: tuple[str, ...]
    flags: tuple[str, ...]
    tags: tuple[str, ...]
    segment: str
    alloc: str = ""


@dataclass
class RandomVG:
    """A random VG: its metadata text and the ``lvs --readonly`` rows worked out."""

    text: str
    vg_size_bytes: int
    vg_free_bytes: int
    rows: list[Row] = field(default_factory=list)


def _lv_text(lv: _Section, rng: random.Random) -> str:
    quote = ", ".join(f'"{item}"' for item in lv.status)
    flags = ", ".join(f'"{item}"' for item in lv.flags)
    tags = ", ".join(f'"{item}"' for item in lv.tags)
    return (f"\n{lv.name} {{\nid = \"{_id(rng)}\"\nstatus = [{quote}]\nflags = [{flags}]\n"
            + (f"tags = [{tags}]\n" if lv.tags else "")
            + (f'allocation_policy = "{lv.alloc}"\n' if lv.alloc else "")
            + f"creation_time = {rng.randint(1_600_000_000, 1_900_000_000)}\n"
            f'creation_host = "fuzz"\nsegment_count = 1\n\nsegment1 {{\nstart_extent = 0\n'
            f"{lv.segment}}}\n}}\n")


def _linear(extents: int, first: int) -> str:
    return (f'extent_count = {extents}\n\ntype = "striped"\nstripe_count = 1\n\n'
            f'stripes = [\n"pv0", {first}\n]\n')


def random_vg(rng: random.Random, *, max_lvs: int = 12) -> RandomVG:
    """A valid VG of a thin pool, thin volumes and snapshots, thick LVs."""
    taken = {"pool", "pool_tdata", "pool_tmeta", "lvol0_pmspare"}
    zero = rng.random() < 0.7
    pool_extents = rng.randint(8, 400)
    sections = [
        _Section("pool", ("READ", "WRITE", "VISIBLE"), (), _tags(rng),
                 f'extent_count = {pool_extents}\n\ntype = "thin-pool"\n'
                 f'metadata = "pool_tmeta"\npool = "pool_tdata"\n'
                 f"transaction_id = {rng.randint(0, 2 ** 40)}\n"
                 f"chunk_size = {128 * 2 ** rng.randint(0, 6)}\n"
                 f'discards = "{rng.choice(("passdown", "nopassdown", "ignore"))}"\n'
                 f"zero_new_blocks = {int(zero)}\n"),
        _Section("lvol0_pmspare", ("READ", "WRITE"), (), (), _linear(1, 0)),
        _Section("pool_tmeta", ("READ", "WRITE"), (), (), _linear(1, 1)),
        _Section("pool_tdata", ("READ", "WRITE"), (), (), _linear(pool_extents, 2))]
    rows: list[Row] = [("pool", pool_extents * EXTENT_BYTES,
                        f"twi-XXt{'z' if zero else '-'}--", None, None,
                        tuple(sorted(sections[0].tags)))]
    free_at = 2 + pool_extents
    thin: list[tuple[str, int]] = []
    for device_id in range(1, rng.randint(0, max_lvs) + 1):
        name = _name(rng, taken)
        tags = _tags(rng)
        writable = rng.random() < 0.9
        status = ("READ", "WRITE", "VISIBLE") if writable else ("READ", "VISIBLE")
        kind = rng.random()
        if kind < 0.55 or not thin and kind < 0.8:
            extents = rng.randint(1, 2 ** 20)
            origin = None
        elif kind < 0.8:
            origin, extents = rng.choice(thin)
        else:
            extents = rng.randint(1, 16)
            if free_at + extents > PE_COUNT:
                continue
            alloc = rng.choice(("", "normal", "contiguous", "cling", "anywhere"))
            sections.append(_Section(name, status, (), tags, _linear(extents, free_at), alloc))
            free_at += extents
            letter = {"": "i", "normal": "n", "contiguous": "c", "cling": "l",
                      "anywhere": "a"}[alloc]
            rows.append((name, extents * EXTENT_BYTES,
                         f"-{'w' if writable else 'r'}{letter}-XX----", None, None,
                         tuple(sorted(tags))))
            continue
        skip = origin is not None or rng.random() < 0.1
        sections.append(_Section(
            name, status, ("ACTIVATION_SKIP",) if skip else (), tags,
            f'extent_count = {extents}\n\ntype = "thin"\nthin_pool = "pool"\n'
            f"transaction_id = {device_id - 1}\ndevice_id = {device_id}\n"
            + (f'origin = "{origin}"\n' if origin else "")))
        thin.append((name, extents))
        rows.append((name, extents * EXTENT_BYTES,
                     f"V{'w' if writable else 'r'}i-XXt{'z' if zero else '-'}-"
                     f"{'k' if skip else '-'}", "pool", origin, tuple(sorted(tags))))
    rng.shuffle(sections)
    text = (f'{VG} {{\nid = "{_id(rng)}"\nseqno = {rng.randint(1, 2 ** 31)}\nformat = "lvm2"\n'
            f'status = ["RESIZEABLE", "READ", "WRITE"]\nflags = []\n'
            f"extent_size = {EXTENT_SECTORS}\nmax_lv = 0\nmax_pv = 0\nmetadata_copies = 0\n\n"
            f'physical_volumes {{\n\npv0 {{\nid = "{PV_ID}"\ndevice = "/dev/loop0"\n\n'
            f'status = ["ALLOCATABLE"]\nflags = []\ndev_size = 8388608\npe_start = 2048\n'
            f"pe_count = {PE_COUNT}\n}}\n}}\n\nlogical_volumes {{\n"
            + "".join(_lv_text(lv, rng) for lv in sections)
            + '}\n\n}\n# Generated by the fuzz test\n\ncontents = "Text Format Volume Group"\n'
            f'version = 1\n\ndescription = ""\n\ncreation_host = "fuzz"\n'
            f"creation_time = 1795457434\n")
    rows.sort()
    return RandomVG(text, PE_COUNT * EXTENT_BYTES, (PE_COUNT - free_at) * EXTENT_BYTES, rows)


_INTEGERS = ("0", "1", "-1", "08", "010", "+7", str(2 ** 31), str(2 ** 32 - 1), str(2 ** 32),
             str(2 ** 32 + 1), str(2 ** 63 - 1), str(2 ** 64), "1.0", "0x10")
_CHARACTERS = ("\0", "\\", '"', ",", " ", "\t", "{", "}", "#", "\n", "=", "[", "]", "x", "'")


#: settings LVM reads as 32-bit counts (it keeps the low 32 bits of a larger one)
UINT32_KEYS = frozenset({"seqno", "extent_size", "max_lv", "max_pv", "pe_count",
                         "segment_count", "start_extent", "extent_count", "stripe_count",
                         "chunk_size", "device_id", "zero_new_blocks", "metadata_copies"})


def _read_otherwise(key: str, value: str) -> bool:
    """Whether LVM reads ``key = value`` otherwise than at face value, or not at all: a
    leading zero (octal), a sign, past 64 bits, past 32 bits where it keeps 32."""
    digits = value.lstrip("-")
    return (digits.isdigit() and digits != "0" and digits.startswith("0")
            or value.startswith("+") or value == str(2 ** 64)
            or value.isdigit() and int(value) > 2 ** 32 - 1 and key in UINT32_KEYS)


def mutate(text: str, rng: random.Random) -> tuple[str, str, bool]:
    """``text`` with one random edit, what the edit was, and whether LVM is known to
    refuse the result or read it otherwise than at face value (the reader must refuse)."""
    lines = text.split("\n")
    kind = rng.randrange(8)
    if kind == 0:  # an integer replaced by an awkward one
        numbered = [i for i, line in enumerate(lines) if line.rstrip().split(" ")[-1].isdigit()]
        at = rng.choice(numbered)
        key = lines[at].split(" = ")[0]
        value = rng.choice(_INTEGERS)
        lines[at] = f"{key} = {value}"
        return ("\n".join(lines), f"{key} = {value} (line {at + 1})",
                _read_otherwise(key, value))
    if kind == 1:  # a character inserted anywhere
        at, char = rng.randrange(len(text) + 1), rng.choice(_CHARACTERS)
        # a NUL ends LVM's reading; a blank before the VG's name, its reading of a device
        known = char == "\0" and at < len(text) or at == 0 and char.isspace()
        return text[:at] + char + text[at:], f"{char!r} inserted at offset {at}", known
    if kind == 2:
        at = rng.randrange(len(lines))
        return "\n".join(lines[:at] + lines[at + 1:]), f"line {at + 1} deleted", False
    if kind == 3:
        at = rng.randrange(len(lines))
        return "\n".join(lines[:at + 1] + lines[at:]), f"line {at + 1} doubled", False
    if kind == 4:  # one quoted string swapped for another of the text
        quoted = [i for i, line in enumerate(lines) if line.count('"') == 2 and " = " in line]
        at, other = rng.choice(quoted), rng.choice(quoted)
        key = lines[at].split(" = ")[0]
        value = lines[other].split(" = ", 1)[1]
        lines[at] = f"{key} = {value}"
        return "\n".join(lines), f"{key} = {value} (line {at + 1})", False
    if kind == 6:  # a setting's value of another type: a list, a section, a string
        settings = [i for i, line in enumerate(lines) if " = " in line]
        at = rng.choice(settings)
        key, value = lines[at].split(" = ", 1)
        lines[at] = rng.choice((f"{key} = [{value}]", f"{key} {{\nx = {value}\n}}",
                                f'{key} = "{value.strip(chr(34))}"', f"{key} = []"))
        return "\n".join(lines), f"{lines[at]!r} (line {at + 1})", False
    if kind == 5:
        at = rng.randrange(len(text))
        # before the contents and version lines: LVM reads no such text
        return text[:at], f"cut at offset {at}", at < text.index("\nversion = 1\n")
    at = rng.randrange(len(text))  # a character deleted
    return text[:at] + text[at + 1:], f"{text[at]!r} deleted at offset {at}", False


#: the seed a CI run uses, so each CI run replays the very texts the last one passed
CI_SEED = 20261126


def fuzz_seed() -> int:
    """``$DK_FUZZ_SEED``; else under ``CI=true`` the fixed CI_SEED; else a new one.
    Printed, so any run can be replayed."""
    default = CI_SEED if os.environ.get("CI") == "true" else time.time_ns() % 2 ** 32
    seed = int(os.environ.get("DK_FUZZ_SEED", default))
    print(f"fuzz seed {seed} (DK_FUZZ_SEED={seed} replays it)")
    return seed
