"""LVMExecutor: environment, argv-only, retries, timeouts, error typing, counting."""

from __future__ import annotations

import json
import pickle
import sys
import threading
from pathlib import Path

import pytest

from driver_kit.exceptions import AlreadyExists, BackendError, BackendTimeout, NotFound
from lvm_driver.run.executor import (
    CommandResult, LVMAlreadyExistsError, LVMCommandError, LVMError, LVMExecutor,
    LVMNotFoundError, LVMTimeoutError, LVMVolumeGroupNotFoundError, ProcessRunner,
)

DATA = Path(__file__).parent / "data" / "lvm"


class FakeRunner:
    """Answers each call with the next scripted result; records what it got."""

    def __init__(self, *results: CommandResult | int | Exception):
        self.results = list(results)
        self.calls: list[tuple[list[str], dict[str, str], float]] = []

    def __call__(self, argv, env, timeout_s):
        self.calls.append((argv, env, timeout_s))
        result = self.results.pop(0) if self.results else 0
        if isinstance(result, Exception):
            raise result
        if isinstance(result, int):
            return CommandResult(argv, result, "", "" if result == 0 else "  boom\n")
        return result


def fail(code: int, stderr: str) -> CommandResult:
    return CommandResult(["lvx"], code, "", stderr)


# -- environment and argv ----------------------------------------------------------


def test_environment_is_inherited_plus_lvm_variables(monkeypatch):
    monkeypatch.setenv("DK_TEST_MARKER", "kept")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.delenv("LVM_SYSTEM_DIR", raising=False)
    runner = FakeRunner()
    LVMExecutor(runner=runner).run(["lvs"], readonly=True)
    env = runner.calls[0][1]
    assert env["DK_TEST_MARKER"] == "kept"
    assert env["LC_ALL"] == "C"  # overrides the caller's locale: messages stay parseable
    assert env["LVM_SUPPRESS_FD_WARNINGS"] == "1"
    assert "LVM_SYSTEM_DIR" not in env


def test_lvm_system_dir_is_set_when_configured():
    runner = FakeRunner()
    LVMExecutor(runner=runner, lvm_system_dir="/etc/lvm-dk").run(["lvs"], readonly=True)
    assert runner.calls[0][1]["LVM_SYSTEM_DIR"] == "/etc/lvm-dk"


@pytest.mark.parametrize("argv", ["lvs --all", b"lvs"])
def test_a_shell_string_is_refused(argv):
    runner = FakeRunner()
    with pytest.raises(TypeError, match="never a shell string"):
        LVMExecutor(runner=runner).run(argv, readonly=True)
    assert runner.calls == []


@pytest.mark.parametrize("argv, error", [
    ([], ValueError), (["lvs", None], TypeError), (["lvs", 3], TypeError),
    (["lvs", "vg\0x"], ValueError),
])
def test_malformed_argv_is_refused_before_running(argv, error):
    runner = FakeRunner()
    with pytest.raises(error):
        LVMExecutor(runner=runner).run(argv, readonly=True)
    assert runner.calls == []


def test_timeout_is_passed_per_command():
    runner = FakeRunner()
    executor = LVMExecutor(runner=runner, timeout_s=7.5)
    executor.run(["lvs"], readonly=True)
    executor.run(["lvs"], readonly=True, timeout_s=0.25)
    assert [call[2] for call in runner.calls] == [7.5, 0.25]


def test_constructor_does_no_io_and_checks_its_arguments():
    runner = FakeRunner()
    executor = LVMExecutor(runner=runner)
    assert runner.calls == [] and executor.commands_run == 0
    for kwargs in ({"timeout_s": 0}, {"timeout_s": float("nan")}, {"read_retries": -1},
                   {"read_retries": 1.5}, {"lvm_system_dir": ""}, {"retry_delay_s": -1}):
        with pytest.raises(ValueError):
            LVMExecutor(runner=runner, **kwargs)


# -- retries -------------------------------------------------------------------------


def test_reads_are_retried_on_exit_code_139():
    runner = FakeRunner(fail(139, ""), fail(139, ""), CommandResult(["lvs"], 0, "ok", ""))
    executor = LVMExecutor(runner=runner, read_retries=2, retry_delay_s=0)
    assert executor.run(["lvs"], readonly=True).stdout == "ok"
    assert executor.commands_run == 3


def test_reads_give_up_after_read_retries():
    runner = FakeRunner(fail(139, ""), fail(139, ""), fail(139, ""), 0)
    executor = LVMExecutor(runner=runner, read_retries=2, retry_delay_s=0)
    with pytest.raises(LVMCommandError) as info:
        executor.run(["lvs"], readonly=True)
    assert info.value.exit_code == 139
    assert executor.commands_run == 3


def test_writes_are_never_retried():
    runner = FakeRunner(fail(139, ""), 0)
    executor = LVMExecutor(runner=runner, read_retries=5, retry_delay_s=0)
    with pytest.raises(LVMCommandError):
        executor.run(["lvcreate", "-n", "x"], readonly=False)
    assert executor.commands_run == 1


def test_other_failures_of_reads_are_not_retried():
    runner = FakeRunner(fail(5, "  Volume group \"vg\" not found\n"), 0)
    executor = LVMExecutor(runner=runner, retry_delay_s=0)
    with pytest.raises(LVMVolumeGroupNotFoundError):
        executor.run(["lvs", "vg"], readonly=True)
    assert executor.commands_run == 1


# -- error typing -----------------------------------------------------------------------


@pytest.mark.parametrize("code, stderr, expected", [
    (5, '  Failed to find logical volume "vg/x"\n', LVMNotFoundError),
    (5, '  Volume group "vg" not found\n  Cannot process volume group vg\n',
     LVMVolumeGroupNotFoundError),
    (5, "  Pool nopool not found in Volume group vg.\n", LVMNotFoundError),
    (5, '  Existing logical volume "x" not found in volume group "vg"\n', LVMNotFoundError),
    (5, "  Logical volume x not found in volume group vg.\n", LVMNotFoundError),
    (5, "  Snapshot origin LV x not found in Volume group vg.\n", LVMNotFoundError),
    (5, '  Logical Volume "x" already exists in volume group "vg"\n', LVMAlreadyExistsError),
    (5, "  A volume group called vg already exists.\n", LVMAlreadyExistsError),
    (5, '  Volume group "vg" has insufficient free space (3 extents): 9 required.\n',
     LVMCommandError),
    # "not found" only counts with LVM's failure code, not on a bad command line
    (3, "modprobe: FATAL: Module dm-thin-pool not found in directory\n", LVMCommandError),
    (1, '  Failed to find logical volume "vg/x"\n', LVMCommandError),
])
def test_failures_are_typed_by_exit_code_and_message(code, stderr, expected):
    executor = LVMExecutor(runner=FakeRunner(fail(code, stderr)))
    with pytest.raises(LVMCommandError) as info:
        executor.run(["lvx"], readonly=False)
    assert type(info.value) is expected
    assert isinstance(info.value, BackendError)
    assert isinstance(info.value, NotFound) == issubclass(expected, LVMNotFoundError)
    assert isinstance(info.value, AlreadyExists) == (expected is LVMAlreadyExistsError)


def test_not_found_errors_are_lookup_errors_and_keep_the_output():
    executor = LVMExecutor(runner=FakeRunner(
        CommandResult(["lvremove", "--force", "vg/x"], 5, "out",
                      '  Failed to find logical volume "vg/x"\n')))
    with pytest.raises(LookupError) as info:
        executor.run(["lvremove", "--force", "vg/x"], readonly=False)
    error = info.value
    assert error.argv == ("lvremove", "--force", "vg/x")
    assert (error.exit_code, error.stdout) == (5, "out")
    assert str(error) == ('LVM command `lvremove --force vg/x` failed with exit code 5: '
                          'Failed to find logical volume "vg/x"')


def test_error_message_quotes_argv_and_says_when_stderr_is_empty():
    executor = LVMExecutor(runner=FakeRunner(CommandResult(["lvs", "a b"], 4, "", "")))
    with pytest.raises(LVMCommandError, match=r"`lvs 'a b'` failed with exit code 4: "
                                              "no error output"):
        executor.run(["lvs", "a b"], readonly=False)


def test_errors_survive_pickling():
    error = LVMAlreadyExistsError(["lvcreate"], 5, "o", "e")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is LVMAlreadyExistsError and copy.stderr == "e" and str(copy) == str(error)
    timeout = pickle.loads(pickle.dumps(LVMTimeoutError(["lvs"], 1.5)))
    assert timeout.timeout_s == 1.5


_CAPTURED_ERRORS = {
    "err_lvremove_missing_lv": LVMNotFoundError,
    "err_lvs_missing_vg_live": LVMVolumeGroupNotFoundError,
    "err_vgs_missing_vg": LVMVolumeGroupNotFoundError,
    "err_lvcreate_thin_missing_pool": LVMNotFoundError,
    "err_lvcreate_thin_name_exists": LVMAlreadyExistsError,
    "err_lvcreate_thick_too_big": LVMCommandError,
    "err_lvextend_smaller": LVMCommandError,
    "err_lvcreate_bad_name_snapshot": LVMCommandError,
}


@pytest.mark.parametrize("name, expected", sorted(_CAPTURED_ERRORS.items()))
def test_real_lvm_failures_get_the_right_type(name, expected):
    """The typing rules hold on what LVM 2.03.16 really printed (VM captures)."""
    record = json.loads((DATA / f"{name}.json").read_text())
    result = CommandResult(record["argv"], record["exit_code"], record["stdout"],
                           record["stderr"])
    executor = LVMExecutor(runner=FakeRunner(result))
    with pytest.raises(LVMCommandError) as info:
        executor.run(record["argv"], readonly=False)
    assert type(info.value) is expected


# -- timeouts and counting -----------------------------------------------------------------


def test_a_timeout_is_a_backend_timeout():
    runner = FakeRunner(LVMTimeoutError(["lvs"], 0.1))
    with pytest.raises(BackendTimeout) as info:
        LVMExecutor(runner=runner).run(["lvs"], readonly=True)
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, LVMError)
    assert "did not finish within 0.1 s" in str(info.value)


def test_commands_are_counted_across_threads():
    executor = LVMExecutor(runner=FakeRunner(*([0] * 400)))

    def work():
        for _ in range(50):
            executor.run(["lvs"], readonly=True)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert executor.commands_run == 400
    assert executor.history[-1] == ("lvs",)


# -- the default runner: real processes ----------------------------------------------------


def test_default_runner_runs_a_real_process():
    executor = LVMExecutor(retry_delay_s=0)
    assert executor.run(["true"], readonly=True).exit_code == 0
    with pytest.raises(LVMCommandError) as info:
        executor.run(["false"], readonly=False)
    assert info.value.exit_code == 1
    result = executor.run(
        ["sh", "-c", 'echo "$LC_ALL $LVM_SUPPRESS_FD_WARNINGS $LVM_SYSTEM_DIR"; echo e >&2'],
        readonly=True)
    assert result.stdout == "C 1 \n" and result.stderr == "e\n"


def test_default_runner_sets_lvm_system_dir():
    executor = LVMExecutor(lvm_system_dir="/tmp/dk-lvm")
    result = executor.run(["sh", "-c", 'echo "$LVM_SYSTEM_DIR"'], readonly=True)
    assert result.stdout == "/tmp/dk-lvm\n"


def test_no_command_goes_through_a_root_helper_any_more():
    """Unprivileged, the driver's way to LVM is its privileged daemon."""
    with pytest.raises(TypeError):
        LVMExecutor(root_helper="sudo")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ProcessRunner(root_helper="sudo")  # type: ignore[call-arg]


def test_default_runner_maps_a_crash_to_139_and_retries_reads():
    executor = LVMExecutor(retry_delay_s=0, read_retries=1)
    with pytest.raises(LVMCommandError) as info:
        executor.run(["sh", "-c", "kill -SEGV $$"], readonly=True)
    assert info.value.exit_code == 139
    assert executor.commands_run == 2


def test_default_runner_kills_a_hung_command(monkeypatch):
    import subprocess
    started = []
    real_popen = subprocess.Popen

    def recording_popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    with pytest.raises(LVMTimeoutError):
        LVMExecutor(timeout_s=0.3).run(
            [sys.executable, "-c", "import time; time.sleep(30)"], readonly=True)
    assert started[0].returncode is not None  # stopped and reaped, not left running


def test_default_runner_reports_a_missing_executable_as_exit_127():
    with pytest.raises(LVMCommandError) as info:
        LVMExecutor().run(["dk-no-such-binary-xyz"], readonly=True)
    assert info.value.exit_code == 127


def test_default_runner_gives_sigpipe_its_default_back():
    """What processutils' preexec_fn did, restore_signals does without it."""
    result = LVMExecutor().run(["sh", "-c", "grep SigIgn /proc/self/status"], readonly=True)
    ignored = int(result.stdout.split()[1], 16)
    assert not ignored & (1 << (13 - 1))  # SIGPIPE (13) is not ignored in the child


def test_default_runner_starts_processes_without_a_preexec_fn(monkeypatch):
    """A preexec_fn would make Python fork instead of vfork (docs/benchmarks.md)."""
    import subprocess
    seen = []
    real_popen = subprocess.Popen

    def recording_popen(*args, **kwargs):
        seen.append(kwargs)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    LVMExecutor().run(["true"], readonly=True)
    assert len(seen) == 1
    assert seen[0].get("preexec_fn") is None and seen[0].get("shell") in (None, False)


def test_default_runner_stops_the_child_when_interrupted(monkeypatch):
    """^C while LVM runs: the runner terminates the child before it lets go."""
    import subprocess
    started = []
    real_popen = subprocess.Popen

    def interrupted_popen(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        started.append(proc)
        calls = []

        def communicate(timeout=None):
            calls.append(timeout)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return real_popen.communicate(proc, timeout=timeout)

        proc.communicate = communicate
        return proc

    monkeypatch.setattr(subprocess, "Popen", interrupted_popen)
    with pytest.raises(KeyboardInterrupt):
        LVMExecutor().run([sys.executable, "-c", "import time; time.sleep(30)"], readonly=True)
    assert started[0].poll() is not None  # terminated, not left running
