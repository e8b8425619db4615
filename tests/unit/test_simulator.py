"""The LVM simulator: real-LVM transcripts replayed, LVM's rules, state file, lock, faults."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from driver_kit.exceptions import AlreadyExists, BackendTimeout, NotFound
from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.run.executor import LVMCommandError, LVMOutputError, LVMTimeoutError
from lvm_driver.simulator import LVMSimulator, SimulatorError, main

DATA = Path(__file__).parent / "data" / "lvm"
MiB = 1024 ** 2
GiB = 1024 ** 3
VM_VG_SIZE = 4290772992  # the VM lane's VG: a 4 GiB loop device, 1023 extents
_UUID = re.compile(r'"(lv|vg)_uuid":"[^"]*"')

# Real LVM 2.03.16 in the VM lane, driven through lvm_driver.commands.lvm.VolumeGroup on
# an empty VG of VM_VG_SIZE; 10 MiB were written to vol1 right after its
# creation. (argv, exit code, stdout, stderr), in order.
REAL_TRANSCRIPT: list[tuple[list[str], int, str, str]] = [
    (['lvcreate', '--type', 'thin-pool', '--size', '268435456b', '--name', 'pool', '--yes', 'dkvg'],
     0, '  Thin pool volume with chunk size 64.00 KiB can address at most <15.88 TiB of data.\n  Logical volume "pool" created.\n',
     ''),
    (['lvcreate', '--type', 'thin', '--virtualsize', '1073741824b', '--thinpool', 'pool', '--name', 'vol1', '--addtag', 'dk-volume', '--addtag', 'x=y', '--yes', 'dkvg'],
     0, '  WARNING: You have not turned on protection against thin pools running out of space.\n  WARNING: Set activation/thin_pool_autoextend_threshold below 100 to trigger automatic extension of thin pools before they get full.\n  Logical volume "vol1" created.\n',
     '  WARNING: Sum of all thin volume sizes (1.00 GiB) exceeds the size of thin pool dkvg/pool (256.00 MiB).\n'),
    (['lvcreate', '--snapshot', '--setactivationskip', 'y', '--name', 'snap1', '--addtag', 'dk-snapshot', '--yes', 'dkvg/vol1'],
     0, '  WARNING: You have not turned on protection against thin pools running out of space.\n  WARNING: Set activation/thin_pool_autoextend_threshold below 100 to trigger automatic extension of thin pools before they get full.\n  Logical volume "snap1" created.\n',
     '  WARNING: Sum of all thin volume sizes (2.00 GiB) exceeds the size of thin pool dkvg/pool (256.00 MiB).\n'),
    (['lvcreate', '--snapshot', '--setactivationskip', 'n', '--activate', 'y', '--name', 'clone1', '--addtag', 'dk-volume', '--yes', 'dkvg/vol1'],
     0, '  WARNING: You have not turned on protection against thin pools running out of space.\n  WARNING: Set activation/thin_pool_autoextend_threshold below 100 to trigger automatic extension of thin pools before they get full.\n  Logical volume "clone1" created.\n',
     '  WARNING: Sum of all thin volume sizes (3.00 GiB) exceeds the size of thin pool dkvg/pool (256.00 MiB).\n'),
    (['lvcreate', '--type', 'linear', '--size', '104858112b', '--name', 'thick1', '--addtag', 'dk-volume', '--yes', 'dkvg'],
     0, '  Rounding up size to full physical extent 104.00 MiB\n  WARNING: You have not turned on protection against thin pools running out of space.\n  WARNING: Set activation/thin_pool_autoextend_threshold below 100 to trigger automatic extension of thin pools before they get full.\n  Logical volume "thick1" created.\n',
     '  WARNING: Sum of all thin volume sizes (3.00 GiB) exceeds the size of thin pools (256.00 MiB).\n'),
    (['lvs', '--reportformat', 'json', '--units', 'b', '--nosuffix', '-o', 'vg_name,vg_size,vg_free,vg_extent_size,lv_name,lv_size,lv_attr,lv_layout,lv_role,pool_lv,origin,data_percent,metadata_percent,lv_metadata_size,lv_uuid,lv_tags', 'dkvg'],
     0, '  {\n      "report": [\n          {\n              "lv": [\n                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"clone1", "lv_size":"1073741824", "lv_attr":"Vwi-a-tz--", "lv_layout":"thin,sparse", "lv_role":"public,snapshot,thinsnapshot", "pool_lv":"pool", "origin":"vol1", "data_percent":"0.98", "metadata_percent":"", "lv_metadata_size":"", "lv_uuid":"a9SHEv-m4Zc-epPA-bXhF-qCEW-Pfkq-JfgAZi", "lv_tags":"dk-volume"},\n                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"pool", "lv_size":"268435456", "lv_attr":"twi-aotz--", "lv_layout":"thin,pool", "lv_role":"private", "pool_lv":"", "origin":"", "data_percent":"3.91", "metadata_percent":"10.94", "lv_metadata_size":"4194304", "lv_uuid":"6sh5I1-nseT-jM7o-qyCO-5MhW-1xjO-EmioA0", "lv_tags":""},\n                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"snap1", "lv_size":"1073741824", "lv_attr":"Vwi---tz-k", "lv_layout":"thin,sparse", "lv_role":"public,snapshot,thinsnapshot", "pool_lv":"pool", "origin":"vol1", "data_percent":"", "metadata_percent":"", "lv_metadata_size":"", "lv_uuid":"Yq3SNX-cjE6-dwIF-BIW5-qykm-9h2r-VAUCSR", "lv_tags":"dk-snapshot"},\n                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"thick1", "lv_size":"109051904", "lv_attr":"-wi-a-----", "lv_layout":"linear", "lv_role":"public", "pool_lv":"", "origin":"", "data_percent":"", "metadata_percent":"", "lv_metadata_size":"", "lv_uuid":"LikY7k-GFcn-zFXd-D0PI-bgZm-V9Hr-rh9wVW", "lv_tags":"dk-volume"},\n                  {"vg_name":"dkvg", "vg_size":"4290772992", "vg_free":"3904897024", "vg_extent_size":"4194304", "lv_name":"vol1", "lv_size":"1073741824", "lv_attr":"Vwi-a-tz--", "lv_layout":"thin,sparse", "lv_role":"public,origin,thinorigin,multithinorigin", "pool_lv":"pool", "origin":"", "data_percent":"0.98", "metadata_percent":"", "lv_metadata_size":"", "lv_uuid":"wSqJgv-Jaar-eBWm-0tZZ-Ydk4-ASoZ-hdMa7G", "lv_tags":"dk-volume,x=y"}\n              ]\n          }\n      ]\n  }\n',
     ''),
    (['lvextend', '--size', '2147483648b', 'dkvg/vol1'],
     0, '  Size of logical volume dkvg/vol1 changed from 1.00 GiB (256 extents) to 2.00 GiB (512 extents).\n  WARNING: You have not turned on protection against thin pools running out of space.\n  WARNING: Set activation/thin_pool_autoextend_threshold below 100 to trigger automatic extension of thin pools before they get full.\n  Logical volume dkvg/vol1 successfully resized.\n',
     '  WARNING: Sum of all thin volume sizes (4.00 GiB) exceeds the size of thin pool dkvg/pool and the size of whole volume group (<4.00 GiB).\n'),
    (['lvextend', '--size', '2147483648b', 'dkvg/vol1'],
     5, '',
     '  New size (512 extents) matches existing size (512 extents).\n'),
    (['lvextend', '--size', '1073741824b', 'dkvg/vol1'],
     5, '',
     '  New size given (256 extents) not larger than existing size (512 extents)\n'),
    (['lvextend', '--size', '314572800b', 'dkvg/pool'],
     0, '  Size of logical volume dkvg/pool_tdata changed from 256.00 MiB (64 extents) to 300.00 MiB (75 extents).\n  WARNING: You have not turned on protection against thin pools running out of space.\n  WARNING: Set activation/thin_pool_autoextend_threshold below 100 to trigger automatic extension of thin pools before they get full.\n  Logical volume dkvg/pool successfully resized.\n',
     '  WARNING: Sum of all thin volume sizes (4.00 GiB) exceeds the size of thin pool dkvg/pool and the size of whole volume group (<4.00 GiB).\n'),
    (['lvextend', '--size', '107374182400b', 'dkvg/thick1'],
     5, '',
     '  Insufficient free space: 25574 extents needed, but only 920 available\n'),
    (['lvrename', 'dkvg', 'clone1', 'clone2'],
     0, '  Renamed "clone1" to "clone2" in volume group "dkvg"\n',
     ''),
    (['lvrename', 'dkvg', 'clone2', 'vol1'],
     5, '',
     '  Logical Volume "vol1" already exists in volume group "dkvg"\n'),
    (['lvrename', 'dkvg', 'nosuch', 'other'],
     5, '',
     '  Existing logical volume "nosuch" not found in volume group "dkvg"\n'),
    (['lvchange', '--activate', 'y', '--ignoreactivationskip', 'dkvg/snap1'],
     0, '',
     ''),
    (['lvcreate', '--type', 'thin', '--virtualsize', '1073741824b', '--thinpool', 'pool', '--name', 'vol1', '--yes', 'dkvg'],
     5, '',
     '  Logical Volume "vol1" already exists in volume group "dkvg"\n'),
    (['lvcreate', '--type', 'thin', '--virtualsize', '1073741824b', '--thinpool', 'nopool', '--name', 'vol9', '--yes', 'dkvg'],
     5, '',
     '  Pool nopool not found in Volume group dkvg.\n'),
    (['lvcreate', '--type', 'thin', '--virtualsize', '1073741824b', '--thinpool', 'thick1', '--name', 'vol9', '--yes', 'dkvg'],
     5, '',
     '  Logical volume dkvg/thick1 is not a thin pool.\n'),
    (['lvcreate', '--snapshot', '--setactivationskip', 'y', '--name', 'snap9', '--yes', 'dkvg/nosuch'],
     5, '',
     '  Snapshot origin LV nosuch not found in Volume group dkvg.\n'),
    (['lvcreate', '--snapshot', '--setactivationskip', 'y', '--name', 'snap9', '--yes', 'dkvg/thick1'],
     5, '',
     '  Please specify either size or extents with snapshots.\n'),
    (['lvcreate', '--type', 'linear', '--size', '107374182400b', '--name', 'huge', '--yes', 'dkvg'],
     5, '',
     '  Volume group "dkvg" has insufficient free space (920 extents): 25600 required.\n'),
    (['lvremove', '--force', 'dkvg/nosuch'],
     5, '',
     '  Failed to find logical volume "dkvg/nosuch"\n'),
    (['lvcreate', '--type', 'thin', '--virtualsize', '4m', '--thinpool', 'pool', '--name', 'a;b', 'dkvg'],
     3, '',
     '  Logical volume name "a;b" is invalid.\n  Run `lvcreate --help\' for more information.\n'),
    (['lvcreate', '--type', 'thin', '--virtualsize', '4m', '--thinpool', 'pool', '--name', 'snapshot1', 'dkvg'],
     3, '',
     '  Names starting "snapshot" are reserved. Please choose a different LV name.\n  Run `lvcreate --help\' for more information.\n'),
    (['lvchange', '--addtag', 't1', '--deltag', 'x=y', 'dkvg/vol1'],
     0, '  Logical volume dkvg/vol1 changed.\n',
     ''),
    (['lvremove', '--force', 'dkvg/snap1'],
     0, '  Logical volume "snap1" successfully removed.\n',
     ''),
    (['lvremove', '--force', 'dkvg/vol1'],
     0, '  Logical volume "vol1" successfully removed.\n',
     ''),
    (['lvremove', '--force', 'dkvg/pool'],
     0, '  Logical volume "clone2" successfully removed.\n  Logical volume "pool" successfully removed.\n',
     ''),
    (['lvremove', '--force', 'dkvg/thick1'],
     0, '  Logical volume "thick1" successfully removed.\n',
     ''),
    (['lvs', '--reportformat', 'json', '--units', 'b', '--nosuffix', '-o', 'vg_name,vg_size,vg_free,vg_extent_size,lv_name,lv_size,lv_attr,lv_layout,lv_role,pool_lv,origin,data_percent,metadata_percent,lv_metadata_size,lv_uuid,lv_tags', 'dkvg'],
     0, '  {\n      "report": [\n          {\n              "lv": [\n              ]\n          }\n      ]\n  }\n',
     ''),
]


def same_output(expected: str, actual: str) -> bool:
    return _UUID.sub("uuid", expected) == _UUID.sub("uuid", actual)


@pytest.fixture
def sim() -> LVMSimulator:
    simulator = LVMSimulator()
    simulator.create_vg("vg", GiB)
    return simulator


def run(simulator: LVMSimulator, *argv: str):
    return simulator.run(list(argv))


def report(simulator: LVMSimulator, vg: str = "vg"):
    return VolumeGroup(vg, executor=simulator.executor()).report()


# -- the simulator says what real LVM says ---------------------------------------------------


def test_replays_the_wrapper_transcript_from_real_lvm():
    simulator = LVMSimulator()
    simulator.create_vg("dkvg", VM_VG_SIZE)
    for argv, code, stdout, stderr in REAL_TRANSCRIPT:
        result = simulator.run(argv)
        assert (result.exit_code, result.stderr) == (code, stderr), argv
        assert same_output(stdout, result.stdout), argv
        if argv[-2:] == ["--yes", "dkvg"] and "vol1" in argv and result.exit_code == 0:
            simulator.write_data("dkvg", "vol1", 10 * MiB)


# Captures the simulator deliberately does not reproduce.
_NOT_EMULATED = {
    "lvm_version": "names the simulator in its Configuration line",
    "lvs_version": "names the simulator in its Configuration line",
    "lvm_config_diff": "`lvm config` is not emulated",
}


def _capture_order() -> list[str]:
    lines = (DATA / "timings.txt").read_text().splitlines()
    return [line.split()[2] for line in lines
            if not line.startswith("#") and line.split()[1] != "-"]


def test_replays_the_vm_lane_captures():
    """tests/realvm/capture_lvm_outputs.sh's sequence, command by command."""
    order = _capture_order()
    assert len(order) >= 30, "the VM lane's captures are missing"
    simulator = LVMSimulator()
    simulator.create_vg("dkvg", VM_VG_SIZE)
    compared = 0
    for name in order:
        record = json.loads((DATA / f"{name}.json").read_text())
        result = simulator.run(record["argv"])
        if name == "create_volume_bbb":  # the script then dd's 100 MiB into volume-aaa
            simulator.write_data("dkvg", "volume-aaa", 100 * MiB)
        if name in _NOT_EMULATED:
            continue
        assert result.exit_code == record["exit_code"], name
        assert result.stderr == record["stderr"], name
        assert same_output(record["stdout"], result.stdout), name
        compared += 1
    assert compared == len(order) - len(_NOT_EMULATED)


# -- VG, extents, pools -------------------------------------------------------------------------


def test_create_vg_rounds_down_to_whole_extents():
    simulator = LVMSimulator()
    simulator.create_vg("a", 10 * MiB + 5)
    simulator.create_vg("b", 64 * MiB, extent_size_bytes=MiB)
    a = VolumeGroup("a", executor=simulator.executor()).vg_info()
    b = VolumeGroup("b", executor=simulator.executor()).vg_info()
    assert (a.vg_size_bytes, a.extent_size_bytes) == (8 * MiB, 4 * MiB)
    assert (b.vg_size_bytes, b.extent_size_bytes) == (64 * MiB, MiB)


def test_names_are_unique_across_kinds(sim):
    assert run(sim, "lvcreate", "-L", "8m", "-n", "x", "vg").exit_code == 0
    result = run(sim, "lvcreate", "--type", "thin-pool", "-L", "8m", "-n", "x", "vg")
    assert (result.exit_code, result.stderr) == (
        5, '  Logical Volume "x" already exists in volume group "vg"\n')


def test_sizes_round_up_to_extents(sim):
    result = run(sim, "lvcreate", "--type", "linear", "--size", f"{4 * MiB + 512}b",
                 "--name", "t", "vg")
    assert result.stdout.startswith("  Rounding up size to full physical extent 8.00 MiB\n")
    assert report(sim).get_lv("t").size_bytes == 8 * MiB


def test_thin_pool_takes_data_metadata_and_a_spare(sim):
    run(sim, "lvcreate", "--type", "thin-pool", "-L", "100m", "-n", "p1", "vg")
    assert report(sim).vg_free_bytes == GiB - 100 * MiB - 4 * MiB - 4 * MiB
    run(sim, "lvcreate", "--type", "thin-pool", "-L", "100m", "-n", "p2", "vg")
    assert report(sim).vg_free_bytes == GiB - 2 * 104 * MiB - 4 * MiB  # one spare
    run(sim, "lvremove", "-f", "vg/p1")
    run(sim, "lvremove", "-f", "vg/p2")
    assert report(sim).vg_free_bytes == GiB  # the spare goes with the last pool


def test_pools_and_thick_volumes_need_vg_free_space(sim):
    result = run(sim, "lvcreate", "--type", "linear", "-L", "2g", "-n", "big", "vg")
    assert (result.exit_code, result.stderr) == (
        5, '  Volume group "vg" has insufficient free space (256 extents): 512 required.\n')
    result = run(sim, "lvcreate", "--type", "thin-pool", "-L", "1020m", "-n", "p", "vg")
    assert (result.exit_code, result.stderr) == (
        5, "  Insufficient free space: 257 extents needed, but only 256 available\n")
    run(sim, "lvcreate", "-L", "1000m", "-n", "t", "vg")
    result = run(sim, "lvextend", "-L", "1100m", "vg/t")
    assert (result.exit_code, result.stderr) == (
        5, "  Insufficient free space: 25 extents needed, but only 6 available\n")


def test_thin_volumes_may_over_provision_the_pool(sim):
    run(sim, "lvcreate", "--type", "thin-pool", "-L", "100m", "-n", "pool", "vg")
    result = run(sim, "lvcreate", "--type", "thin", "-V", "10g", "--thinpool", "pool",
                 "-n", "huge", "vg")
    assert result.exit_code == 0
    assert "WARNING: Sum of all thin volume sizes (10.00 GiB) exceeds the size of thin " \
           "pool vg/pool and the size of whole volume group (1.00 GiB)." in result.stderr
    assert report(sim).get_lv("huge").size_bytes == 10 * GiB


def test_written_data_fills_the_pool_and_snapshots_share_it(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 400 * MiB)
    vg.create_thin_volume("vol", GiB, pool="pool")
    sim.write_data("vg", "vol", 100 * MiB)
    before = vg.live_report()
    assert before.get_lv("pool").data_percent == 25.0
    assert before.get_lv("vol").data_percent == 9.77
    vg.create_thin_snapshot("snap", "vol")
    vg.create_thin_snapshot("clone", "vol", activate=True)
    after = vg.live_report()
    assert after.get_lv("pool").data_percent == 25.0  # no data copied
    assert after.get_lv("clone").data_percent == 9.77
    sim.write_data("vg", "clone", 1)  # one 64 KiB chunk
    assert vg.live_report().get_lv("pool").data_percent == 25.02
    vg.delete("vol")
    assert vg.live_report().get_lv("pool").data_percent == 25.02  # still used by the snapshots
    vg.delete("snap")
    vg.delete("clone")
    assert vg.live_report().get_lv("pool").data_percent == 0.0


def test_metadata_usage_grows_with_volumes_and_data(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 256 * MiB)
    empty = vg.report().get_lv("pool").metadata_percent
    vg.create_thin_volume("vol", GiB, pool="pool")
    sim.write_data("vg", "vol", 200 * MiB)
    assert empty == 10.84 and vg.report().get_lv("pool").metadata_percent > empty


def test_a_full_pool_stops_writes(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 8 * MiB)
    vg.create_thin_volume("vol", GiB, pool="pool")
    with pytest.raises(SimulatorError, match="out of data space"):
        sim.write_data("vg", "vol", 10 * MiB)
    pool = vg.report().get_lv("pool")
    assert pool.data_percent == 100.0 and pool.attr.health == "D"


def test_inactive_volumes_cannot_be_written(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 8 * MiB)
    vg.create_thin_volume("vol", GiB, pool="pool")
    vg.create_thin_snapshot("snap", "vol")
    with pytest.raises(SimulatorError, match="not active"):
        sim.write_data("vg", "snap", MiB)


def test_attr_strings_follow_lvm(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 64 * MiB)
    assert vg.live_report().get_lv("pool").attr.raw == "twi-a-tz--"
    vg.create_thin_volume("vol", GiB, pool="pool")
    vg.create_thin_snapshot("snap", "vol")
    vg.create_thin_snapshot("clone", "vol", activate=True)
    vg.create_thick_volume("thick", 8 * MiB)
    attrs = {lv.name: lv.attr.raw for lv in vg.live_report().lvs}
    assert attrs == {"pool": "twi-aotz--", "vol": "Vwi-a-tz--", "snap": "Vwi---tz-k",
                     "clone": "Vwi-a-tz--", "thick": "-wi-a-----"}
    run(sim, "lvchange", "-ay", "vg/snap")  # skip flag honoured without -K
    assert vg.live_report().get_lv("snap").attr.raw == "Vwi---tz-k"
    vg.activate("snap")
    assert vg.live_report().get_lv("snap").attr.raw == "Vwi-a-tz-k"
    run(sim, "lvchange", "-kn", "vg/snap")
    assert vg.live_report().get_lv("snap").attr.raw == "Vwi-a-tz--"


def test_readonly_reports_cannot_see_the_kernel(sim):
    VolumeGroup("vg", executor=sim.executor()).create_thin_pool("pool", 64 * MiB)
    result = run(sim, "lvs", "--readonly", "--reportformat", "json", "-o",
                 "lv_name,lv_attr,data_percent", "vg")
    assert '{"lv_name":"pool", "lv_attr":"twi-XXtz--", "data_percent":""}' in result.stdout


def test_rename_keeps_pool_and_origin_links(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 64 * MiB)
    vg.create_thin_volume("vol", GiB, pool="pool")
    vg.create_thin_snapshot("snap", "vol")
    vg.rename("pool", "pool2")
    vg.rename("vol", "vol2")
    snap = vg.report().get_lv("snap")
    assert (snap.pool_lv, snap.origin) == ("pool2", "vol2")
    with pytest.raises(AlreadyExists):
        vg.rename("snap", "vol2")
    with pytest.raises(NotFound):
        vg.rename("nope", "other")


def test_removing_a_pool_removes_its_thin_volumes(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 64 * MiB)
    vg.create_thin_volume("a", GiB, pool="pool")
    vg.create_thin_volume("b", GiB, pool="pool")
    result = run(sim, "lvremove", "--force", "vg/pool")
    assert result.stdout == ('  Logical volume "a" successfully removed.\n'
                             '  Logical volume "b" successfully removed.\n'
                             '  Logical volume "pool" successfully removed.\n')
    assert vg.report().lvs == ()


def test_active_volumes_are_not_removed_without_force(sim):
    run(sim, "lvcreate", "-L", "4m", "-n", "t", "vg")
    result = run(sim, "lvremove", "vg/t")
    assert (result.exit_code, result.stderr) == (5, "  Logical volume vg/t not removed.\n")
    assert run(sim, "lvremove", "-y", "vg/t").exit_code == 0


def test_tags_are_kept_sorted_and_unique(sim):
    run(sim, "lvcreate", "-L", "4m", "-n", "t", "--addtag", "zeta", "--addtag", "alpha",
        "--addtag", "alpha", "vg")
    assert report(sim).get_lv("t").tags == ("alpha", "zeta")
    result = run(sim, "lvchange", "--addtag", "mid", "--deltag", "zeta", "vg/t")
    assert result.stdout == "  Logical volume vg/t changed.\n"
    assert report(sim).get_lv("t").tags == ("alpha", "mid")


# -- the command line: parsing and refusals ------------------------------------------------------


@pytest.mark.parametrize("argv, code, stderr", [
    (["lvcreate", "-L", "4097b", "-n", "x", "vg"], 3,
     "  Size is not a multiple of 512. Try using 4096 or 4608.\n"
     "  Invalid argument for --size: 4097b\n  Error during parsing of command line.\n"),
    (["lvcreate", "-L", "0", "-n", "x", "vg"], 3,
     "  --size may not be zero.\n  Run `lvcreate --help' for more information.\n"),
    (["lvcreate", "-L", "-4m", "-n", "x", "vg"], 3,
     "  Size may not be negative.\n  Invalid argument for --size: -4m\n"
     "  Error during parsing of command line.\n"),
    (["lvcreate", "-L", "4m", "-n", "a;b", "vg"], 3,
     "  Logical volume name \"a;b\" is invalid.\n"
     "  Run `lvcreate --help' for more information.\n"),
    (["lvcreate", "-L", "4m", "-n", "-rf", "vg"], 3,
     "  Logical volume name \"-rf\" is invalid.\n"
     "  Run `lvcreate --help' for more information.\n"),
    (["lvcreate", "-L", "4m", "-n", "x_tmeta", "vg"], 3,
     "  Names including \"_tmeta\" are reserved. Please choose a different LV name.\n"
     "  Run `lvcreate --help' for more information.\n"),
    (["lvcreate", "-L", "4m", "-n", "x", "--addtag", "a;b", "vg"], 3,
     "  Invalid argument for --addtag: a;b\n  Error during parsing of command line.\n"),
    (["lvs", "--bogus"], 3, "lvs: unrecognized option '--bogus'\n"
                            "  Error during parsing of command line.\n"),
    (["lvcreate", "-L"], 3, "lvcreate: option requires an argument -- 'L'\n"
                            "  Error during parsing of command line.\n"),
    (["lvs", "--select", "lv_name=x"], 3,
     "  Option --select is not emulated by the LVM simulator.\n"),
    (["lvcreate", "-L", "4m", "-n", "x", "novg"], 5,
     '  Volume group "novg" not found\n  Cannot process volume group novg\n'),
    (["lvm", "frobnicate"], 2, "  No such command 'frobnicate'.  Try 'help'.\n"),
    (["lvcreate", "-L", "9" * 400 + "g", "-n", "x", "vg"], 3,
     "  Size is too big (>=16EiB).\n  Invalid argument for --size: " + "9" * 400 + "g\n"
     "  Error during parsing of command line.\n"),
    (["lvextend", "-L", "16e", "vg/x"], 3,
     "  Size is too big (>=16EiB).\n  Invalid argument for --size: 16e\n"
     "  Error during parsing of command line.\n"),
    (["lvcreate", "-L", "8e", "-n", "x", "vg"], 5,
     "  Volume too large (8.00 EiB) for extent size 4.00 MiB. Upper limit is less than "
     "<16.00 PiB.\n"),
])
def test_refusals_match_lvm(sim, argv, code, stderr):
    result = sim.run(argv)
    assert (result.exit_code, result.stderr) == (code, stderr)


def test_getopt_style_options(sim):
    assert run(sim, "lvcreate", "-L4m", "--name=a", "vg").exit_code == 0
    assert run(sim, "lvcreate", "--type=thin-pool", "-L", "8m", "vg/pool").exit_code == 0
    assert run(sim, "lvcreate", "-V", "1g", "-T", "vg/pool", "-n", "t").exit_code == 0
    assert run(sim, "lvcreate", "-s", "-kn", "-ay", "-n", "c", "vg/t").exit_code == 0
    assert run(sim, "lvchange", "-an", "vg/c").exit_code == 0
    lvs = {lv.name: lv for lv in report(sim).lvs}
    assert set(lvs) == {"a", "pool", "t", "c"} and not lvs["c"].is_active


def test_auto_names_and_percent_extents(sim):
    assert run(sim, "lvcreate", "-l", "50%FREE", "vg").stdout == \
        '  Logical volume "lvol0" created.\n'
    assert report(sim).get_lv("lvol0").size_bytes == 512 * MiB


def test_unknown_programs_are_not_lvm(sim):
    result = sim.run(["rm", "-rf", "/"])
    assert result.exit_code == 127


def test_human_tables_for_operators(sim):
    run(sim, "lvcreate", "-L", "4m", "-n", "t", "vg")
    result = run(sim, "lvs", "vg")
    assert result.stdout.splitlines()[1].split() == ["t", "vg", "-wi-a-----", "4.00m"]
    assert run(sim, "vgs", "--noheadings", "-o", "vg_name,vg_free", "--units", "m",
               "--separator", ":").stdout == "  vg:1020.00m\n"
    assert run(sim, "lvm", "segtypes").stdout.split()[-8:-6] == ["thin-pool", "thin"]


# -- the wrapper on the simulator -----------------------------------------------------------------


def test_one_lvs_process_per_live_report_none_for_an_unchanged_vg(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 64 * MiB)
    before = sim.commands_run
    vg.live_report()
    assert sim.commands_run - before == 1
    vg.report()  # a full report: the PVs, then the LVs
    assert sim.commands_run - before == 3
    vg.report()  # nothing changed: reused
    assert sim.commands_run - before == 3


def test_the_executor_environment_reaches_the_runner(sim):
    VolumeGroup("vg", executor=sim.executor(lvm_system_dir="/etc/x")).report()
    assert sim.last_env["LC_ALL"] == "C" and sim.last_env["LVM_SYSTEM_DIR"] == "/etc/x"


def test_missing_vg_and_lv_errors_are_typed(sim):
    with pytest.raises(NotFound):
        VolumeGroup("nope", executor=sim.executor()).report()
    vg = VolumeGroup("vg", executor=sim.executor())
    with pytest.raises(NotFound):
        vg.delete("ghost")
    with pytest.raises(NotFound):
        vg.create_thin_volume("v", GiB, pool="ghost")
    with pytest.raises(NotFound):
        vg.create_thin_snapshot("s", "ghost")


# -- shared state file and its lock ------------------------------------------------------------------


def test_two_simulators_share_a_state_file(tmp_path):
    state = tmp_path / "lvm.json"
    first, second = LVMSimulator(state), LVMSimulator(str(state))
    first.create_vg("vg", GiB)
    VolumeGroup("vg", executor=first.executor()).create_thin_pool("pool", 64 * MiB)
    assert report(second).get_lv("pool").is_thin_pool
    second.write_data("vg", "pool", 0)  # a pool itself holds no written data
    assert json.loads(state.read_text())["vgs"]["vg"]["lvs"]["pool"]["kind"] == "thin-pool"


def test_concurrent_creates_lose_nothing(tmp_path):
    state = tmp_path / "lvm.json"
    LVMSimulator(state).create_vg("vg", 8 * GiB)

    def create(worker: int) -> None:
        simulator = LVMSimulator(state)  # its own open of the lock file
        for index in range(15):
            result = simulator.run(["lvcreate", "-L", "4m", "-n", f"w{worker}-{index}", "vg"])
            assert result.exit_code == 0, result.stderr

    threads = [threading.Thread(target=create, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(report(LVMSimulator(state)).lvs) == 60


def test_a_command_holds_the_lock_for_its_whole_run(tmp_path, monkeypatch):
    """A second process-like simulator waits until a hung command gave the lock up."""
    import types

    import lvm_driver.simulator.faults as simulator_module
    state = tmp_path / "lvm.json"
    holder, waiter = LVMSimulator(state), LVMSimulator(state)
    holder.create_vg("vg", GiB)
    holder.inject("lvs", hang=True)
    entered, release, order = threading.Event(), threading.Event(), []

    def hang(seconds: float) -> None:  # the injected hang, held open by the test
        entered.set()
        release.wait()
        order.append("holder gave up")

    monkeypatch.setattr(simulator_module, "time", types.SimpleNamespace(sleep=hang))
    hung = threading.Thread(target=lambda: pytest.raises(
        LVMTimeoutError, holder, ["lvs", "vg"], {}, 0.6))
    hung.start()
    assert entered.wait(30)

    def wait_for_the_lock() -> None:
        assert waiter.run(["vgs", "vg"]).exit_code == 0
        order.append("waiter ran")

    second = threading.Thread(target=wait_for_the_lock)
    second.start()
    second.join(0.5)  # room to run, were the lock not held
    release.set()
    hung.join()
    second.join()
    assert order == ["holder gave up", "waiter ran"]


@pytest.mark.parametrize("text, reason", [
    ("{not json", "is not JSON: Expecting property name"),
    ('{"version": 1}', "is not a simulator state"),
    ("[1, 2]", "is not a simulator state"),
    ('{"version": 1, "pvs": {}, "vgs": [], "faults": []}', "is not a simulator state"),
])
def test_a_corrupt_state_file_fails_every_command_and_is_kept(tmp_path, capsys, text, reason):
    state = tmp_path / "lvm.json"
    state.write_text(text)
    simulator = LVMSimulator(state)
    for argv in (["lvs"], ["lvcreate", "-L", "4m", "-n", "t", "vg"], ["lvm", "version"]):
        result = simulator.run(argv)
        assert result.exit_code == 5 and result.stdout == ""
        assert result.stderr.startswith(f"  state file {state} {reason}")
        assert result.stderr.count("\n") == 1
    with pytest.raises(LVMCommandError, match=f"state file {state} {reason}"):
        VolumeGroup("vg", executor=simulator.executor()).report()
    with pytest.raises(SimulatorError, match=reason):
        simulator.state()
    assert main(["--state", str(state), "sim-create-vg", "vg", "1G"]) == 1
    assert main(["--state", str(state), "lvs"]) == 5
    assert capsys.readouterr().err.count(f"{state} {reason}") == 2
    assert state.read_text() == text  # nothing overwritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lvm.json", "lvm.json.lock"]


def test_an_unreadable_state_file_fails_the_command(tmp_path):
    state = tmp_path / "lvm.json"
    state.mkdir()  # open() fails, even for root
    result = LVMSimulator(state).run(["vgs"])
    assert (result.exit_code, result.stderr) == (
        5, f"  Error reading simulator state {state}: Is a directory.\n")
    locked = LVMSimulator(tmp_path / "gone" / "lvm.json").run(["vgs"])
    assert locked.exit_code == 5
    assert locked.stderr.startswith(f"  Error locking simulator state {tmp_path}/gone/")


# -- faults -----------------------------------------------------------------------------------------


def test_injected_failure_is_not_applied_and_is_used_up(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    sim.inject("lvcreate", exit_code=5, stderr="  Internal error: boom.\n")
    with pytest.raises(LVMCommandError, match="Internal error: boom") as info:
        vg.create_thick_volume("t", 4 * MiB)
    assert info.value.exit_code == 5
    assert vg.report().lvs == ()
    vg.create_thick_volume("t", 4 * MiB)  # times=1: the next run is normal


def test_faults_can_repeat_and_target_one_argv(sim):
    sim.inject("lvcreate", times=None, argv_contains="bad")
    for _ in range(3):
        assert run(sim, "lvcreate", "-L", "4m", "-n", "bad", "vg").exit_code == 5
    assert run(sim, "lvcreate", "-L", "4m", "-n", "good", "vg").exit_code == 0
    sim.clear_faults()
    assert run(sim, "lvcreate", "-L", "4m", "-n", "bad", "vg").exit_code == 0


def test_a_hang_becomes_a_timeout(sim):
    sim.inject("lvcreate", hang=True)
    vg = VolumeGroup("vg", executor=sim.executor(timeout_s=0.05))
    with pytest.raises(BackendTimeout):
        vg.create_thick_volume("t", 4 * MiB)
    assert vg.report().find_lv("t") is None


def test_malformed_output_reaches_the_parser(sim):
    sim.inject("lvs", malformed_output=True)
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thick_volume("t", 4 * MiB)
    with pytest.raises(LVMOutputError, match="malformed JSON"):
        vg.report()


def test_crash_after_apply_leaves_the_change(sim):
    sim.inject("lvcreate", fail_after_apply=True, exit_code=139, stderr="")
    vg = VolumeGroup("vg", executor=sim.executor())
    with pytest.raises(LVMCommandError) as info:
        vg.create_thick_volume("t", 4 * MiB)
    assert info.value.exit_code == 139
    assert vg.report().find_lv("t") is not None


def test_a_report_crash_is_retried_by_the_executor(sim):
    sim.inject("lvs", exit_code=139, stderr="")
    executor = sim.executor(retry_delay_s=0)
    VolumeGroup("vg", executor=executor).create_thick_volume("t", 4 * MiB)
    assert VolumeGroup("vg", executor=executor).report().get_lv("t")
    assert executor.commands_run == 4  # lvcreate, pvs, crashed lvs, lvs


def _slept(monkeypatch) -> list[float]:
    """The simulator's sleeps, recorded instead of slept."""
    import types

    import lvm_driver.simulator.faults as simulator_module
    slept: list[float] = []
    monkeypatch.setattr(simulator_module, "time", types.SimpleNamespace(sleep=slept.append))
    return slept


def test_a_slow_command_waits_then_succeeds(sim, monkeypatch):
    slept = _slept(monkeypatch)
    sim.inject("lvcreate", delay_s=7.5)
    vg = VolumeGroup("vg", executor=sim.executor(timeout_s=60))
    vg.create_thick_volume("t", 4 * MiB)  # no error: slow is not failed
    assert slept == [7.5]
    assert vg.report().get_lv("t").size_bytes == 4 * MiB
    vg.create_thick_volume("u", 4 * MiB)  # times=1: used up
    assert slept == [7.5]


def test_a_command_slower_than_its_timeout_is_stopped_unapplied(sim, monkeypatch):
    slept = _slept(monkeypatch)
    sim.inject("lvcreate", delay_s=30, times=None, argv_contains="slow")
    vg = VolumeGroup("vg", executor=sim.executor(timeout_s=2))
    with pytest.raises(LVMTimeoutError):
        vg.create_thick_volume("slow", 4 * MiB)
    vg.create_thick_volume("quick", 4 * MiB)
    assert slept == [2]
    assert vg.report().find_lv("slow") is None and vg.report().find_lv("quick")


@pytest.mark.parametrize("options", [{"delay_s": -1}, {"delay_s": float("nan")},
                                     {"delay_s": True}, {"delay_s": 1, "hang": True},
                                     {"times": 0}])
def test_fault_options_are_checked(sim, options):
    with pytest.raises(SimulatorError):
        sim.inject("lvs", **options)
    assert sim.state()["faults"] == []


@pytest.fixture
def shared(tmp_path) -> tuple[LVMSimulator, Path]:
    state = tmp_path / "lvm.json"
    simulator = LVMSimulator(state)
    simulator.create_vg("vg", GiB)
    assert run(simulator, "lvcreate", "-L", "4m", "-n", "before", "vg").exit_code == 0
    return simulator, state


def test_a_state_read_error_fails_the_command_and_changes_nothing(shared):
    simulator, state = shared
    simulator.inject_state_error("read", command="lvcreate")
    before = state.read_bytes()
    failed = run(simulator, "lvcreate", "-L", "4m", "-n", "t", "vg")
    assert (failed.exit_code, failed.stdout, failed.stderr) == (
        5, "", f"  Error reading simulator state {state}: Input/output error.\n")
    assert state.read_bytes() == before
    assert run(simulator, "lvs", "vg").exit_code == 0  # another command: not failed
    simulator.inject_state_error("read")  # any command
    with pytest.raises(LVMCommandError, match="Error reading simulator state"):
        report(simulator)
    assert run(simulator, "lvcreate", "-L", "4m", "-n", "t", "vg").exit_code == 0  # used up
    assert sorted(lv.name for lv in report(simulator).lvs) == ["before", "t"]
    assert not Path(f"{state}.io-faults").exists()


def test_a_state_write_error_fails_the_change_and_keeps_the_file(shared):
    simulator, state = shared
    simulator.inject_state_error("write", times=2)
    before = state.read_bytes()
    assert run(simulator, "lvs", "vg").exit_code == 0  # writes nothing: not failed
    for argv in (["lvcreate", "-L", "4m", "-n", "t", "vg"], ["lvremove", "-f", "vg/before"]):
        failed = simulator.run(argv)
        assert (failed.exit_code, failed.stderr) == (
            5, f"  Error writing simulator state {state}: Input/output error.\n")
        assert state.read_bytes() == before
    assert sorted(p.name for p in state.parent.iterdir()) == [
        "lvm.json", "lvm.json.lock", "lvm.json.pv-vg"]
    assert [lv.name for lv in report(simulator).lvs] == ["before"]
    assert run(simulator, "lvcreate", "-L", "4m", "-n", "t", "vg").exit_code == 0


def test_state_errors_are_shared_repeatable_and_cleared(shared):
    simulator, state = shared
    other = LVMSimulator(state)  # another process on the same file
    simulator.inject_state_error("read", times=None, argv_contains="vg/before")
    for _ in range(3):
        assert run(other, "lvremove", "-f", "vg/before").exit_code == 5
    assert run(other, "lvs", "vg").exit_code == 0
    other.clear_faults()
    assert run(simulator, "lvremove", "-f", "vg/before").exit_code == 0


def test_state_errors_need_a_state_file_and_an_operation(sim, shared):
    with pytest.raises(SimulatorError, match="no file to fail"):
        sim.inject_state_error("read")
    with pytest.raises(SimulatorError, match="'read', 'write'"):
        shared[0].inject_state_error("lock")


def test_faults_persist_for_other_processes(tmp_path):
    state = tmp_path / "lvm.json"
    operator, driver = LVMSimulator(state), LVMSimulator(state)
    operator.create_vg("vg", GiB)
    operator.inject("lvremove", exit_code=5, stderr="  injected\n")
    assert driver.run(["lvremove", "-f", "vg/x"]).stderr == "  injected\n"
    assert operator.state()["faults"] == []


# -- the module command line -------------------------------------------------------------------------


def test_module_cli_acts_on_the_shared_state(tmp_path, capsys):
    state = str(tmp_path / "lvm.json")
    assert main(["--state", state, "sim-create-vg", "vg", "1G"]) == 0
    assert main(["--state", state, "lvcreate", "--type", "thin-pool", "-L", "64m", "-n",
                 "pool", "vg"]) == 0
    assert main(["--state", state, "lvcreate", "-V", "1g", "-T", "vg/pool", "-n", "mine"]) == 0
    assert main(["--state", state, "sim-write", "vg/mine", "32M"]) == 0
    assert main(["--state", state, "lvcreate", "-n", "mine", "-L", "4m", "vg"]) == 5
    assert main(["--state", state]) == 2
    captured = capsys.readouterr()
    assert 'Logical volume "mine" created.' in captured.out
    assert "already exists" in captured.err
    assert report(LVMSimulator(state)).get_lv("pool").data_percent == 50.0


def test_module_cli_runs_as_a_program(tmp_path):
    state = str(tmp_path / "lvm.json")
    LVMSimulator(state).create_vg("vg", GiB)
    done = subprocess.run([sys.executable, "-m", "lvm_driver.simulator", "--state", state,
                           "vgs", "--noheadings", "-o", "vg_name", "vg"],
                          capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert (done.returncode, done.stdout) == (0, "  vg\n")


# -- wipes, merges and open devices (thick volume clearing, revert to snapshot) ---------------


def test_dd_of_zeros_clears_a_thick_volume_and_is_recorded(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thick_volume("thick", 100 * MiB)
    sim.write_data("vg", "thick", 60 * MiB)
    assert sim.data_bytes("vg", "thick") == 60 * MiB
    vg.zero("thick", 10 * MiB, timeout_s=5)
    assert sim.data_bytes("vg", "thick") == 50 * MiB  # only the first 10 MiB zeroed
    vg.zero("thick", 100 * MiB, timeout_s=5)
    assert sim.data_bytes("vg", "thick") == 0
    assert sim.wipes() == [{"device": "/dev/vg/thick", "bytes": 10 * MiB},
                           {"device": "/dev/vg/thick", "bytes": 100 * MiB}]


def test_dd_speaks_as_dd(sim):
    VolumeGroup("vg", executor=sim.executor()).create_thick_volume("thick", 8 * MiB)
    done = run(sim, "dd", "if=/dev/zero", "of=/dev/vg/thick", "count=5242880", "bs=1M",
               "iflag=count_bytes", "oflag=direct", "conv=fdatasync")
    assert done.exit_code == 0 and done.stderr.startswith("5+0 records in\n5+0 records out\n")
    past_end = run(sim, "dd", "if=/dev/zero", "of=/dev/vg/thick", "count=9", "bs=1M")
    assert past_end.exit_code == 1
    assert past_end.stderr.endswith("dd: error writing '/dev/vg/thick': No space left on "
                                    "device\n")
    missing = run(sim, "dd", "if=/dev/zero", "of=/dev/vg/nothing", "count=1")
    assert (missing.exit_code, missing.stderr) == (
        1, "dd: failed to open '/dev/vg/nothing': No such file or directory\n")


def test_merging_a_thin_snapshot_gives_its_data_to_the_origin(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thin_pool("pool", 400 * MiB)
    vg.create_thin_volume("vol", GiB, pool="pool", tags=("mine",))
    sim.write_data("vg", "vol", 10 * MiB)
    vg.create_thin_snapshot("snap", "vol")
    sim.write_data("vg", "vol", 30 * MiB)
    assert vg.live_report().get_lv("vol").data_percent == 3.91
    result = sim.run(["lvconvert", "--merge", "vg/snap"])
    assert result.exit_code == 0 and "replaced origin vg/vol" in result.stdout
    after = vg.live_report()
    assert after.find_lv("snap") is None
    assert after.get_lv("vol").data_percent == 0.98  # the snapshot's 10 MiB
    assert after.get_lv("vol").tags == ("mine",)  # the origin keeps its own tags
    refused = sim.run(["lvconvert", "--merge", "vg/vol"])
    assert refused.exit_code == 5 and "Command not permitted on LV vg/vol" in refused.stderr


def test_an_open_volume_shows_o_and_refuses_deactivation(sim):
    vg = VolumeGroup("vg", executor=sim.executor())
    vg.create_thick_volume("thick", 8 * MiB)
    sim.set_open("vg", "thick")
    assert vg.live_report().get_lv("thick").attr.device_open is True
    with pytest.raises(LVMCommandError, match="in use"):
        vg.deactivate("thick")
    sim.set_open("vg", "thick", False)
    vg.deactivate("thick")
    assert not vg.live_report().get_lv("thick").is_active
