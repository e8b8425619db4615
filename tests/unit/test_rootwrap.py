"""The shipped rootwrap filters allow the start of the driver's privileged daemon and
nothing else, proven with oslo.rootwrap's own matcher (``load_filters`` +
``match_filter``), as ``cinder-rootwrap`` decides; and every command the driver ran
in this test session has its entrypoint in that daemon."""

from __future__ import annotations

from pathlib import Path

import pytest
from oslo_rootwrap import filters as rootwrap_filters
from oslo_rootwrap import wrapper

from lvm_driver.commands import lvm_argv
from lvm_driver.privileged import CONTEXT_NAME
from tests.command_recorder import RECORDED

REPO = Path(__file__).resolve().parents[2]
OURS = REPO / "etc" / "driver-kit" / "rootwrap.d"
EXEC_DIRS = ["/sbin", "/usr/sbin", "/bin", "/usr/bin"]
START = ("privsep-helper", "--config-file", "/etc/cinder/cinder.conf", "--privsep_context",
         CONTEXT_NAME, "--privsep_sock_path", "/tmp/tmpk2x9_a1b/privsep.sock")
ENV = ("env", "LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1")


def allowed(filter_list: list, argv: tuple[str, ...]) -> bool:
    """What cinder-rootwrap decides for ``argv`` (a missing executable aside)."""
    try:
        wrapper.match_filter(filter_list, list(argv), exec_dirs=EXEC_DIRS)
    except wrapper.FilterMatchNotExecutable:
        return True
    except wrapper.NoFilterMatched:
        return False
    return True


def cinder_rootwrap() -> list:
    """The filters cinder-rootwrap builds from our directory (its own rules included)."""
    return wrapper.load_filters([str(OURS)])


def our_lines() -> list:
    """The filters of our file alone: oslo.rootwrap's built-in privsep-helper rule off."""
    built_in = [f for f in cinder_rootwrap() if f.name == "privsep-helper"]
    assert len(built_in) == 1 and type(built_in[0]) is rootwrap_filters.CommandFilter
    return [f for f in cinder_rootwrap() if f.name != "privsep-helper"]


def test_the_file_holds_one_line_the_privsep_helper_start_of_this_context() -> None:
    lines = our_lines()
    assert [(type(f).__name__, f.name, f.exec_path) for f in lines] == [
        ("RegExpFilter", "lvm_driver_privsep", "privsep-helper")]
    assert allowed(lines, START)
    assert allowed(lines, (*START[:2], "/etc/driver-kit/privileged.conf", *START[3:]))


def _variants() -> list[tuple[str, ...]]:
    """The helper start with one argument changed, one added, one dropped."""
    start = list(START)
    changed = {2: ["/etc/../tmp/evil.conf", "/etc/cinder/../../tmp/x.conf", "/tmp/evil.conf",
                   "/etc/cinder/cinder.conf\n", "etc/cinder/cinder.conf", "/etc/ci nder.conf"],
               4: ["os_brick.privileged.default", "cinder.privsep.sys_admin_pctxt",
                   "lvm_driverXprivileged.default", f"{CONTEXT_NAME}\n", f"{CONTEXT_NAME}x"],
               6: ["/tmp/../etc/shadow", "/var/tmp/privsep.sock", "/tmp/a\n"]}
    out = []
    for index, values in changed.items():
        for value in values:
            out.append(tuple(start[:index] + [value] + start[index + 1:]))
    out.append((*START, "--log-file", "/etc/passwd"))
    out.append(START[:-2])
    out.append(("privsep-helper", "--config-dir", "/etc/cinder", *START[3:]))
    return out


@pytest.mark.parametrize("argv", _variants(), ids=repr)
def test_our_line_refuses_any_other_helper_start(argv: tuple[str, ...]) -> None:
    assert not allowed(our_lines(), argv)


#: what the filters shipped before allowed (tests/unit/test_rootwrap.py's workload and the
#: security review of issue 20): none of it reaches the root helper any more
OLD = [
    (*ENV, "lvs", "--reportformat", "json", "--units", "b", "--nosuffix", "-o", "lv_name",
     "othervg"),
    (*ENV, "lvs", "--readonly", "--reportformat", "json", "--units", "b", "--nosuffix",
     "-o", "lv_name", "dkvg"),
    (*ENV, "LVM_SYSTEM_DIR=/tmp/x", "pvs", "--readonly", "--reportformat", "json", "-o",
     "pv_name"),
    (*ENV, "lvcreate", "--type", "thin", "--virtualsize", "1073741824b", "--thinpool",
     "pool", "--name", "v", "--yes", "othervg"),
    (*ENV, "lvremove", "--force", "othervg/lv"),
    (*ENV, "lvremove", "--force", "dkvg/volume-a"),
    (*ENV, "lvrename", "debian-vg", "root", "gone"),
    (*ENV, "lvcreate", "--snapshot", "--setactivationskip", "y", "--name", "s", "--yes",
     "debian-vg/root"),
    (*ENV, "lvextend", "--size", "512b", "dkvg/v"),
    (*ENV, "lvchange", "--activate", "n", "dkvg/v"),
    (*ENV, "lvconvert", "--merge", "dkvg/s"),
    (*ENV, "lvm", "segtypes"),
    ("env", "HOME=/dev/null", "LC_ALL=C", "LVM_SUPPRESS_FD_WARNINGS=1",
     "LVM_SYSTEM_DIR=/tmp/attacker", "lvm"),
    ("lvm",), ("lvm", "pvcreate", "/dev/sdb"), ("vgremove", "-f", "dkvg"),
    ("dd", "if=/dev/zero", "of=/dev/dkvg/v", "count=1", "bs=1M", "iflag=count_bytes",
     "oflag=direct", "conv=fdatasync"),
    ("dd", "if=/dev/zero", "of=/dev/./sda", "count=1", "bs=1M", "iflag=count_bytes",
     "oflag=direct", "conv=fdatasync"),
    ("dd", "if=/dev/zero", "of=/dev/../etc/passwd", "count=1", "bs=1M",
     "iflag=count_bytes", "oflag=direct", "conv=fdatasync"),
    ("sh", "-c", "lvs"), ("env", "privsep-helper", *START[1:]),
]


@pytest.mark.parametrize("argv", OLD, ids=repr)
def test_cinder_rootwrap_refuses_what_the_old_filters_allowed(argv: tuple[str, ...]) -> None:
    assert not allowed(cinder_rootwrap(), argv)


def test_oslo_rootwrap_itself_lets_any_privsep_helper_start_through() -> None:
    """Not ours to close: oslo.rootwrap adds a rule allowing ``privsep-helper`` with any
    arguments to every filter set (wrapper.load_filters), so the service user can start
    the daemon with a config file of its choice. The daemon itself refuses a config
    file that is not root's alone (tests/unit/test_privileged_config.py)."""
    for argv in _variants():
        assert allowed(cinder_rootwrap(), argv)


def test_every_command_the_tests_ran_is_served() -> None:
    """Runs last (tests/command_recorder.py): every command the driver ran in the whole
    session maps to a daemon entrypoint whose builder gives that very argv back."""
    if not RECORDED:
        pytest.skip("no driver command was recorded in this session")
    unserved = {}
    for argv, test in RECORDED.items():
        try:
            lvm_argv.parse(argv)
        except ValueError as exc:
            unserved[argv] = (test, str(exc))
    assert unserved == {}, f"{len(unserved)} of {len(RECORDED)} commands have no entrypoint"
    operations = sorted({lvm_argv.parse(argv)[0] for argv in RECORDED})
    print(f"\nprivsep: {len(RECORDED)} distinct commands, all served, by {len(operations)} "
          f"entrypoints: {', '.join(operations)}")
