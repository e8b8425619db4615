"""One error hierarchy for the kit and every driver built on it.

    DriverKitError
    ├── InvalidInput (ValueError)          bad argument to a public function
    │   ├── InvalidName                    volume/snapshot name breaks the rules
    │   ├── InvalidSize                    zero, negative, NaN, fractional, shrinking
    │   ├── InvalidStats                   a stats dict that breaks the contract
    │   ├── NotManaged                     an object the driver did not create
    │   └── VolumeBusy                     a volume that still has snapshots
    ├── ConfigError (ValueError)           an option value refused at load time
    ├── NotFound (LookupError)
    │   ├── VolumeNotFound
    │   ├── SnapshotNotFound
    │   └── PoolNotFound
    ├── AlreadyExists                      a create whose name is taken
    ├── CapacityExceeded                   admission refused; carries the breakdown
    └── BackendError (RuntimeError)        the backend failed or cannot be read
        ├── BackendUnavailable             cannot be read at all (stats fail closed)
        ├── SetupError                     not usable as configured; says what to fix
        └── BackendTimeout (TimeoutError)  a backend command hung past its timeout
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DriverKitError", "InvalidInput", "InvalidName", "InvalidSize",
    "InvalidStats", "NotManaged", "VolumeBusy", "ConfigError", "NotFound", "VolumeNotFound",
    "SnapshotNotFound", "PoolNotFound", "AlreadyExists", "CapacityExceeded",
    "BackendError", "BackendUnavailable", "BackendTimeout", "SetupError", "CoordinationError",
]


class DriverKitError(Exception):
    """Root of every error the kit raises."""


class InvalidInput(DriverKitError, ValueError):
    """An argument to a public function is not acceptable."""


class InvalidName(InvalidInput):
    """A volume or snapshot name breaks the backend's naming rules."""


class InvalidSize(InvalidInput):
    """A size is zero, negative, NaN, fractional or shrinks a volume."""


class InvalidStats(InvalidInput):
    """A stats dict breaks the contract; ``violations`` lists every problem."""

    def __init__(self, message: str, violations: list[Any] | None = None):
        super().__init__(message)
        self.violations = list(violations or [])


class NotManaged(InvalidInput):
    """A destructive operation named an object this driver did not create.

    Nothing was changed: a driver removes only what it made (an operator's
    volume on the same backend is counted, never deleted).
    """


class VolumeBusy(InvalidInput):
    """A volume cannot be deleted while it has snapshots (Cinder's rule).

    ``snapshots`` names them; nothing was changed.
    """

    def __init__(self, message: str, snapshots: list[str] | tuple[str, ...] = ()):
        super().__init__(message)
        self.snapshots = tuple(snapshots)


class ConfigError(DriverKitError, ValueError):
    """A configuration value is refused when it is loaded."""


class NotFound(DriverKitError, LookupError):
    """The named object does not exist on the backend."""


class VolumeNotFound(NotFound):
    """No volume of that name."""


class SnapshotNotFound(NotFound):
    """No snapshot of that name."""


class PoolNotFound(NotFound):
    """No pool of that name."""


class AlreadyExists(DriverKitError):
    """A create named an object that already exists."""


class CapacityExceeded(DriverKitError):
    """Admission refused a create or extend; ``decision`` holds the breakdown."""

    def __init__(self, decision: Any):
        super().__init__(decision.explain())
        self.decision = decision


class BackendError(DriverKitError, RuntimeError):
    """The backend failed a command or returned something unreadable."""


class BackendUnavailable(BackendError):
    """The backend cannot be read; stats fail closed."""


class BackendTimeout(BackendError, TimeoutError):
    """A backend command did not finish within its timeout."""


class SetupError(BackendError):
    """The backend is not usable as configured; the message says what to fix."""


class CoordinationError(BackendError):
    """The cross-host coordination service cannot grant or keep an admission lock."""
