"""A sparse-file pool: the template a vendor copies to write a driver_kit driver.

Volumes are sparse files ``<sparse_pool_dir>/<name>.img``, snapshots sparse copies
in ``<sparse_pool_dir>/.snapshots/``. Thin only: the apparent size of a file is
the volume's virtual size; only written blocks take space.

A driver writes two things. ``backend_read_pools`` returns *facts* in integer
bytes read from the backend itself, every time: total and free from the file
system, provisioned = the apparent sizes of *every* ``*.img`` (also files someone
else put there), snapshots apart. And create / delete / extend / find (snapshots
optional), raising the kit's errors. The kit does the rest: a compliant report
(the pool down when the facts cannot be read), validated names and sizes, and
admission of every create, extend and snapshot under a per-pool lock.

Certify it with ``driver-kit check --config-file pool.conf`` (a backend section
with ``volume_driver = contrib.sparse_file_driver:SparseFileDriver`` and
``sparse_pool_dir``); ``COMPLIANCE_HOOKS`` at the end is found on its own. A
volume's file is its device path (``backend_device_path``), so Cinder's adapter
copies images to and from it.
"""

from __future__ import annotations

import errno
import os
import time
import types

import psutil
from oslo_config import cfg

from driver_kit import (AlreadyExists, BackendError, BackendUnavailable, ConfigError, GiB,
                        InvalidName, PoolFacts, SnapshotNotFound, VolumeDriver, VolumeInfo,
                        VolumeNotFound)
from driver_kit.compliance import BackendTruth, ComplianceHooks, PoolTruth, VolumeTruth

POOL = "sparse"


class SparseFileDriver(VolumeDriver):
    """One thin pool of sparse files in a directory."""

    VENDOR_NAME = "driver_kit contrib"
    DRIVER_VERSION = "1.0.0"
    STORAGE_PROTOCOL = "file"
    OPTIONS = (cfg.StrOpt("sparse_pool_dir",
                          help="Directory holding the volumes (*.img sparse files)."),)

    @property
    def pool_dir(self) -> str:
        path = self.configuration.get("sparse_pool_dir")
        if not path:
            raise ConfigError(f"[{self.configuration.backend}] sparse_pool_dir is required")
        return path

    def path(self, name: str, *, snapshot: bool = False) -> str:
        """Where volume (or snapshot) ``name`` lives."""
        return os.path.join(self.pool_dir, ".snapshots" if snapshot else "", name + ".img")

    def do_setup(self) -> None:
        os.makedirs(os.path.join(self.pool_dir, ".snapshots"), exist_ok=True)

    def check_for_setup_error(self) -> None:
        if not os.access(self.pool_dir, os.W_OK):
            raise BackendUnavailable(f"{self.pool_dir} is not a writable directory")

    def validate_name(self, name: object) -> str:
        name = super().validate_name(name)
        if name.startswith("."):  # hidden names are the driver's own (.snapshots)
            raise InvalidName(f"invalid volume name {name!r}: it may not start with '.'")
        return name

    # ------------------------------------------------------------------ facts
    def backend_read_pools(self) -> list[PoolFacts]:
        try:
            usage = psutil.disk_usage(self.pool_dir)
            volumes = _images(self.pool_dir)
            snapshots = _images(os.path.join(self.pool_dir, ".snapshots"))
        except OSError as exc:
            raise BackendUnavailable(f"cannot read {self.pool_dir}: {exc}") from exc
        return [PoolFacts(
            pool_name=POOL, total_bytes=usage.total, free_bytes=usage.free,
            provisioned_bytes=sum(s.st_size for s in volumes),
            snapshot_bytes=sum(s.st_size for s in snapshots),
            used_bytes=sum(s.st_blocks * 512 for s in volumes + snapshots),
            thin_provisioning_support=True, thick_provisioning_support=False,
            total_volumes=len(volumes), location_info=f"sparse_file:{self.pool_dir}")]

    def _find(self, name: str, snapshot: bool) -> VolumeInfo | None:
        try:
            size = os.stat(self.path(name, snapshot=snapshot)).st_size
        except FileNotFoundError:
            return None
        return VolumeInfo(name=name, size_gb=-(-size // GiB), pool_name=POOL, thin=True)

    def backend_find_volume(self, name: str) -> VolumeInfo | None:
        return self._find(name, snapshot=False)

    def backend_find_snapshot(self, name: str) -> VolumeInfo | None:
        return self._find(name, snapshot=True)

    def backend_device_path(self, name: str) -> str:
        """The volume's file: image copies read and write it; iSCSI targets that take
        files (tgtadm) export it, LIO's block backstore does not."""
        path = self.path(name)
        if not os.path.isfile(path):
            raise VolumeNotFound(f"no volume {name!r}")
        return path

    # ------------------------------------------------------------ operations
    def backend_create_volume(self, name: str, size_gb: int, *, pool_name: str,
                              thin: bool) -> None:
        path = self.path(name)
        try:
            with open(path, "xb"):
                pass
        except FileExistsError:
            raise AlreadyExists(f"volume {name!r} already exists") from None
        try:
            os.truncate(path, size_gb * GiB)
        except OSError as exc:
            os.remove(path)  # a failed create leaves nothing behind
            raise BackendError(f"cannot create volume {name}: {exc}") from exc

    def backend_delete_volume(self, name: str) -> None:
        try:
            os.remove(self.path(name))
        except FileNotFoundError:
            raise VolumeNotFound(f"no volume {name!r}") from None

    def backend_extend_volume(self, name: str, new_size_gb: int) -> None:
        try:
            os.truncate(self.path(name), new_size_gb * GiB)
        except OSError as exc:
            raise BackendError(f"cannot extend volume {name}: {exc}") from exc

    def backend_create_snapshot(self, name: str, volume: VolumeInfo) -> None:
        target = self.path(name, snapshot=True)
        try:
            _sparse_copy(self.path(volume.name), target)
        except FileExistsError:
            raise AlreadyExists(f"snapshot {name!r} already exists") from None
        except OSError as exc:
            if os.path.exists(target):
                os.remove(target)  # a failed snapshot leaves nothing behind
            raise BackendError(f"cannot snapshot volume {volume.name}: {exc}") from exc

    def backend_delete_snapshot(self, name: str) -> None:
        try:
            os.remove(self.path(name, snapshot=True))
        except FileNotFoundError:
            raise SnapshotNotFound(f"no snapshot {name!r}") from None


def _images(directory: str) -> list[os.stat_result]:
    with os.scandir(directory) as entries:
        return [e.stat() for e in entries if e.is_file() and e.name.endswith(".img")]


def _sparse_copy(source: str, target: str) -> None:
    """Copy only the data extents of ``source``: its holes stay holes in ``target``."""
    with open(source, "rb") as src, open(target, "xb") as dst:
        dst.truncate(os.fstat(src.fileno()).st_size)
        offset = 0
        while True:
            try:
                offset = os.lseek(src.fileno(), offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # nothing but a hole up to the end
                    return
                raise
            end = os.lseek(src.fileno(), offset, os.SEEK_HOLE)
            while offset < end:
                copied = os.copy_file_range(src.fileno(), dst.fileno(), end - offset,
                                            offset, offset)
                if not copied:
                    raise OSError(errno.EIO, f"{source} shrank during the copy")
                offset += copied


# Hooks for driver_kit.compliance: the directory as the file system shows it, files put
# there, grown and written by someone else, and a directory that goes away, turns into a
# file (its listing fails while its file system still answers), answers slowly or fails
# a write.
_FILE_SYSTEM = os


def _read_truth(driver: SparseFileDriver) -> BackendTruth:
    usage = psutil.disk_usage(driver.pool_dir)
    images = _sizes(driver.pool_dir)
    volumes = [VolumeTruth(name=name, pool_name=POOL, size_bytes=size, thin=True)
               for name, size, _ in images]
    # the file system does not record a snapshot's origin
    snapshots = _sizes(os.path.join(driver.pool_dir, ".snapshots"))
    volumes += [VolumeTruth(name=name, pool_name=POOL, size_bytes=size, thin=True,
                            snapshot_of="") for name, size, _ in snapshots]
    # the pool uses the blocks its images hold; the file system's free space is its free
    return BackendTruth(pools=(PoolTruth(
        pool_name=POOL, capacity_bytes=usage.total, free_bytes=usage.free,
        used_bytes=sum(blocks for _, _, blocks in images + snapshots)),),
        volumes=tuple(volumes))


def _sizes(directory: str) -> list[tuple[str, int, int]]:
    """(name, apparent size, bytes of its blocks) of each image in ``directory``."""
    with os.scandir(directory) as entries:
        return [(e.name[:-4], e.stat().st_size, e.stat().st_blocks * 512) for e in entries
                if e.is_file() and e.name.endswith(".img")]


def _create_out_of_band(driver: SparseFileDriver, name: str, size_gb: int,
                        pool_name: str) -> None:
    with open(driver.path(name), "xb") as image:
        image.truncate(size_gb * GiB)


def _unplug(driver: SparseFileDriver, replacement: str | None = None) -> None:
    os.rename(driver.pool_dir, driver.pool_dir + ".unplugged")
    if replacement == "file":
        open(driver.pool_dir, "xb").close()


def _slow(driver: SparseFileDriver, delay_s: float) -> None:
    """A file system that answers late: every read of this driver waits ``delay_s``."""
    read = driver.backend_read_pools
    driver.backend_read_pools = (  # type: ignore[method-assign]
        lambda: time.sleep(delay_s) or read())


def _fail_next_write(driver: SparseFileDriver) -> None:
    """A full file system: the driver's next truncate, seek for data or copy (whichever
    comes first, once it has begun its create, extend or snapshot) fails with ENOSPC."""
    def failing(*args: object) -> None:
        globals()["os"] = _FILE_SYSTEM
        raise OSError(errno.ENOSPC, "No space left on device")
    globals()["os"] = types.SimpleNamespace(**{
        **{name: getattr(_FILE_SYSTEM, name) for name in dir(_FILE_SYSTEM)},
        "truncate": failing, "lseek": failing, "copy_file_range": failing})


def _write_data(driver: SparseFileDriver, name: str, offset_bytes: int, data: bytes) -> None:
    with open(driver.path(name), "r+b") as image:
        image.seek(offset_bytes)
        image.write(data)


def _read_data(driver: SparseFileDriver, name: str, offset_bytes: int, length: int) -> bytes:
    path = driver.path(name)
    with open(path if os.path.exists(path) else driver.path(name, snapshot=True),
              "rb") as image:
        image.seek(offset_bytes)
        return image.read(length)


def _stray(driver: SparseFileDriver, name: str) -> str:
    """Another application's file in the pool directory: not an image."""
    return os.path.join(driver.pool_dir, name + ".part")


def _create_stray(driver: SparseFileDriver, name: str, pool_name: str) -> None:
    with open(_stray(driver, name), "xb") as stray:
        stray.truncate(GiB)


def _replug(driver: SparseFileDriver) -> None:
    globals()["os"] = _FILE_SYSTEM
    vars(driver).pop("backend_read_pools", None)
    if os.path.exists(driver.pool_dir + ".unplugged"):
        if os.path.isfile(driver.pool_dir):
            os.remove(driver.pool_dir)
        os.rename(driver.pool_dir + ".unplugged", driver.pool_dir)


COMPLIANCE_HOOKS = ComplianceHooks(
    read_truth=_read_truth, create_out_of_band=_create_out_of_band,
    resize_out_of_band=lambda driver, name, size_gb: os.truncate(driver.path(name),
                                                                 round(size_gb * GiB)),
    delete_out_of_band=lambda driver, name: os.remove(driver.path(name)),
    break_backend=_unplug, break_listing=lambda driver: _unplug(driver, "file"),
    slow_backend=_slow, repair_backend=_replug, fail_next_write=_fail_next_write,
    write_data=_write_data, read_data=_read_data, create_stray=_create_stray,
    delete_stray=lambda driver, name: os.remove(_stray(driver, name)))
