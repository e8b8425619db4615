"""What the Cinder adapter reads from Cinder's own configuration (``cfg.CONF``).

Cinder's lock path and coordination URL, so the adapter takes the locks Cinder's
own processes take, and the option names a backend section may use, so an
unknown one can be named.
"""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from driver_kit.config_check import option_names

__all__ = ["_cinder_coordination_url", "_cinder_lock_path", "_registered_names"]


def _cinder_lock_path() -> str | None:
    """Cinder's own [oslo_concurrency] lock_path, so every Cinder process shares locks."""
    try:
        return cfg.CONF.oslo_concurrency.lock_path
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError, AttributeError):
        return None


def _cinder_coordination_url(clustered: bool) -> str | None:
    """Cinder's ``[coordination] backend_url`` when this service coordinates through it.

    That is when cinder.conf sets it (DevStack points it at its etcd), or when
    the service is in an active-active cluster, where Cinder's own locks use it,
    default (``file://$state_path``) included. Cinder's default on a lone host
    is left alone: there the file lock in ``lock_path`` does the same job.
    """
    try:
        url = cfg.CONF.coordination.backend_url
        chosen = cfg.CONF.get_location("backend_url", "coordination").location
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError, AttributeError):
        return None
    return url if url and (clustered or chosen.is_user_controlled) else None


def _registered_names(section: Any) -> set[str]:
    """The option names a file may use in ``section`` (a ``cfg.CONF[group]``): each
    registered option's, and its deprecated names (oslo.config keeps the options only
    on the group's private record; without it, the names alone)."""
    names = set(section)
    try:
        opts = [info["opt"] for info in section._group._opts.values()]
    except (AttributeError, KeyError, TypeError):
        return names
    return names | option_names(opts)
