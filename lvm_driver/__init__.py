"""LVM thin-pool driver: a reference driver built on driver_kit's public API."""
