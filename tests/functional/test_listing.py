"""``list`` and ``show`` on the simulator and on real LVM: every volume and snapshot
the pools count, with its size, pool, provisioning, origin and owner, read from the
VG as LVM has it (the driver's LVs beside an operator's thin LV, thin snapshot and
COW snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

from driver_kit import GiB, MiB
from driver_kit.cli import main


def _config_file(lab, path: Path) -> Path:
    """The lab's backend as an operator's config file for the command."""
    options = lab.overrides(lvm_offer_thick=True)
    path.write_text("[DEFAULT]\nenabled_backends = lab\n\n[lab]\n" + "".join(
        f"{name} = {value}\n" for name, value in options.items()))
    return path


def test_list_and_show_say_what_each_lv_is_and_who_made_it(lab, tmp_path, capsys):
    vg = lab.vg_name
    driver = lab.driver(lvm_offer_thick=True)
    driver.create_volume("vol-thin", 1)
    driver.create_volume("vol-thick", 1, extra_specs={"provisioning:type": "thick"})
    driver.create_snapshot("snap-1", "vol-thin")
    lab.lvm("lvcreate", "-T", "-V", "1g", "-n", "operator-thin", f"{vg}/pool")
    lab.lvm("lvcreate", "-s", "-n", "operator-snap", f"{vg}/operator-thin")
    lab.lvm("lvcreate", "-s", "-L", "100m", "-n", "operator-cow", f"{vg}/vol-thick")
    expected = {
        "operator-cow": ("snapshot", "cow", vg, "vol-thick", "operator", 100 * MiB),
        "operator-snap": ("snapshot", "thin", "pool", "operator-thin", "operator", GiB),
        "operator-thin": ("volume", "thin", "pool", None, "operator", GiB),
        "snap-1": ("snapshot", "thin", "pool", "vol-thin", "driver", GiB),
        "vol-thick": ("volume", "thick", vg, None, "driver", GiB),
        "vol-thin": ("volume", "thin", "pool", None, "driver", GiB)}
    records = driver.backend_list_volumes()
    assert {r.name: (r.kind, r.provisioning, r.pool_name, r.origin, r.owner, r.size_bytes)
            for r in records} == expected
    assert [r.name for r in records] == sorted(expected)

    conf = str(_config_file(lab, tmp_path / "lab.conf"))
    assert main(["--config-file", conf, "list", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [r.to_dict() for r in records]
    assert main(["--config-file", conf, "show", "vol-thick", "-f", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["owner"], shown["snapshots"], shown["size_bytes"]) == (
        "driver", "operator-cow", GiB)
    assert main(["--config-file", conf, "show", "gone", "-f", "json"]) == 4
    assert json.loads(capsys.readouterr().out)["error"]["type"] == "VolumeNotFound"
