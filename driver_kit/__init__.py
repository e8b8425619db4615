"""driver_kit: a storage-driver toolkit whose stats are compliant by construction.

Subclass ``VolumeDriver``, implement its ``backend_*`` hooks, and get a
Cinder-shaped ``get_volume_stats()`` report that follows Cinder's
thin-provisioning specs plus over-subscription enforcement on every create,
extend, snapshot and clone.

Each name below is imported on first use, so ``driver-kit`` handles Ctrl-C
before its heavy imports (oslo.config) start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees; at run time _HOMES serves the same names
    from driver_kit.capacity import (AdmissionCheck, AdmissionDecision, admit,
                                     calculate_capacity_factors,
                                     calculate_max_over_subscription_ratio,
                                     calculate_virtual_free_capacity, max_admissible)
    from driver_kit.config import BackendConfig, list_opts, load_backend_config, make_conf
    from driver_kit.driver import VolumeDriver, VolumeInfo, log_notifier, validate_size_gb
    from driver_kit.exceptions import (AlreadyExists, BackendError, BackendTimeout,
                                       BackendUnavailable, CapacityExceeded, ConfigError,
                                       DriverKitError, InvalidInput, InvalidName, InvalidSize,
                                       InvalidStats, NotFound, NotManaged, PoolNotFound,
                                       SetupError, SnapshotNotFound, VolumeBusy, VolumeNotFound)
    from driver_kit.listing import ListsVolumes, VolumeRecord
    from driver_kit.stats import BackendStats, PoolFacts, PoolStats, Violation, validate_stats
    from driver_kit.units import GiB, MiB

#: each public name and the module it comes from
_HOMES: dict[str, str] = {
    name: f"driver_kit.{module}" for module, names in {
        "capacity": ("AdmissionCheck", "AdmissionDecision", "admit", "max_admissible",
                     "calculate_capacity_factors", "calculate_max_over_subscription_ratio",
                     "calculate_virtual_free_capacity"),
        "config": ("BackendConfig", "list_opts", "load_backend_config", "make_conf"),
        "driver": ("VolumeDriver", "VolumeInfo", "log_notifier", "validate_size_gb"),
        "exceptions": ("AlreadyExists", "BackendError", "BackendTimeout", "BackendUnavailable",
                       "CapacityExceeded", "ConfigError", "DriverKitError", "InvalidInput",
                       "InvalidName", "InvalidSize", "InvalidStats", "NotFound", "NotManaged",
                       "PoolNotFound", "SetupError", "SnapshotNotFound", "VolumeBusy",
                       "VolumeNotFound"),
        "listing": ("ListsVolumes", "VolumeRecord"),
        "stats": ("BackendStats", "PoolFacts", "PoolStats", "Violation", "validate_stats"),
        "units": ("GiB", "MiB"),
    }.items() for name in names
}

__all__ = sorted(_HOMES)

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
