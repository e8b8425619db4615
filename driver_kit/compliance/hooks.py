"""The vendor hooks the harness uses to reach the backend without the driver."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

__all__ = ["ComplianceHooks"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ComplianceHooks:
    """Optional vendor hooks; a check that needs an absent hook is skipped, saying so.

    Each hook gets the live driver instance the check is using.
    """

    #: create a ``size_gb`` GiB volume on the backend *without* the driver (out of band)
    create_out_of_band: Callable[[Any, str, int], None] | None = None
    #: delete what ``create_out_of_band`` made (default: ``driver.delete_volume(name)``)
    delete_out_of_band: Callable[[Any, str], None] | None = None
    #: make the backend unreadable for this driver (array unplugged, directory gone)
    break_backend: Callable[[Any], None] | None = None
    #: undo ``break_backend``
    repair_backend: Callable[[Any], None] | None = None

    def available(self) -> dict[str, bool]:
        """Which hooks are set (for the capability profile)."""
        return {f.name: getattr(self, f.name) is not None for f in fields(self)}

