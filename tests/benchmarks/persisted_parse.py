"""A design measured and not built: a restart that loads the last parse instead of parsing.

The cold parse runs once per process start, because a new process knows nothing.
This measures what a process would pay that found the incremental reader's state
of its predecessor (pickled beside it) instead: loading that state, then the same
text read against it, then a one-LV change, beside the cold parse, alternating, on
the generated texts of ``incremental``. The state is pickled in memory: reading its
file (about 1.8x the text's size) is not counted. Nothing here is the driver's code
path; it touches the reader's private state on purpose.

    python -m tests.benchmarks.incremental --sizes "" --persisted 1000,10000,100000 --runs 3
"""

from __future__ import annotations

import dataclasses
import gc
import pickle
import statistics
import time
from typing import Any

from lvm_driver.read import vg_incremental
from lvm_driver.read.vg_incremental import IncrementalReader
from tests.benchmarks.incremental import VG, texts

_FIELDS = [f.name for f in dataclasses.fields(vg_incremental._State) if f.name != "view"]


def _load(blob: bytes) -> Any:
    """The reader state pickled in ``blob``, its view of the text made anew."""
    gc.disable()  # as the reader's own parse runs
    try:
        fields = pickle.loads(blob)
    finally:
        gc.enable()
    return vg_incremental._State(view=memoryview(fields["raw"]), **fields)


def measure(lv_count: int, runs: int) -> dict[str, Any]:
    """Medians (seconds) at ``lv_count`` thin LVs; every report checked equal to the
    cold parse's, and no full parse after a load."""
    decoded, uuids = texts(lv_count, 1)
    raw, changed = decoded[0].encode(), decoded[1].encode()
    reader = IncrementalReader()
    expected = reader.report(raw, VG, uuids)
    state = reader._state
    blob = pickle.dumps({name: getattr(state, name) for name in _FIELDS}, protocol=5)
    cold, loads, same, change = [], [], [], []
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        IncrementalReader().report(raw, VG, uuids)
        cold.append(time.perf_counter() - started)
        gc.collect()
        started = time.perf_counter()
        loaded = IncrementalReader()
        loaded._state = _load(blob)
        loads.append(time.perf_counter() - started)
        started = time.perf_counter()
        report = loaded.report(raw, VG, uuids)
        same.append(time.perf_counter() - started)
        started = time.perf_counter()
        loaded.report(changed, VG, uuids)
        change.append(time.perf_counter() - started)
        assert report == expected and loaded.stats.full == 0, loaded.stats
    return {"lv_count": lv_count, "text_bytes": len(raw), "pickle_bytes": len(blob),
            "cold_s": statistics.median(cold), "load_s": statistics.median(loads),
            "same_s": statistics.median(same), "change_s": statistics.median(change)}


def render(sizes: list[dict[str, Any]], runs: int) -> str:
    lines = ["\n\n### A restart that loads the last parse (a design measured, not built)\n",
             f"- Medians of {runs} rounds, alternating with the cold parse\n",
             "| thin LVs | text | pickled state | cold parse | load the state "
             "| then the same text | load + same text | then a one-LV change |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in sizes:
        lines.append(
            f"| {m['lv_count']:,} | {m['text_bytes'] / 1024 ** 2:.1f} MiB | "
            f"{m['pickle_bytes'] / 1024 ** 2:.1f} MiB | {m['cold_s'] * 1e3:.0f} ms | "
            f"{m['load_s'] * 1e3:.0f} ms | {m['same_s'] * 1e3:.1f} ms | "
            f"{(m['load_s'] + m['same_s']) * 1e3:.0f} ms | {m['change_s'] * 1e3:.1f} ms |")
    return "\n".join(lines)
