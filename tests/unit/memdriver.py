"""A vendor author's minimal driver: in-memory, nothing but hooks, plus the compliance
hooks that let the harness certify it."""

import math
import time

from driver_kit import (AlreadyExists, GiB, PoolFacts, VolumeDriver, VolumeInfo,
                        VolumeNotFound)
from driver_kit.compliance import BackendTruth, ComplianceHooks, PoolTruth, VolumeTruth


class MemoryDriver(VolumeDriver):
    """One thin pool of ``total_gb`` GiB held in a dict; writes use no space."""

    def __init__(self, configuration=None, *, total_gb=100, **kwargs):
        super().__init__(configuration, **kwargs)
        self.total_bytes = total_gb * GiB
        self.volumes: dict[str, int] = {}
        self.broken = self.listing_broken = False
        self.delay_s = 0.0
        self.reads = 0

    def backend_read_pools(self):
        self.reads += 1
        time.sleep(self.delay_s)
        if self.broken or self.listing_broken:
            raise (ConnectionError("array unreachable") if self.broken
                   else OSError("volume listing failed"))
        return [PoolFacts(pool_name="mem", total_bytes=self.total_bytes,
                          free_bytes=self.total_bytes,
                          provisioned_bytes=sum(self.volumes.values()) * GiB,
                          thin_provisioning_support=True, thick_provisioning_support=False,
                          total_volumes=len(self.volumes))]

    def backend_find_volume(self, name):
        if name not in self.volumes:
            return None
        return VolumeInfo(name=name, size_gb=self.volumes[name], pool_name="mem", thin=True)

    def backend_create_volume(self, name, size_gb, *, pool_name, thin):
        if name in self.volumes:
            raise AlreadyExists(name)
        self.volumes[name] = size_gb

    def backend_delete_volume(self, name):
        if self.volumes.pop(name, None) is None:
            raise VolumeNotFound(name)

    def backend_extend_volume(self, name, new_size_gb):
        self.volumes[name] = new_size_gb


def read_truth(driver):
    """The array's own view: its capacity and every volume in its dict."""
    return BackendTruth(
        pools=(PoolTruth(pool_name="mem", capacity_bytes=driver.total_bytes, used_bytes=0),),
        volumes=tuple(VolumeTruth(name=name, pool_name="mem", size_bytes=size * GiB, thin=True)
                      for name, size in driver.volumes.items()))


def _repair(driver):
    driver.broken = driver.listing_broken = False
    driver.delay_s = 0.0


COMPLIANCE_HOOKS = ComplianceHooks(
    read_truth=read_truth,
    create_out_of_band=lambda driver, name, size_gb, pool_name:
        driver.volumes.__setitem__(name, size_gb),
    # the array sizes volumes in whole GiB: a fractional size is rounded up
    resize_out_of_band=lambda driver, name, size_gb: driver.volumes.__setitem__(
        name, math.ceil(size_gb)),
    delete_out_of_band=lambda driver, name: driver.volumes.pop(name),
    break_backend=lambda driver: setattr(driver, "broken", True),
    break_listing=lambda driver: setattr(driver, "listing_broken", True),
    slow_backend=lambda driver, delay_s: setattr(driver, "delay_s", delay_s),
    repair_backend=_repair,
    backend_calls=lambda driver: driver.reads)
