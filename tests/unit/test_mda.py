"""The VG's metadata fingerprint from PV labels and metadata-area headers: real LVM
bytes on a loop device (as root), and synthetic headers, sound and corrupted."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess

import pytest

from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.read import mda
from lvm_driver.read.report_cache import DeviceSources, parse_pvs_report
from lvm_driver.run.executor import LVMExecutor
from lvm_driver.simulator.pv_headers import MDA_OFFSET, label_sector, mda_header

UUID = "abcdef-ghij-klmn-opqr-stuv-wxyz-012345"
VG = {"name": "vg", "uuid": "vguuid", "seqno": 7, "lvs": {}}


def pv_file(tmp_path, label: bytes | None = None, header: bytes | None = None,
            label_at: int = 1) -> str:
    """A PV image: the label in sector ``label_at``, the metadata-area header at 4 KiB."""
    path = tmp_path / "pv.img"
    image = bytearray(8192)
    image[label_at * 512:(label_at + 1) * 512] = label or label_sector(UUID, 1 << 30)
    if label_at != 1 and label is None:  # the label says which sector it is in
        image[label_at * 512 + 8:label_at * 512 + 16] = struct.pack("<Q", label_at)
        crc = mda.calc_crc(mda.INITIAL_CRC, bytes(image[label_at * 512 + 20:
                                                        (label_at + 1) * 512]))
        image[label_at * 512 + 16:label_at * 512 + 20] = struct.pack("<I", crc)
    image[MDA_OFFSET:MDA_OFFSET + 512] = header or mda_header(VG)
    path.write_bytes(bytes(image))
    return str(path)


def resealed(header: bytes, offset: int, value: bytes) -> bytes:
    """``header`` with ``value`` written at ``offset`` and its checksum made right again."""
    block = bytearray(header)
    block[offset:offset + len(value)] = value
    block[0:4] = struct.pack("<I", mda.calc_crc(mda.INITIAL_CRC, bytes(block[4:])))
    return bytes(block)


# -- synthetic headers -------------------------------------------------------------------

def test_calc_crc_is_lvms_crc_without_zlibs_inversions():
    assert mda.calc_crc(mda.INITIAL_CRC, b"") == mda.INITIAL_CRC
    assert mda.calc_crc(0xFFFFFFFF, b"123456789") ^ 0xFFFFFFFF == 0xCBF43926  # CRC-32/ISO


def test_a_sound_pv_gives_its_label_and_one_raw_locn(tmp_path):
    path = pv_file(tmp_path)
    label = mda.parse_label(mda.read_block(path, 0, 8192)[1])
    assert (label.sector, label.device_size_bytes) == (1, 1 << 30)
    assert label.metadata_areas == ((MDA_OFFSET, 1024 * 1024 - MDA_OFFSET),)
    fingerprint = mda.vg_fingerprint([(path, 1)])
    assert fingerprint is not None and len(fingerprint[0].areas) == 1
    assert fingerprint == mda.vg_fingerprint([(path, 1)])  # nothing changed


@pytest.mark.parametrize("sector", [0, 2, 3])
def test_the_label_is_found_in_any_of_the_first_four_sectors(tmp_path, sector):
    assert mda.vg_fingerprint([(pv_file(tmp_path, label_at=sector), 1)]) is not None


def test_every_commit_changes_the_fingerprint(tmp_path):
    before = mda.vg_fingerprint([(pv_file(tmp_path), 1)])
    after = mda.vg_fingerprint([(pv_file(tmp_path, header=mda_header({**VG, "seqno": 8})), 1)])
    assert before is not None and after is not None and before != after


def _bad_label_crc() -> bytes:
    label = bytearray(label_sector(UUID, 1 << 30))
    label[100] ^= 0xFF
    return bytes(label)


def _other_magic() -> bytes:
    return resealed(mda_header(VG), 4, b" LVM2 x[5A%r0N*<")


@pytest.mark.parametrize("label, header, why", [
    (b"\0" * 512, None, "no label"),
    (_bad_label_crc(), None, "label checksum"),
    (None, bytes([mda_header(VG)[0] ^ 1]) + mda_header(VG)[1:], "header checksum"),
    (None, _other_magic(), "magic"),
    (None, resealed(mda_header(VG), 20, struct.pack("<I", 2)), "header version"),
    (None, resealed(mda_header(VG), 24, struct.pack("<Q", 8192)), "area start"),
    (None, resealed(mda_header(VG), 60, struct.pack("<I", 1)), "ignored area (flags)"),
    (None, resealed(mda_header(VG), 40, b"\0" * 24), "no committed metadata"),
    (None, resealed(mda_header(VG), 64, struct.pack("<QQII", 4096, 100, 5, 0)),
     "a commit under way (raw_locn[1])"),
])
def test_any_doubt_is_no_fingerprint(tmp_path, label, header, why):
    assert mda.vg_fingerprint([(pv_file(tmp_path, label, header), 1)]) is None, why


def test_a_pv_with_another_count_of_metadata_areas_is_a_doubt(tmp_path):
    assert mda.vg_fingerprint([(pv_file(tmp_path), 2)]) is None


def test_an_unreadable_or_missing_device_is_a_doubt(tmp_path):
    assert mda.vg_fingerprint([(str(tmp_path / "nowhere"), 1)]) is None
    assert mda.vg_fingerprint([]) is None

    def eio(path, offset, length):
        raise OSError(5, "Input/output error", path)
    assert mda.vg_fingerprint([(pv_file(tmp_path), 1)], read=eio) is None


def test_a_file_without_o_direct_is_read_through_the_page_cache_but_never_a_device(
        tmp_path, monkeypatch):
    path = pv_file(tmp_path)
    real_open = os.open

    def no_direct(name, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(22, "Invalid argument", name)
        return real_open(name, flags, *args)
    monkeypatch.setattr(mda.os, "open", no_direct)
    assert mda.vg_fingerprint([(path, 1)]) is not None  # a regular file (tmpfs): plain read
    # a block device's page cache need not see another host's commit: a doubt
    monkeypatch.setattr(mda.stat, "S_ISBLK", lambda mode: True)
    with pytest.raises(OSError):
        mda.read_block(path, 0, 512)
    assert mda.vg_fingerprint([(path, 1)]) is None


def test_another_device_at_the_same_path_changes_the_fingerprint(tmp_path):
    path = pv_file(tmp_path)
    before = mda.vg_fingerprint([(path, 1)])
    os.rename(path, path + ".old")
    shutil.copyfile(path + ".old", path)  # same bytes, another inode
    assert mda.vg_fingerprint([(path, 1)]) != before


def test_pvs_reports_are_taken_only_when_unambiguous():
    def text(*rows):
        return '{"report": [{"pv": [%s]}]}' % ",".join(rows)
    row = '{"pv_name":"%s", "pv_uuid":"u", "pv_fmt":"%s", "pv_mda_count":"%s", "vg_name":"%s"}'
    assert parse_pvs_report(text(row % ("/dev/a", "lvm2", "1", "vg"),
                                 row % ("/dev/b", "lvm2", "2", "other")), "vg") == [("/dev/a", 1)]
    for bad in (row % ("/dev/a", "lvm1", "1", "vg"), row % ("[unknown]", "lvm2", "1", "vg"),
                row % ("/dev/a", "lvm2", "", "vg")):
        assert parse_pvs_report(text(bad), "vg") == []
    assert parse_pvs_report(text(row % ("/dev/a", "lvm2", "1", "vg"),
                                 row % ("/dev/a", "lvm2", "1", "vg")), "vg") == []


# -- real LVM on a loop device -------------------------------------------------------------

def _real_vg():
    if os.geteuid() != 0 or shutil.which("losetup") is None or shutil.which("lvm") is None:
        pytest.skip("needs root, losetup and lvm2 to put a real PV on a loop device")
    from tests.benchmarks.realvg import BenchmarkSetupError, RealVG
    try:
        real = RealVG("dkmdavg", dev_size_bytes=256 * 1024 ** 2,
                      metadata_area_bytes=1024 ** 2).open()
    except BenchmarkSetupError as exc:
        pytest.skip(f"no loop device here: {exc}")
    return real


@pytest.fixture
def real_vg():
    real = _real_vg()
    try:
        real.restore(3)
        yield real
    finally:
        real.close()


def lvm(real, *argv: str) -> None:
    subprocess.run(list(argv), env=real.env(), check=True, capture_output=True)


def test_real_lvm_headers_parse_and_change_with_each_commit(real_vg):
    device = real_vg.device
    identity, head = mda.read_block(device, 0, mda.FIRST_READ_BYTES)
    label = mda.parse_label(head)
    assert label.metadata_areas and label.metadata_areas[0][0] == 4096
    assert identity == os.stat(device).st_rdev
    before = mda.vg_fingerprint([(device, 1)])
    assert before is not None and before == mda.vg_fingerprint([(device, 1)])
    seen = {before}
    for argv in (["lvchange", "--addtag", "operator", "dkmdavg/pool"],
                 ["lvchange", "--deltag", "operator", "dkmdavg/pool"]):
        lvm(real_vg, *argv)
        now = mda.vg_fingerprint([(device, 1)])
        assert now is not None and now not in seen  # back to the same tags: still new
        seen.add(now)


def test_real_lvm_report_is_reused_until_another_process_commits(real_vg):
    executor = LVMExecutor(lvm_system_dir=str(real_vg.conf_dir))
    # no device-mapper on this host: every pool reads as inactive
    vg = VolumeGroup("dkmdavg", executor=executor,
                     sources=DeviceSources(thin_pool_status=lambda vg_name, pool: None))
    first = vg.report()
    assert executor.commands_run == 2 and [argv[0] for argv in executor.history] == [
        "pvs", "lvs"]
    assert vg.report() is not first and vg.report().lvs == first.lvs
    assert executor.commands_run == 2  # reused twice: no process
    lvm(real_vg, "lvchange", "--addtag", "operator", "dkmdavg/pool")
    assert vg.report().get_lv("pool").tags == ("operator",)
    assert executor.commands_run == 3  # one lvs: the PVs are those learned
    assert (vg.report_cache_stats.hits, vg.report_cache_stats.misses) == (2, 2)
