"""A vendor's driver defined in its own module, subclassing the contrib sparse-file
driver: the harness must find the hooks its base ships."""

from contrib.sparse_file_driver import SparseFileDriver


class VendorSparseDriver(SparseFileDriver):
    """The sparse-file driver under a vendor's name."""

    VENDOR_NAME = "A vendor"
