"""Compliance hooks for Cinder's own LVM driver (``cinder.volume.drivers.lvm``, thin),
judged through ``driver-kit check --cinder-driver``: the truth is the volume group's
report read by this project's LVM reader, never Cinder's code.

    driver-kit check --cinder-driver cinder.volume.drivers.lvm.LVMVolumeDriver \\
        --cinder-config /etc/cinder/cinder.conf --backend lvm \\
        --hooks lvm_driver.compliance.cinder_hooks:COMPLIANCE_HOOKS

Each hook gets the harness's ``CinderDriver``; the volume group and thin pool are
those Cinder's driver uses (``volume_group``, and ``<volume_group>-pool``, the pool
its ``check_for_setup_error`` makes), the pool name the one it reports
(``volume_backend_name``).
"""

from __future__ import annotations

from typing import Any, Callable

from driver_kit import GiB
from driver_kit.compliance import BackendTruth, ComplianceHooks, PoolTruth, VolumeTruth
from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.policy.pool_facts import thin_pool_usage
from lvm_driver.run.executor import LVMExecutor

__all__ = ["COMPLIANCE_HOOKS", "cinder_lvm_hooks"]

#: the names Cinder gives snapshots' LVs (snapshot_name_template, then escaped by the
#: driver's _escape_snapshot, as LVM reserves names starting with "snapshot")
_SNAPSHOT_PREFIXES = ("_snapshot-", "snapshot-")


def _where(driver: Any) -> tuple[str, str, str]:
    """(volume group, thin pool LV, reported pool name) of Cinder's LVM driver."""
    cinder = driver.cinder_driver
    vg_name = cinder.configuration.volume_group
    return vg_name, f"{vg_name}-pool", cinder.backend_name


def cinder_lvm_hooks(executor: Callable[[], LVMExecutor] = LVMExecutor) -> ComplianceHooks:
    """The hooks, running LVM through ``executor()`` (real LVM by default)."""

    def vg(driver: Any) -> VolumeGroup:
        return VolumeGroup(_where(driver)[0], executor=executor())

    def read_truth(driver: Any) -> BackendTruth:
        vg_name, pool_lv, pool_name = _where(driver)
        report = vg(driver).report()
        pool = report.find_lv(pool_lv)
        if pool is None or pool.data_percent is None or pool.metadata_percent is None:
            return BackendTruth(pools=())
        used, free = thin_pool_usage(pool.size_bytes, pool.data_percent,
                                     pool.metadata_percent)
        volumes = []
        for lv in report.thin_volumes(pool_lv):
            snapshot = lv.name.startswith(_SNAPSHOT_PREFIXES)
            volumes.append(VolumeTruth(
                name=driver.check_name(lv.name), pool_name=pool_name,
                size_bytes=lv.size_bytes, thin=True,
                snapshot_of=(driver.check_name(lv.origin) if lv.origin else "")
                if snapshot else None))
        return BackendTruth(
            pools=(PoolTruth(pool_name=pool_name, capacity_bytes=pool.size_bytes,
                             used_bytes=used, free_bytes=free,
                             allocation_unit_bytes=report.extent_size_bytes),),
            volumes=tuple(volumes))

    def create_out_of_band(driver: Any, name: str, size_gb: int, pool_name: str) -> None:
        vg(driver).create_thin_volume(name, size_gb * GiB, pool=_where(driver)[1])

    # a volume made out of band is renamed when Cinder manages it (manage_existing)
    def resize_out_of_band(driver: Any, name: str, new_size_gb: float) -> None:
        vg(driver).extend(driver.cinder_name(name), round(new_size_gb * GiB))

    def delete_out_of_band(driver: Any, name: str) -> None:
        vg(driver).delete(driver.cinder_name(name))

    return ComplianceHooks(read_truth=read_truth, create_out_of_band=create_out_of_band,
                           resize_out_of_band=resize_out_of_band,
                           delete_out_of_band=delete_out_of_band)


#: the hooks on real LVM (as root, as the harness runs on a Cinder LVM host)
COMPLIANCE_HOOKS = cinder_lvm_hooks()
