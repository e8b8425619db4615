"""dm_status on real device-mapper (VM lane): the pool's usage read by two ioctls is
what ``lvs`` prints for data% and metadata%, and what ``dmsetup status`` shows.

Run inside the VM: tests/realvm/run_in_vm.sh -- .venv/bin/python -m pytest
tests/functional/test_dm_status_realvm.py -m realvm
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from lvm_driver.read.dm_status import ThinPoolStatus, dm_name, thin_pool_status

pytestmark = pytest.mark.realvm
MiB = 1024 * 1024


def run(*argv: str) -> str:
    proc = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, check=False)
    assert proc.returncode == 0, f"{argv}: {proc.stderr.strip()}"
    return proc.stdout


class Pool:
    """A thin pool on a real VG, checked against lvs and dmsetup."""

    def __init__(self, vg: str, name: str, size: str, *extra: str):
        self.vg, self.name = vg, name
        run("lvcreate", "-q", "-T", "-L", size, *extra, f"{vg}/{name}")

    def thin(self, lv: str, size: str = "256m") -> None:
        run("lvcreate", "-q", "-T", "-V", size, "-n", lv, f"{self.vg}/{self.name}")

    def write(self, lv: str, nbytes: int) -> None:
        with open(f"/dev/{self.vg}/{lv}", "r+b", buffering=0) as device:
            block = os.urandom(MiB)
            for _ in range(nbytes // MiB):
                device.write(block)
            os.fsync(device.fileno())
        time.sleep(2)  # dm-thin commits its metadata about once a second

    def lvs(self, *fields: str) -> list[str]:
        out = run("lvs", "--noheadings", "--nosuffix", "--units", "b", "-o", ",".join(fields),
                  f"{self.vg}/{self.name}")
        return out.split()

    def dm_device(self) -> str:
        names = run("dmsetup", "ls").split()
        layered = dm_name(self.vg, self.name, "tpool")
        return layered if layered in names else dm_name(self.vg, self.name)

    def check(self) -> ThinPoolStatus:
        """thin_pool_status() agrees with lvs and with dmsetup (no flush, as lvs reads)."""
        status = thin_pool_status(self.vg, self.name)
        assert status is not None
        data, meta, chunk, transaction = self.lvs(
            "data_percent", "metadata_percent", "chunk_size", "transaction_id")
        assert (status.data_percent, status.metadata_percent) == (float(data), float(meta))
        assert status.data_block_bytes == int(chunk)
        assert status.transaction_id == int(transaction)
        device = self.dm_device()
        words = run("dmsetup", "status", "--noflush", device).split()
        assert words[2] == "thin-pool"
        used_meta, total_meta = (int(n) for n in words[4].split("/"))
        used_data, total_data = (int(n) for n in words[5].split("/"))
        assert (status.used_metadata_blocks, status.total_metadata_blocks,
                status.used_data_blocks, status.total_data_blocks) == (
                    used_meta, total_meta, used_data, total_data)
        assert status.mode == words[7] and not status.needs_check
        table = run("dmsetup", "table", device).split()
        assert status.data_block_bytes == int(table[5]) * 512
        return status


@pytest.fixture
def vg() -> Iterator[str]:
    if os.environ.get("DK_REAL_LVM") != "1":
        pytest.fail("runs inside the VM lane: tests/realvm/run_in_vm.sh -- .venv/bin/python "
                    "-m pytest tests/functional/test_dm_status_realvm.py -m realvm")
    name = os.environ["DK_REAL_LVM_VG"]
    run("lvremove", "-q", "-f", "-y", name)
    yield name
    run("lvremove", "-q", "-f", "-y", name)


@pytest.fixture
def dashed_vg() -> Iterator[str]:
    """A second VG whose name holds '-', on its own sparse loop device in guest RAM."""
    scratch = Path(os.environ.get("DK_REALVM_GUEST_SCRATCH", "/tmp"))
    image = scratch / "dash-pv.img"
    image.write_bytes(b"")
    os.truncate(image, 1024 * MiB)
    loop = run("losetup", "--find", "--show", str(image)).strip()
    name = "dk-dash-vg"
    try:
        run("vgcreate", "-q", name, loop)
        yield name
    finally:
        subprocess.run(["vgremove", "-q", "-f", "-y", name], check=False)
        subprocess.run(["pvremove", "-q", "-y", loop], check=False)
        subprocess.run(["losetup", "-d", loop], check=False)
        image.unlink()


def test_an_empty_pool(vg):
    status = Pool(vg, "pool", "1g").check()
    assert status.used_data_blocks == 0 and status.data_percent == 0.0
    assert status.mode == "rw"


def test_a_pool_after_data_is_written(vg):
    pool = Pool(vg, "pool", "1g")
    pool.thin("vol1")
    before = pool.check()
    pool.write("vol1", 48 * MiB)
    after = pool.check()
    assert after.used_data_blocks * after.data_block_bytes >= 48 * MiB
    assert after.data_percent > before.data_percent


def test_a_pool_with_several_thin_volumes(vg):
    pool = Pool(vg, "pool", "1g")
    for index in range(5):
        pool.thin(f"vol{index}")
    for index in range(5):
        pool.write(f"vol{index}", (index + 1) * 8 * MiB)
    status = pool.check()
    assert status.used_data_blocks * status.data_block_bytes >= 120 * MiB
    assert status.transaction_id >= 5


def test_an_inactive_pool_is_none(vg):
    pool = Pool(vg, "pool", "1g")
    pool.thin("vol1")
    pool.check()
    run("vgchange", "-q", "-an", vg)
    assert thin_pool_status(vg, "pool") is None
    assert thin_pool_status(vg, "no-such-pool") is None


def test_names_with_dashes(dashed_vg):
    pool = Pool(dashed_vg, "thin-pool-1", "512m")
    pool.thin("a-volume", "128m")
    pool.write("a-volume", 24 * MiB)
    status = pool.check()
    assert status.used_data_blocks > 0


def test_a_full_pool_is_out_of_data_space(vg):
    pool = Pool(vg, "pool", "8m", "--errorwhenfull", "y")
    pool.thin("vol1", "64m")
    with pytest.raises(OSError):
        pool.write("vol1", 32 * MiB)
    status = thin_pool_status(vg, "pool")
    assert status is not None and status.mode == "out_of_data_space"
    assert status.used_data_blocks == status.total_data_blocks
    assert status.data_percent == float(pool.lvs("data_percent")[0]) == 100.0
