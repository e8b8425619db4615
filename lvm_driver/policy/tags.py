"""The tags by which the LVM driver knows what it owns (see ``lvm_driver.driver``)."""

import re
from typing import Final

__all__ = ["VOLUME_TAG", "SNAPSHOT_TAG", "REQUEST_TAG_PREFIX", "is_driver_tag"]

#: tag on every volume the driver creates or adopts (tells clones from snapshots)
VOLUME_TAG: Final = "driver_kit_volume"
#: tag on every snapshot the driver creates or adopts
SNAPSHOT_TAG: Final = "driver_kit_snapshot"
#: prefix of the marker tag each create puts on its LV, unique to that request, so a
#: clean-up after a failure removes only what that very request made
REQUEST_TAG_PREFIX: Final = "driver_kit_request_"
_DRIVER_TAG: Final = re.compile(
    rf"{VOLUME_TAG}|{SNAPSHOT_TAG}|{REQUEST_TAG_PREFIX}[0-9a-f]{{32}}")


def is_driver_tag(tag: str) -> bool:
    """Whether ``tag`` is one the driver puts on its LVs (a marker: 32 hex digits)."""
    return _DRIVER_TAG.fullmatch(tag) is not None
