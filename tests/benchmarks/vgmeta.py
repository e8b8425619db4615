"""LVM text metadata of a volume group with one thin pool and N thin volumes.

Creating 10,000 thin LVs with ``lvcreate`` needs device-mapper and hours; a
volume group whose metadata is written out here and restored with
``pvcreate --uuid --restorefile`` and ``vgcfgrestore --force`` is read by
``lvs`` exactly like one built that way (the pool is inactive, so LVM prints
no data%/metadata%). Also renders an ``lvs --reportformat json`` report of
any size in LVM's own layout, for the parse-only measurement.

Everything is deterministic for a given seed. Sizes are in bytes unless the
name says sectors (512 bytes) or extents.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from lvm_driver.driver import SNAPSHOT_TAG, VOLUME_TAG

SECTOR = 512
MiB = 1024 ** 2
GiB = 1024 ** 3
#: LVM reserves the first MiB of a PV (label + metadata header area alignment)
PV_LABEL_BYTES = 1 * MiB
_UUID_CHARS = string.ascii_letters + string.digits


def lvm_uuid(rng: random.Random) -> str:
    """An LVM-style UUID: 32 characters grouped 6-4-4-4-4-4-6."""
    chars = "".join(rng.choice(_UUID_CHARS) for _ in range(32))
    parts, at = [], 0
    for width in (6, 4, 4, 4, 4, 4, 6):
        parts.append(chars[at:at + width])
        at += width
    return "-".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinLV:
    """One thin LV of the generated pool (size in extents)."""

    name: str
    uuid: str
    extents: int
    device_id: int
    tags: tuple[str, ...]
    origin: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class VGLayout:
    """Everything the metadata text and the pvcreate restore need to agree on."""

    vg_name: str
    vg_uuid: str
    pv_uuid: str
    device: str
    dev_size_sectors: int
    pe_start_sectors: int
    extent_size_sectors: int
    pe_count: int
    pool_name: str
    pool_extents: int
    tmeta_extents: int
    thin_lvs: tuple[ThinLV, ...]
    seqno: int

    @property
    def extent_bytes(self) -> int:
        return self.extent_size_sectors * SECTOR

    @property
    def metadata_area_bytes(self) -> int:
        """The size to give ``pvcreate --metadatasize`` so pe_start matches."""
        return self.pe_start_sectors * SECTOR - PV_LABEL_BYTES


def plan_vg(*, vg_name: str, device: str, dev_size_bytes: int, lv_count: int,
            pool_name: str = "pool", metadata_area_bytes: int = 64 * MiB,
            extent_bytes: int = 4 * MiB, pool_percent: int = 90,
            snapshot_every: int = 20, operator_every: int = 10, max_size_gib: int = 10,
            seed: int = 7, seqno: int = 1) -> VGLayout:
    """Lay out a VG on ``device``: a thin pool and ``lv_count`` thin LVs.

    Most LVs carry the driver's volume tag; every ``operator_every``-th is an
    untagged volume an operator made, every ``snapshot_every``-th a thin
    snapshot (skip-activation, tagged) of the LV before it. Virtual sizes are
    1..``max_size_gib`` GiB (the pool may be over-provisioned, as LVM allows).
    ``metadata_area_bytes`` must hold the text (about 400 bytes an LV).
    """
    rng = random.Random(seed)
    sectors = dev_size_bytes // SECTOR
    pe_start = (PV_LABEL_BYTES + metadata_area_bytes) // SECTOR
    extent_sectors = extent_bytes // SECTOR
    pe_count = (sectors - pe_start) // extent_sectors
    tmeta = max(4, 64 * MiB // extent_bytes)
    # data, metadata and the metadata spare must all fit on the PV
    pool = (pe_count - 2 * tmeta) * pool_percent // 100
    if pool <= 0:
        raise ValueError(f"device of {dev_size_bytes} bytes is too small for a thin pool")
    lvs: list[ThinLV] = []
    for index in range(1, lv_count + 1):
        snapshot = snapshot_every and index % snapshot_every == 0 and lvs \
            and lvs[-1].origin is None
        if snapshot:
            origin = lvs[-1]
            lvs.append(ThinLV(name=f"snap-{rng.getrandbits(64):016x}", uuid=lvm_uuid(rng),
                              extents=origin.extents,
                device_id=index, tags=(SNAPSHOT_TAG,), origin=origin.name))
            continue
        size_gib = rng.randint(1, max_size_gib)
        tags = () if operator_every and index % operator_every == 0 else (VOLUME_TAG,)
        name = f"volume-{_fake_uuid4(rng)}"
        lvs.append(ThinLV(name=name, uuid=lvm_uuid(rng),
                          extents=size_gib * GiB // extent_bytes, device_id=index,
                          tags=tags, origin=None))
    return VGLayout(vg_name=vg_name, vg_uuid=lvm_uuid(rng), pv_uuid=lvm_uuid(rng),
                    device=device, dev_size_sectors=sectors, pe_start_sectors=pe_start,
                    extent_size_sectors=extent_sectors, pe_count=pe_count,
                    pool_name=pool_name, pool_extents=pool, tmeta_extents=tmeta,
                    thin_lvs=tuple(lvs), seqno=seqno)


def _fake_uuid4(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _quote_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def _striped(name: str, uuid: str, extents: int, pv_start: int) -> str:
    return (f"\t\t{name} {{\n"
            f'\t\t\tid = "{uuid}"\n'
            f'\t\t\tstatus = ["READ", "WRITE"]\n'
            f"\t\t\tflags = []\n"
            f"\t\t\tsegment_count = 1\n\n"
            f"\t\t\tsegment1 {{\n"
            f"\t\t\t\tstart_extent = 0\n"
            f"\t\t\t\textent_count = {extents}\n"
            f'\t\t\t\ttype = "striped"\n'
            f"\t\t\t\tstripe_count = 1\n\n"
            f"\t\t\t\tstripes = [\n"
            f'\t\t\t\t\t"pv0", {pv_start}\n'
            f"\t\t\t\t]\n"
            f"\t\t\t}}\n"
            f"\t\t}}\n\n")


def metadata_text(layout: VGLayout, *, creation_time: int = 1_700_000_000) -> str:
    """The VG in LVM's text format, as ``vgcfgbackup`` writes it."""
    rng = random.Random(layout.seqno)
    out: list[str] = []
    w = out.append
    w('contents = "Text Format Volume Group"\nversion = 1\n\n')
    w(f'description = "generated by tests/benchmarks/vgmeta.py: '
      f'{len(layout.thin_lvs)} thin LVs"\n\n')
    w(f'creation_host = "driver-kit-benchmark"\ncreation_time = {creation_time}\n\n')
    w(f"{layout.vg_name} {{\n")
    w(f'\tid = "{layout.vg_uuid}"\n\tseqno = {layout.seqno}\n\tformat = "lvm2"\n')
    w('\tstatus = ["RESIZEABLE", "READ", "WRITE"]\n\tflags = []\n')
    w(f"\textent_size = {layout.extent_size_sectors}\n")
    w("\tmax_lv = 0\n\tmax_pv = 0\n\tmetadata_copies = 0\n\n")
    w("\tphysical_volumes {\n\n\t\tpv0 {\n")
    w(f'\t\t\tid = "{layout.pv_uuid}"\n\t\t\tdevice = "{layout.device}"\n\n')
    w('\t\t\tstatus = ["ALLOCATABLE"]\n\t\t\tflags = []\n')
    w(f"\t\t\tdev_size = {layout.dev_size_sectors}\n")
    w(f"\t\t\tpe_start = {layout.pe_start_sectors}\n")
    w(f"\t\t\tpe_count = {layout.pe_count}\n\t\t}}\n\t}}\n\n")
    w("\tlogical_volumes {\n\n")
    transaction = len(layout.thin_lvs)
    w(f"\t\t{layout.pool_name} {{\n"
      f'\t\t\tid = "{lvm_uuid(rng)}"\n'
      f'\t\t\tstatus = ["READ", "WRITE", "VISIBLE"]\n'
      f"\t\t\tflags = []\n"
      f"\t\t\tcreation_time = {creation_time}\n"
      f'\t\t\tcreation_host = "driver-kit-benchmark"\n'
      f"\t\t\tsegment_count = 1\n\n"
      f"\t\t\tsegment1 {{\n"
      f"\t\t\t\tstart_extent = 0\n"
      f"\t\t\t\textent_count = {layout.pool_extents}\n"
      f'\t\t\t\ttype = "thin-pool"\n'
      f'\t\t\t\tmetadata = "{layout.pool_name}_tmeta"\n'
      f'\t\t\t\tpool = "{layout.pool_name}_tdata"\n'
      f"\t\t\t\ttransaction_id = {transaction}\n"
      f"\t\t\t\tchunk_size = 128\n"
      f'\t\t\t\tdiscards = "passdown"\n'
      f"\t\t\t\tzero_new_blocks = 1\n"
      f"\t\t\t}}\n\t\t}}\n\n")
    for lv in layout.thin_lvs:
        flags = '["ACTIVATION_SKIP"]' if lv.origin else "[]"
        tags = f"\t\t\ttags = {_quote_list(lv.tags)}\n" if lv.tags else ""
        origin = f'\t\t\t\torigin = "{lv.origin}"\n' if lv.origin else ""
        w(f"\t\t{lv.name} {{\n"
          f'\t\t\tid = "{lv.uuid}"\n'
          f'\t\t\tstatus = ["READ", "WRITE", "VISIBLE"]\n'
          f"\t\t\tflags = {flags}\n"
          f"{tags}"
          f"\t\t\tcreation_time = {creation_time}\n"
          f'\t\t\tcreation_host = "driver-kit-benchmark"\n'
          f"\t\t\tsegment_count = 1\n\n"
          f"\t\t\tsegment1 {{\n"
          f"\t\t\t\tstart_extent = 0\n"
          f"\t\t\t\textent_count = {lv.extents}\n"
          f'\t\t\t\ttype = "thin"\n'
          f'\t\t\t\tthin_pool = "{layout.pool_name}"\n'
          f"\t\t\t\ttransaction_id = {lv.device_id - 1}\n"
          f"\t\t\t\tdevice_id = {lv.device_id}\n"
          f"{origin}"
          f"\t\t\t}}\n\t\t}}\n\n")
    tmeta = layout.tmeta_extents
    w(_striped("lvol0_pmspare", lvm_uuid(rng), tmeta, 0))
    w(_striped(f"{layout.pool_name}_tmeta", lvm_uuid(rng), tmeta, tmeta))
    w(_striped(f"{layout.pool_name}_tdata", lvm_uuid(rng), layout.pool_extents, 2 * tmeta))
    w("\t}\n}\n")
    return "".join(out)


# ---------------------------------------------------------------------------
# A synthetic lvs report, in LVM 2.03's JSON layout

def lvs_report_json(lv_count: int, *, vg_name: str = "benchvg", pool_name: str = "pool",
                    fields: tuple[str, ...], seed: int = 11,
                    pool_data_percent: str = "37.21",
                    pool_metadata_percent: str = "8.14") -> str:
    """``lvs --reportformat json --units b --nosuffix -o <fields>`` of a thin pool
    and ``lv_count`` thin LVs, printed the way LVM 2.03 prints it (one row a line).
    """
    rng = random.Random(seed)
    extent = 4 * MiB
    vg_size = 64 * 1024 * GiB
    pool_size = 40 * 1024 * GiB
    vg_free = vg_size - pool_size - 2 * 64 * MiB
    common = {"vg_name": vg_name, "vg_size": str(vg_size), "vg_free": str(vg_free),
              "vg_extent_size": str(extent)}

    def row(values: dict[str, str]) -> str:
        merged = {**common, **values}
        return "{" + ", ".join(f'"{key}":"{merged.get(key, "")}"' for key in fields) + "}"

    rows = [row({"lv_name": pool_name, "lv_size": str(pool_size), "lv_attr": "twi-aotz--",
                 "lv_layout": "thin,pool", "lv_role": "private",
                 "data_percent": pool_data_percent,
                 "metadata_percent": pool_metadata_percent,
                 "lv_metadata_size": str(64 * MiB), "lv_uuid": lvm_uuid(rng)})]
    previous = None
    for index in range(1, lv_count + 1):
        if index % 20 == 0 and previous is not None:
            rows.append(row({"lv_name": f"snap-{rng.getrandbits(64):016x}",
                             "lv_size": previous[1], "lv_attr": "Vri---tz-k",
                             "lv_layout": "thin,sparse",
                             "lv_role": "public,snapshot,thinsnapshot",
                             "pool_lv": pool_name, "origin": previous[0],
                             "lv_uuid": lvm_uuid(rng), "lv_tags": SNAPSHOT_TAG}))
            previous = None
            continue
        name = f"volume-{_fake_uuid4(rng)}"
        size = str(rng.randint(1, 10) * GiB)
        used = f"{rng.randint(0, 10000) / 100:.2f}"
        rows.append(row({"lv_name": name, "lv_size": size, "lv_attr": "Vwi-a-tz--",
                         "lv_layout": "thin,sparse", "lv_role": "public",
                         "pool_lv": pool_name, "data_percent": used,
                         "lv_uuid": lvm_uuid(rng),
                         "lv_tags": "" if index % 10 == 0 else VOLUME_TAG}))
        previous = (name, size)
    body = ",\n                  ".join(rows)
    return ('  {\n      "report": [\n          {\n              "lv": [\n'
            f"                  {body}\n"
            "              ]\n          }\n      ]\n  }\n")
