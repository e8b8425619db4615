"""Append-only JSON-lines journals: every process writes its own, the coordinator reads all.

One ``os.write`` per record on an ``O_APPEND`` descriptor, so records from
threads never interleave and a SIGKILL loses at most the record being written
(a torn last line is skipped when reading).
"""

from __future__ import annotations

import glob
import json
import os
import threading
from typing import Any, Iterator


class Journal:
    """Writes records to one file; safe to share between threads."""

    def __init__(self, path: str):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n").encode()
        with self._lock:
            os.write(self._fd, line)

    def close(self) -> None:
        os.close(self._fd)


class Tail:
    """Reads the new complete records of every journal in a directory, incrementally."""

    def __init__(self, directory: str, pattern: str = "*.jsonl"):
        self.directory = directory
        self.pattern = pattern
        self._offsets: dict[str, int] = {}

    def read(self) -> Iterator[dict[str, Any]]:
        for path in sorted(glob.glob(os.path.join(self.directory, self.pattern))):
            offset = self._offsets.get(path, 0)
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
            end = data.rfind(b"\n") + 1  # a record still being written waits
            self._offsets[path] = offset + end
            for line in data[:end].splitlines():
                try:
                    yield json.loads(line)
                except ValueError:  # torn by a SIGKILL mid-write
                    continue


def read_all(directory: str, pattern: str = "*.jsonl") -> list[dict[str, Any]]:
    """Every complete record of every journal in ``directory``."""
    return list(Tail(directory, pattern).read())
