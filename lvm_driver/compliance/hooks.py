"""The LVM driver's compliance hooks: what ``driver-kit check`` needs to certify it
against LVM itself.

Every figure is read straight from LVM (a full read of the volume group of its
own, never through the driver's stats or its reused report); LVs are made,
resized and removed with plain LVM commands; and a volume group can be made to
vanish, fail to list or answer slowly.
"""

from __future__ import annotations

import time
from typing import Any

from driver_kit import GiB
from driver_kit.compliance import BackendTruth, ComplianceHooks, PoolTruth, VolumeTruth
from lvm_driver.commands.lvm import VGReport, VolumeGroup
from lvm_driver.policy.pool_facts import is_snapshot, thick_space, thin_pool_usage
from lvm_driver.run.executor import LVMError

#: the hooks take the ThinLVMDriver being certified (not imported: the driver module
#: imports this one)
ThinLVMDriver = Any

def _vg(driver: ThinLVMDriver) -> VolumeGroup:
    """The volume group itself, also while a hook has put a broken one in its place."""
    return getattr(driver, "_dk_healthy_vg", driver.vg)


def _read_truth(driver: ThinLVMDriver) -> BackendTruth:
    """The VG, its thin pool and every LV as LVM reports them, in bytes: read anew by a
    volume group of its own, never the driver's reused report."""
    vg = _vg(driver)
    report = VolumeGroup(vg.vg_name, executor=vg.executor).report()
    extent = report.extent_size_bytes
    pools, volumes = [], []
    pool = report.find_lv(driver.pool_name)
    if pool is not None and pool.data_percent is not None \
            and pool.metadata_percent is not None:
        total = pool.size_bytes
        used, free = thin_pool_usage(total, pool.data_percent, pool.metadata_percent)
        pools.append(PoolTruth(pool_name=driver.pool_name, capacity_bytes=total,
                               used_bytes=used, free_bytes=free, allocation_unit_bytes=extent))
        for lv in report.thin_volumes(driver.pool_name):
            # a snapshot whose origin was removed keeps the driver's snapshot tag
            origin = (lv.origin or "(origin removed)") if is_snapshot(lv) else None
            volumes.append(VolumeTruth(name=lv.name, pool_name=driver.pool_name,
                                       size_bytes=lv.size_bytes, thin=True,
                                       snapshot_of=origin))
    if driver.offer_thick:
        thick = report.thick_volumes()
        used = sum(thick_space(report))  # its thick volumes and COW snapshots' stores
        pools.append(PoolTruth(pool_name=driver.vg_name,
                               capacity_bytes=report.vg_free_bytes + used, used_bytes=used,
                               allocation_unit_bytes=extent))
        volumes += [VolumeTruth(name=lv.name, pool_name=driver.vg_name,
                                size_bytes=lv.size_bytes, thin=False) for lv in thick]
    return BackendTruth(pools=tuple(pools), volumes=tuple(volumes))


def _out_of_band(driver: ThinLVMDriver, name: str, size_gb: int, pool_name: str) -> None:
    """An operator's plain lvcreate (no driver tag) in the named pool."""
    if pool_name == driver.pool_name:
        _vg(driver).create_thin_volume(name, size_gb * GiB, pool=driver.pool_name)
    else:
        _vg(driver).create_thick_volume(name, size_gb * GiB)


class _Troubled:
    """A volume group whose reports fail or come late (what a hook puts in place)."""

    def __init__(self, vg: VolumeGroup, *, error: Exception | None = None,
                 delay_s: float = 0.0) -> None:
        self._vg, self._error, self._delay_s = vg, error, delay_s

    def report(self, **kwargs: Any) -> VGReport:
        time.sleep(self._delay_s)
        if self._error is not None:
            raise self._error
        return self._vg.report(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._vg, name)


def _trouble(driver: ThinLVMDriver, vg: Any) -> None:
    driver._dk_healthy_vg = _vg(driver)  # type: ignore[attr-defined]
    driver.vg = vg


def _repair(driver: ThinLVMDriver) -> None:
    driver.vg = _vg(driver)


#: what ``driver-kit check`` uses to certify the driver against LVM itself
COMPLIANCE_HOOKS = ComplianceHooks(
    read_truth=_read_truth, create_out_of_band=_out_of_band,
    resize_out_of_band=lambda driver, name, size_gb: _vg(driver).extend(
        name, round(size_gb * GiB)),
    delete_out_of_band=lambda driver, name: _vg(driver).delete(name),
    # a VG that does not exist
    break_backend=lambda driver: _trouble(driver, VolumeGroup(
        "dk-vg-gone", executor=driver.executor)),
    # the one lvs that lists the VG's LVs failing
    break_listing=lambda driver: _trouble(driver, _Troubled(_vg(driver), error=LVMError(
        "lvs failed: cannot list the logical volumes"))),
    slow_backend=lambda driver, delay_s: _trouble(driver, _Troubled(_vg(driver),
                                                                    delay_s=delay_s)),
    repair_backend=_repair,
    # LVM processes, commands through the read session's lvm shell, and reads that
    # reused the report (each read the PVs' headers and the pool's device-mapper status)
    backend_calls=lambda driver: driver.executor.commands_run
    + driver.executor.shell_commands_run + _vg(driver).report_cache_stats.hits)
