"""Where a stats refresh right after an operator's change spends its time.

``profile_after_change`` runs rounds of an operator's change (in another process,
not profiled) then the driver's ``get_volume_stats(refresh=True)`` under cProfile,
and splits the refreshes' time into the phases of the driver's path: the PVs'
metadata-area headers (the fingerprint), the metadata text's read, its parse
(the incremental reader), the pool's device-mapper status (none of them inside
another), and the rest (the stats built from the report). Each phase is a
function's cumulative time; the profiler's own cost makes every figure larger
than the plain wall time, which is measured too.
"""

from __future__ import annotations

import cProfile
import gc
import os
import pstats
import time
from collections.abc import Callable
from typing import Any

#: each phase: (the module file's name, the function's name) whose cumulative time it is
PHASES: dict[str, tuple[str, str]] = {
    "PV headers (fingerprint)": ("mda.py", "vg_fingerprint"),
    "metadata text read": ("mda.py", "read_metadata_text"),
    "parse (incremental reader)": ("vg_incremental.py", "report"),
    "pool status (device-mapper)": ("dm_status.py", "thin_pool_status"),
}
_TOTAL = ("driver.py", "get_volume_stats")
#: functions listed by their own time
TOP = 12


def _cumulative(stats: dict[Any, Any], where: tuple[str, str]) -> tuple[float, int]:
    """The cumulative seconds and calls of the function ``where`` names."""
    seconds, calls = 0.0, 0
    for (path, _, name), (_, ncalls, _, cumulative, _) in stats.items():
        if name == where[1] and os.path.basename(path) == where[0]:
            seconds += cumulative
            calls += ncalls
    return seconds, calls


def profile_after_change(driver: Any, change: Callable[[int], None],
                         rounds: int) -> dict[str, Any]:
    """``rounds`` times: ``change(round)``, then the driver's refresh under cProfile, its
    backend read run in the calling thread (the profiler sees one thread); the phases
    (ms per refresh), the functions of most own time, and the plain wall time of as
    many refreshes after a change without the profiler, the read in its own thread as
    always (ms, median)."""
    plain = []
    for round_ in range(rounds):
        change(2 * round_)
        gc.collect()
        started = time.perf_counter()
        driver.get_volume_stats(refresh=True)
        plain.append(time.perf_counter() - started)
    profiler = cProfile.Profile()
    threaded = driver._read_pools_in_time
    driver._read_pools_in_time = driver._read_pools_or_raise
    try:
        for round_ in range(rounds):
            change(2 * round_ + 1)
            gc.collect()
            profiler.enable()
            driver.get_volume_stats(refresh=True)
            profiler.disable()
    finally:
        driver._read_pools_in_time = threaded
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total, _ = _cumulative(stats, _TOTAL)
    phases = {}
    for label, where in PHASES.items():
        seconds, calls = _cumulative(stats, where)
        phases[label] = {"ms": seconds * 1e3 / rounds, "calls": calls / rounds}
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:TOP]
    return {
        "rounds": rounds,
        "plain_ms": sorted(plain)[len(plain) // 2] * 1e3,
        "total_ms": total * 1e3 / rounds,
        "phases": phases,
        "top": [{"function": f"{os.path.basename(path)}:{line}({name})",
                 "calls": ncalls / rounds, "own_ms": own * 1e3 / rounds,
                 "cumulative_ms": cumulative * 1e3 / rounds}
                for (path, line, name), (_, ncalls, own, cumulative, _) in top],
    }


def render(profile: dict[str, Any], title: str) -> str:
    """The profile as Markdown: the phases, then the functions of most own time."""
    lines = [f"{title} (cProfile over {profile['rounds']} refreshes, each right after an "
             f"operator's change; {profile['total_ms']:.1f} ms each under the profiler, "
             f"{profile['plain_ms']:.1f} ms without it):\n",
             "| phase | calls per refresh | ms per refresh (cumulative) | share |",
             "|---|---:|---:|---:|"]
    total = profile["total_ms"] or float("nan")
    named = 0.0
    for label, phase in profile["phases"].items():
        named += phase["ms"]
        lines.append(f"| {label} | {phase['calls']:g} | {phase['ms']:.2f} | "
                     f"{phase['ms'] / total:.0%} |")
    lines.append(f"| the rest (the stats from the report, locks, logging) | - | "
                 f"{total - named:.2f} | {(total - named) / total:.0%} |")
    lines += ["", "| function | calls per refresh | own ms | cumulative ms |",
              "|---|---:|---:|---:|"]
    lines += [f"| `{row['function']}` | {row['calls']:g} | {row['own_ms']:.2f} | "
              f"{row['cumulative_ms']:.2f} |" for row in profile["top"]]
    return "\n".join(lines) + "\n"
