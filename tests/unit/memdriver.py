"""A vendor author's minimal driver: in-memory, about 30 lines, nothing but hooks."""

from driver_kit import (AlreadyExists, GiB, PoolFacts, VolumeDriver, VolumeInfo,
                        VolumeNotFound)


class MemoryDriver(VolumeDriver):
    """One thin pool of ``total_gb`` GiB held in a dict; writes use no space."""

    def __init__(self, configuration=None, *, total_gb=100, **kwargs):
        super().__init__(configuration, **kwargs)
        self.total_bytes = total_gb * GiB
        self.volumes: dict[str, int] = {}
        self.broken = False

    def backend_read_pools(self):
        if self.broken:
            raise OSError("array unreachable")
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
