"""Optional extras built only on driver_kit's public API (see contrib/README.md)."""
