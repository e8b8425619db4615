"""Setting up a VG: ``pvcreate``, ``vgcreate`` and ``vgextend``, as the operator would before the
driver runs (``LVMSimulator.create_vg`` runs them on a pseudo device).
"""

from __future__ import annotations

import contextlib
import os

from lvm_driver.simulator.args import Args
from lvm_driver.simulator.errors import EXIT_FAILED, EXIT_INVALID, Fail, invalid
from lvm_driver.simulator.names import valid_name
from lvm_driver.simulator.pv_headers import holds_pv_label
from lvm_driver.simulator.session import Session, lvm_uuid
from lvm_driver.simulator.sizes import DEFAULT_EXTENT_SIZE, PV_METADATA_BYTES, MiB, parse_size


def _device_size(args: Args, device: str) -> int:
    """The size of ``device``: ``--setphysicalvolumesize``, or the file or device itself."""
    text = args.last("setphysicalvolumesize")
    if text is not None:
        _, size = parse_size(text, "--setphysicalvolumesize")
        return size
    with contextlib.suppress(OSError):
        info = os.stat(device)
        if info.st_size:
            return info.st_size
    raise Fail(EXIT_FAILED, f"No device found for {device}.")


def cmd_pvcreate(session: Session, args: Args) -> None:
    """``pvcreate DEVICE...``: a PV of each device not already in a VG."""
    if not args.positionals:
        raise invalid("pvcreate", "Please enter a physical volume path.")
    for device in args.positionals:
        pv = session.state["pvs"].get(device)
        if pv is not None and pv["vg"]:
            raise Fail(EXIT_FAILED, f'Can\'t initialize physical volume "{device}" of '
                                    f'volume group "{pv["vg"]}" without -ff',
                       f"{device}: physical volume not initialized.")
        if pv is None and os.path.isfile(device) and holds_pv_label(device):
            # a PV file of a lost or replaced state: its VG lives on in it
            raise Fail(EXIT_FAILED, f'Can\'t initialize physical volume "{device}": it holds '
                                    f'a PV this state does not list (restore the state '
                                    f'file, or remove {device} to start anew)')
        size = _device_size(args, device)
        if size < PV_METADATA_BYTES + 2 * MiB:
            raise Fail(EXIT_FAILED, f"{device}: Minimum PV size is 2.00 MiB beyond "
                                    "metadata.")
        session.state["pvs"][device] = {"size": size, "vg": None, "uuid": lvm_uuid()}
        session.dirty = True
        session.out.print(f'Physical volume "{device}" successfully created.')


def _free_pv(session: Session, args: Args, device: str) -> dict:
    """The PV of ``device`` (made first if it is none), refused if it is in a VG."""
    pv = session.state["pvs"].get(device)
    if pv is None:
        cmd_pvcreate(session, Args("pvcreate", dict(args.values), [device]))
        return session.state["pvs"][device]
    if pv["vg"]:
        raise Fail(EXIT_FAILED, f'Physical volume "{device}" is already in volume '
                                f'group "{pv["vg"]}"')
    return pv


def cmd_vgcreate(session: Session, args: Args) -> None:
    """``vgcreate VG DEVICE...``: a VG of whole extents of its PVs (made PVs first if need be)."""
    if len(args.positionals) < 2:
        raise invalid("vgcreate", "Please provide volume group name and physical volumes")
    name, devices = args.positionals[0], args.positionals[1:]
    if not valid_name(name):
        raise invalid("vgcreate", "Name contains invalid character, valid set includes: "
                                  "[a-zA-Z0-9.-_+].",
                      f'New volume group name "{name}" is invalid.')
    extent = DEFAULT_EXTENT_SIZE
    text = args.last("physicalextentsize")
    if text is not None:
        _, extent = parse_size(text, "--physicalextentsize")
        if extent < 1024 or extent & (extent - 1):
            raise Fail(EXIT_INVALID, "Physical extent size must be a power of 2.")
    if name in session.state["vgs"]:
        raise Fail(EXIT_FAILED, f"A volume group called {name} already exists.")
    extent_count = 0
    for device in devices:
        extent_count += (_free_pv(session, args, device)["size"] - PV_METADATA_BYTES) // extent
    if extent_count <= 0:
        raise Fail(EXIT_FAILED, "Volume group has no usable extents.")
    for device in devices:
        session.state["pvs"][device]["vg"] = name
    session.state["vgs"][name] = {
        "name": name, "uuid": lvm_uuid(), "extent_size": extent,
        "extent_count": extent_count, "pvs": list(devices), "lvs": {},
        "pmspare_extents": 0, "seqno": 1,
    }
    session.dirty = True
    session.out.print(f'Volume group "{name}" successfully created')


def cmd_vgextend(session: Session, args: Args) -> None:
    """``vgextend VG DEVICE...``: the VG grows by the whole extents of more PVs."""
    if len(args.positionals) < 2:
        raise invalid("vgextend", "Please enter volume group name and physical volume(s)")
    vg = session.vg(args.positionals[0])
    for device in args.positionals[1:]:
        pv = _free_pv(session, args, device)
        vg["extent_count"] += (pv["size"] - PV_METADATA_BYTES) // vg["extent_size"]
        pv["vg"] = vg["name"]
        vg["pvs"].append(device)
    session.touch(vg)
    session.out.print(f'Volume group "{vg["name"]}" successfully extended')
