"""A real LVM volume group on a loop-backed sparse file, isolated from the host's LVM.

``RealVG`` makes a work directory with its own ``lvm.conf`` (``LVM_SYSTEM_DIR``):
a device filter that accepts only the benchmark's loop device, no devices file,
no hints, no udev, no backups or archives, its own locking directory. So the
host's LVM never sees the benchmark's VG and the benchmark never touches the
host's. ``restore()`` writes generated metadata (``vgmeta``) onto the PV with
``pvcreate --uuid --restorefile`` and ``vgcfgrestore --force``; ``close()``
detaches the loop device and removes the files, also after a failure.
Needs root (losetup, pvcreate).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from lvm_driver.run.executor import LVMExecutor
from tests.benchmarks import vgmeta

GiB = 1024 ** 3

_LVM_CONF = """\
# lvm.conf of the driver-kit benchmark: sees only {device}
devices {{
    filter = [ "a|^{device}$|", "r|.*|" ]
    global_filter = [ "a|^{device}$|", "r|.*|" ]
    use_devicesfile = 0
    obtain_device_list_from_udev = 0
    external_device_info_source = "none"
    hints = "none"
}}
global {{
{aio}    locking_dir = "{workdir}/lock"
    event_activation = 0
}}
activation {{
    udev_sync = 0
    udev_rules = 0
    monitoring = 0
}}
backup {{
    backup = 0
    archive = 0
    backup_dir = "{workdir}/backup"
    archive_dir = "{workdir}/archive"
}}
"""


class BenchmarkSetupError(RuntimeError):
    """The machine cannot host the benchmark's volume group (not root, no LVM...)."""


def _run(argv: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BenchmarkSetupError(
            f"`{' '.join(argv)}` failed with exit code {proc.returncode}: "
            f"{proc.stderr.strip()[-800:]}")
    return proc.stdout


class RealVG:
    """A loop device with one VG whose metadata the benchmark writes itself."""

    def __init__(self, vg_name: str = "dkbenchvg", *, dev_size_bytes: int = 4096 * GiB,
                 metadata_area_bytes: int = 64 * 1024 ** 2):
        if os.geteuid() != 0:
            raise BenchmarkSetupError(
                "the benchmark builds a real LVM volume group on a loop device: run it "
                "as root (sudo bash tests/benchmarks/run.sh)")
        for tool in ("losetup", "pvcreate", "vgcfgrestore", "lvs"):
            if shutil.which(tool) is None:
                raise BenchmarkSetupError(f"{tool} not found: install lvm2 and util-linux")
        self.vg_name = vg_name
        self.dev_size_bytes = dev_size_bytes
        self.metadata_area_bytes = metadata_area_bytes
        self.workdir = Path(tempfile.mkdtemp(prefix="driver-kit-bench-"))
        self.image = self.workdir / "pv.img"
        self.conf_dir = self.workdir / "lvm"
        #: the same lvm.conf with ``global/use_aio = 0`` (see lvm_conf_without_aio)
        self.conf_dir_without_aio = self.workdir / "lvm-noaio"
        self.device: str | None = None
        self._seqno = 0

    # -- lifecycle ---------------------------------------------------------------------
    def open(self) -> "RealVG":
        for sub in ("lock", "backup", "archive", "lvm", "lvm-noaio"):
            (self.workdir / sub).mkdir(exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.dev_size_bytes)  # sparse: only metadata is ever written
        self.device = _run(["losetup", "--find", "--show", str(self.image)],
                           dict(os.environ)).strip()
        (self.conf_dir / "lvm.conf").write_text(
            _LVM_CONF.format(device=self.device, workdir=self.workdir, aio=""))
        (self.conf_dir_without_aio / "lvm.conf").write_text(
            _LVM_CONF.format(device=self.device, workdir=self.workdir,
                             aio="    use_aio = 0\n"))
        return self

    def close(self) -> None:
        """Detach the loop device and remove the work files (idempotent)."""
        if self.device is not None:
            subprocess.run(["losetup", "-d", self.device], check=False,
                           capture_output=True)
            self.device = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "RealVG":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- use ---------------------------------------------------------------------------
    @property
    def lvm_conf(self) -> str:
        return str(self.conf_dir / "lvm.conf")

    @property
    def lvm_conf_without_aio(self) -> str:
        """lvm.conf with synchronous I/O: no AIO context to tear down at exit.

        LVM sets up an AIO context in every command and destroys it at exit;
        ``io_destroy`` waits for an RCU grace period, 28 to 35 ms on this
        kernel (``strace -T``). The setting only works from lvm.conf: a
        ``--config global/use_aio=0`` comes after the context is made.
        """
        return str(self.conf_dir_without_aio / "lvm.conf")

    def env(self) -> dict[str, str]:
        """The environment every LVM command of the benchmark runs with: the driver's."""
        executor = LVMExecutor(lvm_system_dir=str(self.conf_dir))
        return {**os.environ, **executor.environment()}

    def restore(self, lv_count: int, *, pool_name: str = "pool") -> vgmeta.VGLayout:
        """Make the VG a thin pool with ``lv_count`` thin LVs (replacing what was there)."""
        assert self.device is not None, "open() first"
        self._seqno += 1
        layout = vgmeta.plan_vg(vg_name=self.vg_name, device=self.device,
                                dev_size_bytes=self.dev_size_bytes, lv_count=lv_count,
                                pool_name=pool_name,
                                metadata_area_bytes=self.metadata_area_bytes,
                                seqno=self._seqno)
        meta = self.workdir / f"{self.vg_name}-{lv_count}.vg"
        meta.write_text(vgmeta.metadata_text(layout))
        env = self.env()
        # A fresh label and metadata area each time, so earlier, larger copies go.
        subprocess.run(["wipefs", "--all", "--quiet", self.device], env=env,
                       capture_output=True, check=False)
        _run(["pvcreate", "--yes", "--force", "--force", "--uuid", layout.pv_uuid,
              "--restorefile", str(meta), "--metadatasize",
              f"{layout.metadata_area_bytes // 1024}k", self.device], env)
        _run(["vgcfgrestore", "--force", "--file", str(meta), self.vg_name], env)
        rows = _run(["lvs", "--noheadings", "-o", "lv_name", self.vg_name], env).split()
        if len(rows) != lv_count + 1:
            raise BenchmarkSetupError(
                f"restored VG shows {len(rows)} LVs, expected {lv_count} thin LVs and a pool")
        return layout
