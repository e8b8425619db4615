"""What Cinder's ``lioadm`` target helper runs, and what it hands os-brick.

The host lane checks that the adapter makes Cinder's ``LioAdm`` run exactly
these ``cinder-rtstool`` commands and return this connection; in the VM lane
(``test_cinder_services_realvm.py``) cinder-volume runs them on the kernel's
LIO target and os-brick's iSCSI connector logs in with that connection.
"""

from __future__ import annotations

from typing import Any

IQN_PREFIX = "iqn.2010-10.org.openstack:"
PORT = 3260


def export(device: str, volume_name: str, user: str, password: str, ip: str) -> list[str]:
    """``create_export``: a target for the volume's device, CHAP on, one portal."""
    return ["cinder-rtstool", "create", device, IQN_PREFIX + volume_name, user, password,
            "False", f"-p{PORT}", f"-a{ip}"]


def allow(volume_name: str, user: str, password: str, initiator: str) -> list[str]:
    """``initialize_connection``: the connector's initiator into the target's ACL."""
    return ["cinder-rtstool", "add-initiator", IQN_PREFIX + volume_name, user, password,
            initiator]


def deny(volume_name: str, initiator: str) -> list[str]:
    """``terminate_connection``: the initiator out of the ACL."""
    return ["cinder-rtstool", "delete-initiator", IQN_PREFIX + volume_name, initiator]


def remove(volume_name: str) -> list[str]:
    """``remove_export``: the target gone."""
    return ["cinder-rtstool", "delete", IQN_PREFIX + volume_name]


def connection(volume_id: str, volume_name: str, user: str, password: str,
               ip: str) -> dict[str, Any]:
    """The iSCSI connection data ``initialize_connection`` returns (LIO's LUN is 0)."""
    return {"target_portal": f"{ip}:{PORT}", "target_iqn": IQN_PREFIX + volume_name,
            "target_lun": 0, "target_discovered": False, "volume_id": volume_id,
            "auth_method": "CHAP", "auth_username": user, "auth_password": password}
