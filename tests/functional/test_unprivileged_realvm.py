"""The driver as Cinder runs it: an unprivileged user, root only through the root helper.

In the VM lane (``-m realvm``), on the guest's real VG, through the session's Cinder
host (``unprivileged_host``: user ``cinder``, sudo to ``oslo-rootwrap`` only, the
project's rootwrap filters): the driver runs as ``cinder`` in ``unprivileged_side.py``
and reaches root through ``sudo oslo-rootwrap ... privsep-helper`` and the driver's
privileged daemon. Root's own ``lvs``/``pvs`` checks each step from outside.
"""

from __future__ import annotations

import os
import pwd

import pytest

from tests.functional.unprivileged_host import (CONFIG, CONTEXT, GiB, MiB, Host, fill,
                                                head, lv_names, lv_row, read_at, root)

pytestmark = pytest.mark.realvm


@pytest.fixture
def host(unprivileged_host: Host) -> Host:
    return unprivileged_host


def test_the_driver_runs_as_cinder_and_reaches_root_only_through_the_daemon(host: Host):
    who = host.cinder.ok("whoami")
    assert who["uid"] == pwd.getpwnam("cinder").pw_uid != 0
    assert host.cinder.ok("setup") == {"runner": "PrivsepRunner"}
    helpers = root("ps", "-ww", "-eo", "user:12,args", "--no-headers")
    daemons = [line for line in helpers.splitlines()
               if "privsep-helper" in line and CONTEXT in line and "sudo" not in line]
    assert daemons and all(line.split()[0] == "root" for line in daemons), helpers
    assert any(f"--config-file {CONFIG}" in line for line in daemons), daemons


def test_lifecycle_through_the_daemon_as_cinder(host: Host):
    c, vg = host.cinder, host.vg
    c.driver("create_volume", "volume-a", 1)
    row = lv_row(vg, "volume-a")
    assert (row["size"], row["pool"], row["attr"][0]) == (str(GiB), "pool", "V")
    path = c.driver("backend_device_path", "volume-a")
    assert path == f"/dev/{vg}/volume-a"
    fill(path, 0x5A, MiB)
    c.driver("create_snapshot", "snap-a", "volume-a")
    assert lv_row(vg, "snap-a")["origin"] == "volume-a"
    fill(path, 0xA5, MiB)
    c.driver("revert_to_snapshot", "volume-a", "snap-a")
    path = c.driver("backend_device_path", "volume-a")
    assert head(path, MiB) == b"\x5a" * MiB  # the snapshot's data is back
    assert lv_row(vg, "snap-a")["origin"] == "volume-a"  # made anew, same name
    c.driver("create_cloned_volume", "clone-a", "volume-a")
    assert head(c.driver("backend_device_path", "clone-a"), MiB) == b"\x5a" * MiB
    c.driver("extend_volume", "volume-a", 2)
    assert lv_row(vg, "volume-a")["size"] == str(2 * GiB)
    root("lvcreate", "-q", "-T", "-V", "1g", "-n", "operator-thin", f"{vg}/pool")
    c.driver("manage_existing", "volume-m", {"source-name": "operator-thin"})
    assert "volume-m" in lv_names(vg) and "operator-thin" not in lv_names(vg)
    # the thick wipe: data left on the extents must be zero once they are freed
    c.driver("create_volume", "thick-a", 1, extra_specs={"provisioning:type": "thick"})
    start = _first_byte_on_pv(vg, "thick-a", host.pv)
    fill(f"/dev/{vg}/thick-a", 0xAB, 8 * MiB)
    assert read_at(host.pv, start, MiB) == b"\xab" * MiB
    c.driver("delete_volume", "thick-a")
    assert "thick-a" not in lv_names(vg)
    assert read_at(host.pv, start, 16 * MiB).count(0) == 16 * MiB  # volume_clear_size = 16
    for method, name in (("delete_snapshot", "snap-a"), ("delete_volume", "clone-a"),
                         ("delete_volume", "volume-a"), ("delete_volume", "volume-m")):
        c.driver(method, name)
    assert lv_names(vg) == {"pool"}


def _first_byte_on_pv(vg: str, lv: str, pv: str) -> int:
    """Where ``lv``'s first extent starts on ``pv``, in bytes."""
    ranges = root("lvs", "--noheadings", "-o", "seg_pe_ranges", f"{vg}/{lv}").split()
    device, extents = ranges[0].rsplit(":", 1)
    assert os.path.realpath(device) == os.path.realpath(pv), ranges
    pe_start = int(root("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o",
                        "pe_start", pv).strip())
    extent = int(root("vgs", "--noheadings", "--units", "b", "--nosuffix", "-o",
                      "vg_extent_size", vg).strip())
    return pe_start + int(extents.split("-")[0]) * extent


def test_a_refresh_after_an_operators_lvcreate_starts_no_lvm_process(host: Host):
    c, vg = host.cinder, host.vg
    c.ok("refresh")
    c.ok("refresh")
    before = c.ok("refresh")
    assert before["commands"] == 0, before
    root("lvcreate", "-q", "-T", "-V", "1g", "-n", "theirs", f"{vg}/pool")
    after = c.ok("refresh")
    assert "theirs" in after["lvs"]
    assert after["commands"] == 0, after  # the change read through the daemon's fast reads
    assert after["cache"]["misses"] == before["cache"]["misses"] + 1
    assert after["cache"]["parsed"] == before["cache"]["parsed"] + 1
    assert after["cache"]["unparsed"] == before["cache"]["unparsed"]
    pool = after["stats"]["pools"][0]
    assert pool["backend_state"] == "up", pool
    again = c.ok("refresh")
    assert again["commands"] == 0 and again["cache"]["hits"] > after["cache"]["hits"]
    assert again["cache"]["misses"] == after["cache"]["misses"]
    root("lvremove", "-q", "-f", f"{vg}/theirs")


# ---------------------------------------------------------------------------
