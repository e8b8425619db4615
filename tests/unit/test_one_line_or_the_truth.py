"""Issue 24's tracebacks and misleading messages, replayed: each input ends in one
line (no traceback without --debug), and a signal during a change leaves the exit
code and the output saying what happened."""

import json
import os
import signal
import subprocess
import time

import pytest

from driver_kit.cli import COMMANDS, main
from lvm_driver.simulator import LVMSimulator
from tests.unit.test_console_entry import console_script

#: the installed command, its signal handling from the first moment included
CLI = console_script()


def write_conf(tmp_path, *lines):
    path = tmp_path / "driver-kit.conf"
    path.write_text(f"[DEFAULT]\nenabled_backends = b\n[b]\nlvm_backend = simulator\n"
                    f"lvm_simulator_state_file = {tmp_path / 'state.json'}\n"
                    f"volume_group = vg\nlvm_thin_pool_name = pool\n"
                    f"lock_path = {tmp_path / 'locks'}\n"
                    + "".join(f"{line}\n" for line in lines))
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_state_lv_with_extents_of_the_wrong_type_is_one_line_and_kept(capsys, tmp_path):
    conf = write_conf(tmp_path)
    assert run(capsys, "--config-file", conf, "create", "volume-a", "1")[0] == 0
    state_file = tmp_path / "state.json"
    state = json.loads(state_file.read_text())
    state["vgs"]["vg"]["lvs"]["volume-a"]["extents"] = "256"
    state_file.write_text(json.dumps(state))
    before = state_file.read_bytes()
    for argv in (["stats"], ["create", "volume-b", "1"], ["delete", "volume-a"]):
        code, out, err = run(capsys, "--config-file", conf, *argv)
        assert code == 1 and "Traceback" not in err and err.count("\n") == 1
        assert "vgs.vg.lvs.volume-a.extents is '256', not a whole number >= 0" in err
    assert state_file.read_bytes() == before


def test_a_lock_path_made_a_file_after_load_is_one_line(capsys, tmp_path):
    conf = write_conf(tmp_path)
    assert run(capsys, "--config-file", conf, "stats")[0] == 0
    (tmp_path / "locks").write_text("")  # not there at load: made later by someone else
    conf = write_conf(tmp_path, f"lock_path = {tmp_path / 'locks' / 'inner'}")
    code, out, err = run(capsys, "--config-file", conf, "create", "volume-a", "1")
    assert code == 2 and err.count("\n") == 1 and "lock_path" in err


def test_a_refusal_is_in_human_units(capsys, tmp_path):
    conf = write_conf(tmp_path)
    code, out, err = run(capsys, "--config-file", conf, "create", "huge", "8589934592")
    assert code == 3
    assert "e+" not in err
    assert "request of 8,589,934,592 GiB (8 EiB)" in err
    assert "8,589,934,592 GiB (8 EiB) <= 1,900 GiB (1.86 TiB) FAILED by 8,589,932,692 GiB " \
           "(8 EiB)" in err


def test_a_duplicate_says_already_exists(capsys, tmp_path):
    conf = write_conf(tmp_path)
    assert run(capsys, "--config-file", conf, "create", "volume-a", "1")[0] == 0
    code, out, err = run(capsys, "--config-file", conf, "create", "volume-a", "1")
    assert code == 1
    assert err == "error: 'volume-a' already exists in volume group 'vg': nothing was created\n"


def test_an_unexpected_error_is_one_line_and_debug_shows_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(COMMANDS, "stats", lambda driver, args: 1 / 0)
    conf = write_conf(tmp_path)
    code, out, err = run(capsys, "--config-file", conf, "stats")
    assert code == 1
    assert err == ("error: unexpected ZeroDivisionError: division by zero (a bug: --debug "
                   "shows where)\n")
    code, out, err = run(capsys, "--config-file", conf, "--debug", "stats")
    assert code == 1 and "Traceback" in err


def _wait_until_under_way(simulator):
    """Until the delayed command has started: the simulator takes its fault off the
    state file as it starts it (read without the lock, which the command holds)."""
    for _ in range(600):
        with open(simulator.state_file, encoding="utf-8") as handle:
            if not json.load(handle)["faults"]:
                return
        time.sleep(0.05)
    raise AssertionError("the delayed command never started")


def _start(tmp_path, *argv):
    return subprocess.Popen([*CLI, "--config-file", write_conf(tmp_path), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_create_lets_it_complete_and_says_so(tmp_path, signum):
    """The create under way finishes; it prints "created" and exits 0, so a script
    that sees success never meets "already exists" on its retry."""
    assert subprocess.run([*CLI, "--config-file", write_conf(tmp_path), "stats"],
                          capture_output=True).returncode == 0
    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    simulator.inject("lvcreate", delay_s=2.0)
    process = _start(tmp_path, "create", "volume-a", "1")
    _wait_until_under_way(simulator)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    name = signal.Signals(signum).name
    assert process.returncode == 0, err
    assert out == "created thin volume volume-a of 1 GiB in pool pool\n"
    assert err == (f"{name} received: stopping once the step under way is done (a second "
                   f"one stops at once)\n"
                   f"({name} arrived while the change ran; it ran to its end, as reported "
                   f"above)\n")
    assert "volume-a" in simulator.state()["vgs"]["vg"]["lvs"]


def test_a_signal_during_a_create_that_fails_reports_the_failure_first(tmp_path):
    conf = write_conf(tmp_path)
    assert subprocess.run([*CLI, "--config-file", conf, "create", "volume-a", "1"],
                          capture_output=True).returncode == 0
    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    simulator.inject("lvcreate", delay_s=2.0)
    process = _start(tmp_path, "create", "volume-a", "1")
    _wait_until_under_way(simulator)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1 and out == ""
    assert err.splitlines()[1:] == [
        "error: 'volume-a' already exists in volume group 'vg': nothing was created",
        "(SIGTERM arrived while the change ran; it ran to its end, as reported above)"]


def test_a_second_signal_stops_a_change_at_once_and_says_the_outcome_is_unknown(tmp_path):
    assert subprocess.run([*CLI, "--config-file", write_conf(tmp_path), "stats"],
                          capture_output=True).returncode == 0
    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    simulator.inject("lvcreate", delay_s=30.0)
    process = _start(tmp_path, "create", "volume-a", "1")
    _wait_until_under_way(simulator)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=25)
    assert process.returncode == 130 and out == "" and "Traceback" not in err
    assert err.endswith("interrupted (SIGINT) inside the create: whether it was applied is "
                        "not known; look with driver-kit stats\n")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_read_stops_it_in_one_line(tmp_path, signum):
    assert subprocess.run([*CLI, "--config-file", write_conf(tmp_path), "stats"],
                          capture_output=True).returncode == 0
    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    simulator.run(["lvchange", "--addtag", "changed", "vg/pool"])  # the next read is an lvs
    simulator.inject("lvs", delay_s=3.0)
    process = _start(tmp_path, "stats")
    _wait_until_under_way(simulator)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    name = signal.Signals(signum).name
    assert process.returncode == 128 + signum
    assert out == "" and "Traceback" not in err
    assert err.endswith(f"interrupted ({name}): stopped before any change\n")


def test_ctrl_c_at_any_moment_of_a_run_is_never_a_traceback(tmp_path):
    """SIGINT at staggered moments from the start of a create: every run ends in a
    line, and each exit code agrees with the state (0: the volume is there)."""
    conf = write_conf(tmp_path)
    assert subprocess.run([*CLI, "--config-file", conf, "stats"],
                          capture_output=True).returncode == 0
    simulator = LVMSimulator(state_file=str(tmp_path / "state.json"))
    for index, delay in enumerate((0.3, 0.6, 0.9, 1.2, 1.6, 2.2)):
        name = f"volume-{index}"
        process = _start(tmp_path, "create", name, "1")
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        if process.returncode == 0 and out == "":
            continue  # finished before the signal could be sent: nothing to judge
        made = name in simulator.state()["vgs"]["vg"]["lvs"]
        assert (process.returncode == 0) == made, (delay, process.returncode, out, err)
        assert "Traceback" not in err, err
