"""The read session on the lab's pool: the driver's stats and admission reads go
through one lvm shell (real LVM in the VM lane, the simulator's shell mode
elsewhere), and the shell survives being killed and a hung command."""

from __future__ import annotations

import os
import signal
import time

from lvm_driver.run.executor import REPORT_COMMANDS


def _is_report(argv: tuple[str, ...]) -> bool:
    name = os.path.basename(argv[0])
    return (argv[1] if name == "lvm" and len(argv) > 1 else name) in REPORT_COMMANDS


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_reads_go_through_one_shell_that_survives_a_kill_and_a_hang(lab):
    stats_timeout = 20 if lab.kind == "real" else 5
    driver = lab.driver(lvm_read_session=True, stats_timeout=stats_timeout,
                        lvm_metadata_parse=True)  # real LVM's default, here on both
    executor = driver.executor
    try:
        assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "up"
        pid = executor.session.shell.pid
        assert pid is not None

        # steady state: a refresh starts no process; the report it reads (the reused one
        # forgotten: an unchanged VG is otherwise not read at all) goes through the shell
        started, answered = executor.commands_run, executor.shell_commands_run
        driver.vg.forget_report()
        assert driver.get_volume_stats(refresh=True)["pools"][0]["backend_state"] == "up"
        assert executor.commands_run == started and executor.shell_commands_run > answered

        # a create: its admission read in the shell, only its writes are processes
        started, answered = executor.commands_run, executor.shell_commands_run
        history = len(executor.history)
        driver.vg.forget_report()
        driver.create_volume("volume-a", 1)
        new = executor.history[history:]
        assert executor.shell_commands_run > answered
        assert executor.commands_run - started == len(new) >= 1
        assert not any(_is_report(argv) for argv in new)

        # the shell killed while idle: a report after it starts another one
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        driver.vg.forget_report()  # the read that meets the dead shell is a process
        pool = driver.get_volume_stats(refresh=True)["pools"][0]
        assert pool["backend_state"] == "up" and pool["provisioned_capacity_gb"] >= 1
        driver.vg.forget_report()  # and the next report goes through a new shell
        pool = driver.get_volume_stats(refresh=True)["pools"][0]
        assert pool["backend_state"] == "up" and pool["provisioned_capacity_gb"] >= 1
        stopped = executor.session.shell.pid
        assert stopped not in (None, pid)

        # a hung command (the shell stopped by SIGSTOP): the refresh times out, the
        # shell is killed, and the next report works in a new one
        os.kill(stopped, signal.SIGSTOP)
        driver.vg.forget_report()
        pool = driver.get_volume_stats(refresh=True)["pools"][0]
        assert pool["backend_state"] == "down"
        assert f"{stats_timeout}" in pool["down_reason"]
        driver.vg.forget_report()  # through lvs, not the metadata text: the shell's turn
        pool = driver.get_volume_stats(refresh=True)["pools"][0]
        assert pool["backend_state"] == "up" and pool["provisioned_capacity_gb"] >= 1
        assert executor.session.shell.pid not in (None, stopped) and _gone(stopped)
    finally:
        executor.close()
