"""driver_kit: a storage-driver toolkit whose stats are compliant by construction.

Subclass ``VolumeDriver``, implement its ``backend_*`` hooks, and get a
Cinder-shaped ``get_volume_stats()`` report that follows Cinder's
thin-provisioning specs plus over-subscription enforcement on every create,
extend, snapshot and clone.
"""

from driver_kit.capacity import (AdmissionCheck, AdmissionDecision, admit,
                                 max_admissible,
                                 calculate_capacity_factors,
                                 calculate_max_over_subscription_ratio,
                                 calculate_virtual_free_capacity)
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

__all__ = [
    "AdmissionCheck", "AdmissionDecision", "AlreadyExists", "BackendConfig", "BackendError",
    "BackendStats", "BackendTimeout", "BackendUnavailable", "CapacityExceeded", "ConfigError",
    "DriverKitError", "GiB", "InvalidInput", "InvalidName", "InvalidSize", "InvalidStats",
    "ListsVolumes", "MiB", "NotFound", "NotManaged", "PoolFacts", "PoolNotFound", "PoolStats", "SetupError", "SnapshotNotFound",
    "Violation", "VolumeBusy", "VolumeDriver", "VolumeInfo", "VolumeNotFound", "VolumeRecord", "admit",
    "calculate_capacity_factors", "calculate_max_over_subscription_ratio",
    "calculate_virtual_free_capacity", "list_opts", "load_backend_config", "log_notifier",
    "make_conf", "max_admissible", "validate_size_gb", "validate_stats",
]

__version__ = "0.1.0"
