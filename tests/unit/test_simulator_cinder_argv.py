"""The simulator reads the argv Cinder's own LVM code (``cinder/brick/local_dev/lvm.py``)
sends, and prints what that code parses: ``--unit`` for ``--units``, ``pvs -o free``,
``--ignoreskippedcluster``, ``lvdisplay -C -o Attr``, field names in any case."""

from __future__ import annotations

import pytest

from driver_kit import GiB
from lvm_driver.simulator import LVMSimulator


@pytest.fixture
def sim() -> LVMSimulator:
    simulator = LVMSimulator()
    simulator.create_vg("cinder-volumes", 4 * GiB)
    return simulator


def out(simulator: LVMSimulator, *argv: str) -> str:
    result = simulator.run(list(argv))
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_pvs_as_cinder_lists_physical_volumes(sim):
    text = out(sim, "pvs", "--noheadings", "--unit=g", "-o", "vg_name,name,size,free",
               "--separator", "|", "--nosuffix", "--ignoreskippedcluster")
    vg, name, size, free = text.strip().split("|")
    assert vg == "cinder-volumes" and name.startswith("/")
    assert float(free) == float(size) > 3.9  # nothing allocated yet


def test_pv_free_falls_as_extents_are_used(sim):
    out(sim, "lvcreate", "-n", "thick", "cinder-volumes", "-L", "1g")
    text = out(sim, "pvs", "--noheadings", "--unit=g", "-o", "size,free", "--separator", ":",
               "--nosuffix")
    size, free = map(float, text.strip().split(":"))
    assert size - free == pytest.approx(1.0, abs=0.01)


def test_lvdisplay_columns_give_the_attr_cinder_reads(sim):
    out(sim, "lvcreate", "-T", "-L", "1g", "cinder-volumes/cinder-volumes-pool")
    out(sim, "lvcreate", "-T", "-V", "1g", "-n", "volume-1", "cinder-volumes/cinder-volumes-pool")
    out(sim, "lvcreate", "--name", "snap-1", "--snapshot", "cinder-volumes/volume-1")
    attr = out(sim, "lvdisplay", "--noheading", "-C", "-o", "Attr", "--readonly",
               "cinder-volumes/volume-1").strip()
    assert attr.startswith("V")  # a thin volume, whose snapshot Cinder's 'o' test misses
    origin = out(sim, "lvdisplay", "--noheading", "-C", "-o", "Origin",
                 "cinder-volumes/snap-1").strip()
    assert origin == "volume-1"


def test_lvdisplay_without_columns_is_refused_not_guessed(sim):
    result = sim.run(["lvdisplay", "cinder-volumes"])
    assert result.exit_code != 0 and "not emulated" in result.stderr


def test_an_ambiguous_option_prefix_is_refused_as_lvm_does(sim):
    result = sim.run(["lvs", "--no", "cinder-volumes"])
    assert result.exit_code == 3 and "ambiguous" in result.stderr


def test_thin_pool_free_as_cinder_computes_it(sim):
    out(sim, "lvcreate", "-T", "-L", "2g", "cinder-volumes/cinder-volumes-pool")
    text = out(sim, "lvs", "--noheadings", "--unit=g", "-o", "size,data_percent",
               "--separator", ":", "--nosuffix", "/dev/cinder-volumes/cinder-volumes-pool")
    size, percent = map(float, text.strip().split(":"))
    assert size == 2.0 and percent == 0.0
