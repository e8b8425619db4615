"""A create whose lvcreate exits 0 without this request's marker on the LV fails, on the
simulator and on real LVM (a runner that strips the marker stands for the fault)."""

from __future__ import annotations

from typing import Any

import pytest

from driver_kit import load_backend_config
from driver_kit.exceptions import BackendError
from lvm_driver.driver import LVM_OPTS, VOLUME_TAG, ThinLVMDriver
from lvm_driver.policy.tags import REQUEST_TAG_PREFIX
from lvm_driver.run.executor import CommandResult, LVMExecutor, ProcessRunner


class _DropRequestMarkers:
    """A runner passing every command to ``inner`` (and its device sources), lvcreate
    without its request marker."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __call__(self, argv: list[str], env: dict[str, str],
                 timeout_s: float) -> CommandResult:
        if argv and argv[0].endswith("lvcreate"):
            kept: list[str] = []
            for item in argv:
                if item.startswith(REQUEST_TAG_PREFIX) and kept[-1:] == ["--addtag"]:
                    kept.pop()
                else:
                    kept.append(item)
            argv = kept
        return self._inner(argv, env, timeout_s)


def test_a_create_without_its_marker_fails_and_keeps_the_lv(lab):
    inner = lab.simulator if lab.simulator is not None else ProcessRunner()
    executor = LVMExecutor(runner=_DropRequestMarkers(inner), timeout_s=120)
    conf = load_backend_config(extra_opts=LVM_OPTS, overrides=lab.overrides())
    driver = ThinLVMDriver(conf, executor=executor)
    driver.check_for_setup_error()
    with pytest.raises(BackendError, match="lacks this request's marker"):
        driver.create_volume("volume-a", 1)
    tags = lab.vg.report().find_lv("volume-a").tags
    assert VOLUME_TAG in tags and not any(t.startswith(REQUEST_TAG_PREFIX) for t in tags)
