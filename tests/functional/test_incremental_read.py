"""The incremental metadata read against ``lvs --readonly`` on the same VG, over a
random (seeded) sequence of an operator's commands, and the driver's reads after
its own creates parsing only what changed. On the simulator everywhere, on real
LVM in the VM lane (about 20 LVM commands and as many ``lvs``)."""

from __future__ import annotations

import random

from lvm_driver.read import vg_metadata
from lvm_driver.read.report import load_rows, parse_lvs_report
from lvm_driver.read.report_cache import ReportCache, parse_pvs_report, sources_of
from lvm_driver.read.vg_incremental import IncrementalReader
from lvm_driver.run.executor import LVMCommandError

SEED = 25
STEPS = 18


def _fields(report):
    return ((report.vg_size_bytes, report.vg_free_bytes, report.extent_size_bytes),
            [(lv.name, lv.size_bytes, lv.attr.raw, lv.pool_lv, lv.origin, lv.tags)
             for lv in report.lvs])


def _command(rng: random.Random, vg: str, names: list[str]) -> list[str]:
    """An operator's command on the thin pool's volumes (some refused by LVM)."""
    kind = rng.choice(["thin", "thin", "snapshot", "extend", "tag", "remove", "rename"])
    new = f"op{rng.randrange(1000)}"
    pick = rng.choice(names) if names else new
    return {
        "thin": ["lvcreate", "-T", "-V", f"{rng.randint(1, 8) * 16}m", "-n", new, f"{vg}/pool"],
        "snapshot": ["lvcreate", "-s", "-n", new, f"{vg}/{pick}"],
        "extend": ["lvextend", "-L", "+16m", f"{vg}/{pick}"],
        "tag": ["lvchange", "--addtag", f"t{rng.randrange(3)}", f"{vg}/{pick}"],
        "remove": ["lvremove", "-f", f"{vg}/{pick}"],
        "rename": ["lvrename", vg, pick, new],
    }[kind]


def test_random_operator_commands_read_incrementally_as_lvs_reads_them(lab):
    cache = ReportCache(sources_of(lab.executor), parse_metadata=True)
    cache.learn(parse_pvs_report(lab.lvm(*lab.vg.pvs_argv()).stdout, lab.vg_name))
    reader = IncrementalReader()
    rng = random.Random(SEED)
    differences, names = [], []
    for step in range(STEPS):
        argv = _command(rng, lab.vg_name, names)
        try:
            lab.lvm(*argv)
        except LVMCommandError:
            continue  # refused (a name taken, a snapshot's snapshot): nothing changed
        stdout = lab.lvm(*lab.vg.report_argv()).stdout
        expected = parse_lvs_report(stdout, lab.vg_name)
        names = [row["lv_name"] for row in load_rows(stdout, "lv")
                 if row["lv_name"] != "pool"]
        fingerprint = cache.fingerprint()
        read = vg_metadata.report_from_pvs(fingerprint, lab.vg_name,
                                           read=cache.sources.read_block,
                                           build=reader.report)
        if _fields(read) != _fields(expected):
            differences.append((step, argv, _fields(read), _fields(expected)))
    assert differences == []
    assert reader.stats.incremental >= STEPS // 3


def test_the_drivers_read_after_its_own_create_parses_only_what_changed(lab):
    driver = lab.driver(lvm_metadata_parse=True, lvm_read_session=False)
    driver.get_volume_stats(refresh=True)
    for index in range(4):
        driver.create_volume(f"volume-{index}", 1)
    stats = driver.vg.report_cache_stats
    # each create's admission read after the one before it: only the new LV parsed
    assert stats.parsed >= 3
    assert stats.incremental == stats.parsed - 1
    assert {f"volume-{index}" for index in range(4)} <= {
        lv.name for lv in driver.vg.report().lvs}
