"""Shared pieces of the ecosystem tests: simulator backends, and Cinder run apart.

Cinder never runs inside the pytest process (see cinder_side.py for why): a
test writes a cinder.conf, runs ``cinder_side.py`` with this interpreter and
reads its answer. Without Cinder installed those tests are skipped with the
reason, except under CI=true, where tools/run-tests.sh installs the
``cinder`` extra and a missing Cinder is a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from driver_kit.loading import load_driver
from driver_kit.driver import VolumeDriver

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
IN_CI = os.environ.get("CI") == "true"


def _cinder_installed() -> bool:
    try:
        return importlib.util.find_spec("cinder") is not None
    except (ImportError, ValueError):  # blocked or broken: not usable either way
        return False


CINDER_INSTALLED = _cinder_installed()
NO_CINDER = ("Cinder is not installed (the optional extra): "
             "pip install -e '.[test,cinder]', as tools/run-tests.sh does")

#: skips without Cinder, but never where CI runs (it must run there)
requires_cinder = pytest.mark.skipif(not CINDER_INSTALLED and not IN_CI, reason=NO_CINDER)


@dataclass
class SimBackend:
    """One LVM-driver backend on the simulator: its options and a kit driver on it."""

    section: str
    options: dict[str, Any]
    driver: VolumeDriver
    volumes: list[str] = field(default_factory=list)

    def operator(self, *argv: str) -> None:
        """Run an LVM command behind the driver's back, as an operator would."""
        self.driver.executor.run(list(argv), readonly=False)  # type: ignore[attr-defined]

    def write(self, lv: str, gib: float) -> None:
        """Write data into a thin volume so that the pool fills."""
        self.driver.executor.runner.write_data(  # type: ignore[attr-defined]
            self.options["volume_group"], lv, int(gib * 1024 ** 3))


def make_backend(tmp: Path, section: str, *, vg_gb: int, pool_gb: int | None,
                 **options: Any) -> SimBackend:
    """A simulator VG of ``vg_gb`` GiB with a thin pool of exactly ``pool_gb`` GiB."""
    vg = options.pop("volume_group", f"{section.replace('-', '')}vg")
    pool = options.pop("lvm_thin_pool_name", f"{section.replace('-', '')}pool")
    base: dict[str, Any] = {
        "volume_driver": "lvm_driver.driver.ThinLVMDriver", "lvm_backend": "simulator",
        "lvm_simulator_state_file": str(tmp / f"{section}.json"),
        "lvm_simulator_vg_size_gb": vg_gb, "volume_group": vg,
        "lvm_thin_pool_name": pool, "lvm_create_thin_pool": pool_gb is None,
        "lock_path": str(tmp / "locks")}
    base.update(options)
    driver = load_driver(backend=section, overrides=dict(base))
    driver.do_setup()
    backend = SimBackend(section=section, options=base, driver=driver)
    if pool_gb is not None:
        backend.operator("lvcreate", "-T", "-L", f"{pool_gb}g", f"{vg}/{pool}")
    driver.check_for_setup_error()
    return backend


def _ini_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def backup_options(directory: Path) -> dict[str, Any]:
    """[DEFAULT] options of a cinder-backup with the POSIX driver on ``directory``."""
    return {"backup_driver": "cinder.backup.drivers.posix.PosixBackupDriver",
            "backup_posix_path": directory, "backup_compression_algorithm": "zlib",
            # 64 MiB pieces: the driver holds one in memory
            "backup_file_size": 64 * 1024 * 1024, "backup_enable_progress_timer": False}


def write_cinder_conf(workdir: Path, sections: dict[str, dict[str, Any]],
                      backend_defaults: dict[str, Any] | None = None,
                      defaults: dict[str, Any] | None = None,
                      coordination_url: str | None = None) -> Path:
    """A cinder.conf for Cinder run from ``workdir``: SQLite, fake messaging, our backends.

    ``[coordination] backend_url`` is ``coordination_url``, or a directory of ``workdir``.
    """
    lines = ["[DEFAULT]", f"enabled_backends = {','.join(sections)}",
             "transport_url = fake:/", f"state_path = {workdir / 'state'}",
             # a backend that fails setup is retried after 2**n s; not here
             "reinit_driver_count = 0",
             *(f"{k} = {_ini_value(v)}" for k, v in (defaults or {}).items()),
             "[database]", f"connection = sqlite:///{workdir / 'cinder.sqlite'}",
             "[oslo_concurrency]", f"lock_path = {workdir / 'cinder-locks'}",
             "[coordination]",
             f"backend_url = {coordination_url or 'file://' + str(workdir / 'coordination')}"]
    if backend_defaults:
        lines.append("[backend_defaults]")
        lines += [f"{k} = {_ini_value(v)}" for k, v in backend_defaults.items()]
    for name, options in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {_ini_value(v)}" for k, v in options.items()]
    path = workdir / "cinder.conf"
    path.write_text("\n".join(lines) + "\n")
    return path


def cinder_section(backend: SimBackend, **extra: Any) -> dict[str, Any]:
    """The cinder.conf section that runs ``backend`` through the adapter."""
    options = {k: v for k, v in backend.options.items() if k != "volume_driver"}
    options.update({"volume_driver": "contrib.cinder_adapter.DriverKitVolumeDriver",
                    "driver_kit_driver": backend.options["volume_driver"],
                    "volume_backend_name": backend.section})
    options.update(extra)
    return options


def run_cinder_side(command: str, workdir: Path, *, script: str = "cinder_side.py",
                    args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                    timeout_s: float = 240) -> dict[str, Any]:
    """Run real Cinder (``script`` beside this file) on ``workdir``; return its answer."""
    argv = [sys.executable, str(HERE / script)] + ([command] if command else [])
    proc = subprocess.run([*argv, str(workdir), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout_s, env=env)
    if proc.returncode != 0:
        pytest.fail(f"{script} {command} failed ({proc.returncode}):\n"
                    f"{proc.stderr[-6000:]}")
    return json.loads((workdir / "answer.json").read_text())
