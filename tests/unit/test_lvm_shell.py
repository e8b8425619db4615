"""The read session: LVM's reports through one long-lived lvm shell (lvm_driver.run.shell).

Most tests run the real ``LVMShell`` against the simulator's shell mode
(``python -m lvm_driver.simulator --state FILE lvm``, a process of its own);
``TestRealLVM`` runs a real ``lvm`` shell on a VG restored on a loop device
(root only).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from driver_kit import GiB
from lvm_driver.commands.lvm import VolumeGroup
from lvm_driver.run.executor import (CommandResult, LVMExecutor, LVMNotFoundError,
                                     LVMTimeoutError, LVMVolumeGroupNotFoundError, ProcessRunner)
from lvm_driver.run.shell import SHELL_SETTINGS, shell_config_dir
from lvm_driver.simulator import LVMSimulator
from lvm_driver.simulator.shell_mode import document

VG = "dkvg"


@pytest.fixture
def sim(tmp_path: Path) -> LVMSimulator:
    simulator = LVMSimulator(state_file=tmp_path / "state.json")
    simulator.create_vg(VG, 8 * GiB)
    for argv in (["lvcreate", "--type", "thin-pool", "--size", "4g", "--name", "pool", VG],
                 ["lvcreate", "--type", "thin", "--virtualsize", "1g", "--thinpool", "pool",
                  "--name", "volume-a", "--addtag", "t1", VG]):
        assert simulator.run(argv).exit_code == 0
    return simulator


@pytest.fixture
def executors(sim: LVMSimulator):
    """An executor with a read session and one without, on the same simulator."""
    made = []

    def make(**kwargs) -> LVMExecutor:
        executor = LVMExecutor(runner=sim, timeout_s=30, **kwargs)
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.close()


def _report(executor: LVMExecutor, target: str = VG) -> CommandResult:
    argv = VolumeGroup(VG, executor=executor).report_argv()[:-1] + [target]
    return executor.run(argv, readonly=True)


def _wait_for(predicate, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: not Path(f"/proc/{pid}").exists()
              or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2], "the kill")


class TestThroughTheSimulatorShell:
    def test_a_report_is_what_a_fresh_process_prints_and_starts_no_process(self, executors):
        shell, fresh = executors(read_session=True), executors()
        first = _report(shell)
        assert first.stdout == _report(fresh).stdout
        assert json.loads(first.stdout)["report"][0]["lv"][1]["lv_tags"] == "t1"
        assert (shell.commands_run, shell.shell_commands_run) == (1, 1)  # the shell's start
        for _ in range(3):
            assert _report(shell).stdout == first.stdout
        assert (shell.commands_run, shell.shell_commands_run) == (1, 4)
        assert shell.history == (shell.session.shell.argv,)

    def test_writes_start_their_own_process(self, executors):
        shell = executors(read_session=True)
        _report(shell)
        shell.run(["lvcreate", "--type", "thin", "--virtualsize", "1g", "--thinpool", "pool",
                   "--name", "volume-b", VG], readonly=False)
        assert (shell.commands_run, shell.shell_commands_run) == (2, 1)
        assert "volume-b" in _report(shell).stdout  # the write is seen by the next read

    def test_errors_are_typed_as_for_fresh_processes(self, executors):
        shell, fresh = executors(read_session=True), executors()
        for target, error in (("nosuchvg", LVMVolumeGroupNotFoundError),
                              (f"{VG}/nosuchlv", LVMNotFoundError)):
            caught = []
            for executor in (shell, fresh):
                with pytest.raises(error) as info:
                    _report(executor, target)
                caught.append(info.value)
            assert type(caught[0]) is type(caught[1])
            assert (caught[0].exit_code, caught[0].stderr) == \
                (caught[1].exit_code, caught[1].stderr)
        assert shell.shell_commands_run == 2 and shell.commands_run == 1

    def test_a_shell_killed_while_idle_is_restarted_by_the_next_read(self, executors):
        shell = executors(read_session=True)
        _report(shell)
        _kill(shell.session.shell.pid)
        assert "volume-a" in _report(shell).stdout
        assert (shell.commands_run, shell.shell_commands_run) == (2, 2)  # a new shell

    def test_a_shell_killed_mid_command_gives_the_read_to_a_fresh_process(self, executors, sim):
        shell = executors(read_session=True)
        _report(shell)
        pid = shell.session.shell.pid
        sim.inject("lvs", delay_s=30)
        results = []
        reader = threading.Thread(target=lambda: results.append(_report(shell)))
        reader.start()
        # the shell holds the state's lock while slow: read the file itself
        _wait_for(lambda: not json.loads(Path(sim.state_file).read_text())["faults"],
                  "the shell to meet the slow lvs")
        _kill(pid)
        reader.join(30)
        assert "volume-a" in results[0].stdout
        assert "volume-a" in _report(shell).stdout
        assert shell.session.shell.pid not in (None, pid)

    def test_a_hung_command_times_out_and_the_next_read_gets_a_new_shell(self, executors, sim):
        shell = executors(read_session=True)
        _report(shell)
        pid = shell.session.shell.pid
        sim.inject("lvs", hang=True)
        argv = VolumeGroup(VG, executor=shell).report_argv()
        with pytest.raises(LVMTimeoutError, match="0.5 s"):
            shell.run(argv, readonly=True, timeout_s=0.5)
        assert not Path(f"/proc/{pid}").exists() or shell.session.shell.pid is None
        assert "volume-a" in _report(shell).stdout
        assert shell.commands_run == 2 and shell.session.shell.pid != pid

    def test_every_max_commands_reads_a_new_shell_starts(self, executors):
        shell = executors(read_session=True, session_max_commands=2)
        for _ in range(5):
            _report(shell)
        assert (shell.commands_run, shell.shell_commands_run) == (3, 5)

    def test_a_shell_whose_memory_grew_past_the_limit_is_replaced(self, executors):
        shell = executors(read_session=True)
        _report(shell)  # its memory is measured after its first report
        shell.session.shell.max_rss_growth_bytes = -1  # any size is too much
        for _ in range(16):  # ...and again every 16 reports: then it is stopped
            _report(shell)
        assert shell.session.shell.pid is None
        _report(shell)
        assert (shell.commands_run, shell.shell_commands_run) == (2, 18)

    def test_reads_from_many_threads_share_one_shell(self, executors):
        shell = executors(read_session=True)
        expected = _report(shell).stdout
        outputs: list[str] = []

        def read() -> None:
            for _ in range(5):
                outputs.append(_report(shell).stdout)

        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert outputs == [expected] * 20
        assert shell.commands_run == 1

    def test_a_forked_child_starts_its_own_shell(self, executors):
        shell = executors(read_session=True)
        _report(shell)
        parent_pid = shell.session.shell.pid
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through the pipe
            code = 1
            try:
                ok = "volume-a" in _report(shell).stdout
                os.write(write_end, json.dumps([ok, shell.session.shell.pid]).encode())
                shell.close()
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            ok, child_shell_pid = json.loads(pipe.read())
        assert os.waitpid(child, 0)[1] == 0
        assert ok and child_shell_pid not in (None, parent_pid)
        assert shell.session.shell.pid == parent_pid  # the parent's shell untouched
        assert "volume-a" in _report(shell).stdout and shell.commands_run == 1


SCRIPTED_SHELL = """\
import json, os, sys
answers = json.loads(sys.argv[1])
out = os.fdopen(int(os.environ["LVM_REPORT_FD"]), "w")
for number, line in enumerate(sys.stdin):
    answer = answers[min(number, len(answers) - 1)]
    if answer is None:
        sys.exit(1)
    out.write(answer)
    out.flush()
"""


class ScriptedShellRunner:
    """Fresh processes on the simulator; as its shell, a script printing ``answers``."""

    def __init__(self, sim: LVMSimulator, *answers: str | None, argv=None):
        self.sim = sim
        self.answers = list(answers)
        self.argv = argv
        self.starts = 0

    def __call__(self, argv, env, timeout_s):
        return self.sim(argv, env, timeout_s)

    def shell_command(self, env):
        self.starts += 1
        if self.argv is not None:
            return self.argv, True
        return [sys.executable, "-c", SCRIPTED_SHELL, json.dumps(self.answers)], True


class TestProtocolFaults:
    def test_garbage_on_the_report_channel_restarts_the_shell(self, sim):
        good = document(sim.run(VolumeGroup(VG, executor=sim.executor()).report_argv()))
        runner = ScriptedShellRunner(sim, good, "Segmentation fault (core dumped)\n")
        executor = LVMExecutor(runner=runner, read_session=True, timeout_s=30)
        try:
            first = _report(executor)
            second = _report(executor)  # garbage: answered by a fresh process
            assert first.stdout == second.stdout
            assert (runner.starts, executor.shell_commands_run) == (1, 1)
            _report(executor)
            assert (runner.starts, executor.shell_commands_run) == (2, 2)
        finally:
            executor.close()

    def test_no_shell_means_fresh_processes_and_one_warning(self, sim, caplog):
        runner = ScriptedShellRunner(sim, argv=[sys.executable, "-c", "import sys; sys.exit(3)"])
        executor = LVMExecutor(runner=runner, read_session=True, timeout_s=30)
        executor.session.retry_s = 0  # every read tries again (and fails again)
        caplog.set_level(logging.WARNING, logger="lvm_driver.run.shell")
        try:
            for _ in range(3):
                assert "volume-a" in _report(executor).stdout
        finally:
            executor.close()
        assert executor.shell_commands_run == 0 and runner.starts == 3
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                    and r.name.startswith("lvm_driver.")]  # not another test's threads
        assert len(warnings) == 1 and "fresh processes" in warnings[0].getMessage()

    def test_an_argument_the_shell_would_split_runs_as_a_fresh_process(self, executors):
        shell = executors(read_session=True)
        with pytest.raises(LVMVolumeGroupNotFoundError):
            shell.run(["lvs", "--reportformat", "json", "no such vg"], readonly=True)
        assert (shell.commands_run, shell.shell_commands_run) == (1, 0)


def test_the_private_config_mirrors_the_operators_and_adds_only_the_shell_settings(tmp_path):
    system = tmp_path / "etc-lvm"
    (system / "profile").mkdir(parents=True)
    (system / "lvm.conf").write_text("devices { filter = [ \"a|.*|\" ] }\n")
    (system / "lvmlocal.conf").write_text("local { system_id = \"host-1\" }\n")
    before = {p.name: p.read_text() for p in system.iterdir() if p.is_file()}
    private = Path(shell_config_dir(str(system)))
    try:
        assert (private / "lvm.conf").resolve() == system / "lvm.conf"
        assert (private / "profile").resolve() == system / "profile"
        assert (private / "lvmlocal.conf").read_text() == \
            before["lvmlocal.conf"] + "\n" + SHELL_SETTINGS
        assert {p.name: p.read_text() for p in system.iterdir() if p.is_file()} == before
    finally:
        import shutil
        shutil.rmtree(private)


def test_the_shell_is_started_directly_with_an_inherited_descriptor():
    assert ProcessRunner().shell_command({}) == (["lvm"], True)


# ---------------------------------------------------------------------------
# Real LVM: a VG restored on a loop device (tests/benchmarks/realvg.py), root only


@pytest.fixture(scope="module")
def real_vg():
    if os.geteuid() != 0:
        pytest.skip("a real lvm shell on a loop device needs root")
    if not Path("/dev/loop-control").exists():
        pytest.skip("no loop devices here")
    from tests.benchmarks.realvg import BenchmarkSetupError, RealVG
    vg = RealVG("dkshellvg")
    try:
        vg.open()
        vg.restore(20)
    except BenchmarkSetupError as exc:
        vg.close()
        pytest.skip(f"cannot build a real VG: {exc}")
    try:
        yield vg
    finally:
        vg.close()


class TestRealLVM:
    def _executor(self, vg, **kwargs) -> LVMExecutor:
        return LVMExecutor(lvm_system_dir=str(vg.conf_dir), timeout_s=60, **kwargs)

    def test_reports_and_errors_match_fresh_lvm_processes(self, real_vg):
        shell, fresh = self._executor(real_vg, read_session=True), self._executor(real_vg)
        try:
            argv = VolumeGroup(real_vg.vg_name, executor=shell).report_argv()
            ours, theirs = shell.run(argv, readonly=True), fresh.run(argv, readonly=True)
            assert ours.stdout == theirs.stdout and ours.stderr == theirs.stderr
            assert len(json.loads(ours.stdout)["report"][0]["lv"]) == 21
            vgs = VolumeGroup(real_vg.vg_name, executor=shell).vg_info()
            assert vgs == VolumeGroup(real_vg.vg_name, executor=fresh).vg_info()
            for target, error in (("nosuchvg", LVMVolumeGroupNotFoundError),
                                  (f"{real_vg.vg_name}/nosuchlv", LVMNotFoundError)):
                caught = []
                for executor in (shell, fresh):
                    with pytest.raises(error) as info:
                        executor.run([*argv[:-1], target], readonly=True)
                    caught.append(info.value)
                assert (caught[0].exit_code, caught[0].stderr) == \
                    (caught[1].exit_code, caught[1].stderr)
            assert (shell.commands_run, shell.shell_commands_run) == (1, 4)
        finally:
            shell.close()

    def test_the_shell_runs_without_aio_and_writes_no_history(self, real_vg, tmp_path,
                                                             monkeypatch):
        home = tmp_path / "home"
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        # what the session prevents: LVM's shell writes $HOME/.lvm_history after a command
        env = {**real_vg.env(), "HOME": str(home)}
        subprocess.run(["lvm"], input="version\nexit\n", env=env, capture_output=True,
                       text=True, check=True, timeout=60)
        assert (home / ".lvm_history").exists()
        (home / ".lvm_history").unlink()
        shell = self._executor(real_vg, read_session=True)
        try:
            argv = VolumeGroup(real_vg.vg_name, executor=shell).report_argv()
            shell.run(argv, readonly=True)
            pid = shell.session.shell.pid
            environ = dict(item.split("=", 1) for item in Path(
                f"/proc/{pid}/environ").read_text().split("\0") if "=" in item)
            assert environ["HOME"] == "/dev/null"
            config = Path(environ["LVM_SYSTEM_DIR"])
            assert "use_aio = 0" in (config / "lvmlocal.conf").read_text()
            assert (config / "lvm.conf").resolve() == Path(real_vg.lvm_conf)
            shell.run(argv, readonly=True)
        finally:
            shell.close()
        assert list(home.iterdir()) == []
        assert not config.exists()  # the private config goes with the shell

    def test_a_killed_real_shell_is_replaced(self, real_vg):
        shell = self._executor(real_vg, read_session=True)
        try:
            argv = VolumeGroup(real_vg.vg_name, executor=shell).report_argv()
            expected = shell.run(argv, readonly=True).stdout
            _kill(shell.session.shell.pid)
            assert shell.run(argv, readonly=True).stdout == expected
            assert shell.commands_run == 2 and shell.shell_commands_run == 2
        finally:
            shell.close()
