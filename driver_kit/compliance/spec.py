"""How the harness names a driver so that any process can build it: ``DriverSpec``.

Below the checks and the runner alike (the multi-process checks rebuild the
driver in child processes from its spec), on top of ``driver_kit.loading``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from driver_kit.driver import VolumeDriver
from driver_kit.exceptions import DriverKitError
from driver_kit.loading import load_driver as build_driver

__all__ = ["DriverSpec", "LoadError", "load_driver"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverSpec:
    """How to build a driver by name, so that another process can build it too.

    ``driver`` is ``module:Class`` (or ``module.Class``); without it the backend
    section's ``volume_driver`` is used. ``backend`` defaults to the one backend
    in ``enabled_backends``. ``overrides`` win over the file (e.g. ``lock_path``).
    ``cinder_driver`` names an existing Cinder driver class instead (dotted path),
    configured by ``config_files`` as cinder.conf (``compliance.cinder_front``).
    """

    driver: str | None = None
    cinder_driver: str | None = None
    config_files: tuple[str, ...] = ()
    backend: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [self.driver or (self.cinder_driver and f"Cinder driver {self.cinder_driver}")
                 or self.overrides.get("volume_driver") or "volume_driver of the config"]
        parts += [f"config {path}" for path in self.config_files]
        if self.backend:
            parts.append(f"backend {self.backend}")
        return ", ".join(parts)


class LoadError(DriverKitError):
    """The driver, its config or its hooks cannot be loaded; the message says why."""


def load_driver(spec: DriverSpec) -> Callable[[], VolumeDriver]:
    """A factory of fresh, not yet set-up driver instances, built as ``driver-kit``
    builds them (``driver_kit.loading``). Nothing is imported or built before it
    is called; each call raises ``LoadError`` saying why when no driver can be built.
    """
    def factory() -> VolumeDriver:
        try:
            if spec.cinder_driver:
                # imported here: Cinder (and eventlet) only for a Cinder driver
                from driver_kit.compliance.cinder_front import build_cinder_driver
                return build_cinder_driver(  # type: ignore[return-value]
                    spec.cinder_driver, spec.config_files, spec.backend)
            return build_driver(list(spec.config_files), spec.backend,
                                driver_path=spec.driver,
                                overrides=dict(spec.overrides) or None)
        except DriverKitError as exc:
            raise LoadError(str(exc)) from exc
    factory.spec = spec  # type: ignore[attr-defined]  # its module's hooks apply
    return factory
