"""Compliance hooks read from LVM itself: the driver's own and those for Cinder's
LVM driver, for ``driver-kit check``."""
