"""Data written into volumes: what the report's used capacity and a snapshot make of it.

The harness writes through the vendor's ``write_data`` hook (the backend's data
path, as a user of the volume would) and reads back through ``read_data``. Used
capacity is compared with the backend's used bytes while data crosses a 0.01 GiB
boundary, where the spec's rounding up shows an error of a few hundredths of a
percent; a snapshot must hold its origin's data as it was when taken, holes
kept as holes.
"""

from __future__ import annotations

from typing import Any, Callable

from driver_kit import GiB, InvalidInput, MiB, units
from driver_kit.compliance.checks.base import (QUEENS, TRUTH, Check, CheckContext, CheckError,
                                               CheckFailed, Target, behaviour, each_target,
                                               number, pool_named, same)

__all__ = ["CHECKS", "pattern"]

#: how far past the used bytes the boundary is placed: its error window (used / 512,
#: a 0.2 % error) is then about 200 KiB wide
_LEAD_BYTES = 100 * MiB
#: the fine steps around the boundary, and how far on each side they go
_STEP_BYTES = 32 * 1024
_EDGE_BYTES = 256 * 1024
#: a snapshot's data: (offset, length) in a 1 GiB volume, first and last blocks included,
#: each extent followed by a hole
_CHUNKS = ((0, 4096), (3 * MiB, MiB), (256 * MiB, MiB), (GiB - 4096, 4096))
#: what a snapshot may take beyond its data, per extent (a file system's block, a thin
#: pool's chunk)
_SLACK_BYTES = 64 * 1024


def pattern(length: int, seed: int) -> bytes:
    """``length`` bytes, none zero (a hole reads as zeros), repeating only every 251
    bytes, different for each ``seed``."""
    cycle = bytes((i + seed) % 255 + 1 for i in range(251))
    return (cycle * (length // 251 + 1))[:length]


def _used_problem(ctx: CheckContext, drv: Any, target: Target, label: str,
                  ) -> tuple[int, str | None]:
    """(the backend's used bytes, what the report gets wrong about them or None)."""
    pool = ctx.truth(drv).pool(target.pool_name)
    if pool is None:
        raise CheckError(f"the truth hook knows no pool {target.pool_name!r}")
    reported = pool_named(drv, target.pool_name)
    got, want = reported.get("total_used_capacity_gb"), units.bytes_to_gb_up(pool.used_bytes)
    if reported.get("backend_state", "up") != "up":
        return pool.used_bytes, f"{label}: the pool is reported down " \
                                f"({reported.get('down_reason')})"
    if number(got) and same(got, want):
        return pool.used_bytes, None
    return pool.used_bytes, (f"{label}: total_used_capacity_gb {got!r}, the backend uses "
                             f"{pool.used_bytes} bytes ({want} rounded up)")


def _on_each_target(ctx: CheckContext,
                    one: Callable[[Any, Target, str], str | None]) -> str:
    """``one(driver, target, volume)`` with a new ``volume`` of one allocation unit (at
    least 1 GiB) on every target with room."""
    drv = ctx.driver()

    def with_volume(target: Target) -> str | None:
        unit = ctx.unit_gb(drv, target)
        if ctx.room_gb(drv, target) < unit:
            return None
        return one(drv, target, ctx.create(drv, unit, target))
    return each_target(ctx, drv, with_volume)


def _check_used_capacity(ctx: CheckContext) -> str:
    write = ctx.hooks.write_data

    def one(drv: Any, target: Target, volume: str) -> str | None:
        used, problem = _used_problem(ctx, drv, target, "with an empty volume")
        problems = [problem] if problem else []
        if not target.thin:
            return _thick_used(ctx, drv, target, volume, used, problems)
        hundredths = -(-(used + _LEAD_BYTES) * 100 // GiB)
        boundary = hundredths * GiB // 100
        offset, states = 0, 1
        while used <= boundary + _EDGE_BYTES and not problems:
            fine = used >= boundary - _EDGE_BYTES
            step = _STEP_BYTES if fine else min(MiB, boundary - _EDGE_BYTES - used)
            step = max(step, 4096)
            if offset + step > GiB:
                raise CheckError(f"{offset} bytes written into {volume!r} on {target} moved "
                                 f"the backend's used bytes only to {used}: the write_data "
                                 f"hook does not reach the pool the truth reads")
            write(drv, volume, offset, pattern(step, offset // step))
            offset += step
            if fine:
                states += 1
                used, problem = _used_problem(ctx, drv, target,
                                              f"after writing {offset} bytes")
                problems += [problem] if problem else []
            else:
                used = ctx.truth(drv).pool(target.pool_name).used_bytes
        if problems:
            raise CheckFailed(f"on {target}: " + "; ".join(problems[:2]))
        return (f"{target}: {states} states agree, around {hundredths / 100:.2f} GiB used "
                f"({offset} bytes written)")
    return _on_each_target(ctx, one)


def _thick_used(ctx: CheckContext, drv: Any, target: Target, volume: str, used: int,
                problems: list[str]) -> str:
    """A thick volume is allocated when made: writing into it moves no used space, and
    the report agrees with the backend before and after."""
    for seed, (offset, length) in enumerate(_CHUNKS):
        ctx.hooks.write_data(drv, volume, offset, pattern(length, seed))
    after, problem = _used_problem(ctx, drv, target, "after writing into it")
    problems += [problem] if problem else []
    if problems:
        raise CheckFailed(f"on {target}, with a thick volume: " + "; ".join(problems[:2]))
    return (f"{target}: used agrees with the backend ({used} -> {after} bytes after "
            f"writing into a thick volume, allocated when made)")


def _read(ctx: CheckContext, drv: Any, name: str, offset: int, length: int) -> bytes:
    data = ctx.hooks.read_data(drv, name, offset, length)
    if not isinstance(data, (bytes, bytearray)) or len(data) != length:
        raise CheckError(f"the read_data hook returned {type(data).__name__} of "
                         f"{len(data) if hasattr(data, '__len__') else '?'} bytes for a "
                         f"read of {length} bytes of {name!r}")
    return bytes(data)


def _check_snapshot_copy(ctx: CheckContext) -> str:
    write = ctx.hooks.write_data

    def one(drv: Any, target: Target, volume: str) -> str | None:
        for seed, (offset, length) in enumerate(_CHUNKS):
            write(drv, volume, offset, pattern(length, seed))
        before = ctx.truth(drv).pool(target.pool_name)
        try:
            snap = ctx.snapshot(drv, volume)
        except (NotImplementedError, InvalidInput) as exc:
            ctx.not_supported(f"a snapshot on {target}", exc)
            return None  # no snapshots on this pool or type
        after = ctx.truth(drv).pool(target.pool_name)
        problems = [f"{length} bytes at offset {offset} differ from the origin's"
                    for seed, (offset, length) in enumerate(_CHUNKS)
                    if _read(ctx, drv, snap, offset, length) != pattern(length, seed)]
        if _read(ctx, drv, snap, 512 * MiB, 4096) != bytes(4096):
            problems.append("a hole of the origin (offset 512 MiB) reads as data")
        written = sum(length for _, length in _CHUNKS)
        slack = len(_CHUNKS) * max(_SLACK_BYTES,
                                   before.allocation_unit_bytes if before else 1)
        grown = (after.used_bytes - before.used_bytes) if before and after else 0
        if grown > written + slack:
            problems.append(f"it took {grown} bytes of the pool for {written} bytes of data "
                            f"(the origin's holes were filled)")
        write(drv, volume, 0, pattern(4096, 99))
        if _read(ctx, drv, snap, 0, 4096) != pattern(4096, 0):
            problems.append("writing its origin afterwards changed the snapshot")
        if problems:
            raise CheckFailed(f"a snapshot of a 1 GiB volume with {written} bytes written, "
                              f"on {target}: " + "; ".join(problems))
        return f"{target}: the data as taken, holes kept"
    return _on_each_target(ctx, one)


CHECKS: tuple[Check, ...] = (
    behaviour("data.used-capacity", "total_used_capacity_gb is the backend's used bytes "
              "while data is written across a 0.01 GiB boundary", f"{QUEENS}, "
              f"REST API impact: total_used_capacity_gb (the pool's physical usage); the "
              f"kit's conservative rounding (used rounded up, 2 decimals)", _check_used_capacity,
              hooks=TRUTH + ("write_data",)),
    behaviour("data.snapshot-copy", "A snapshot holds its origin's data as it was when "
              "taken, and its holes stay holes", "Cinder driver interface: create_snapshot "
              "(a point-in-time copy); thin provisioning: unwritten blocks take no space",
              _check_snapshot_copy, hooks=TRUTH + ("write_data", "read_data")),
)
