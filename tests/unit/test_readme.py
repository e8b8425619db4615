"""The README works as written: its config sample loads as shown, its tour runs in
order on a fresh simulator, every command in it is run by a test, the counts the
docs state are the code's, and every command carries the path the set-up installs
it at."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from driver_kit.compliance import CATALOGUE
from driver_kit.config import load_backend_config, make_conf
from lvm_driver.driver import LVM_OPTS

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
GUIDE = (REPO / "docs" / "writing-a-driver.md").read_text()
OPERATORS = (REPO / "docs" / "operators.md").read_text()
VENV_BIN = Path(sys.executable).parent
# the console scripts the set-up puts in .venv/bin
VENV_COMMANDS = ("driver-kit", "pytest", "pip", "oslo-config-generator")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(language: str, text: str = README) -> list[str]:
    return [body for lang, body in FENCE.findall(text) if lang == language]


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def config_sample() -> str:
    [sample] = [b for b in blocks("ini") if "enabled_backends" in b]
    return sample


def test_the_sample_config_loads_as_shown(tmp_path: Path) -> None:
    sample = config_sample()
    path = tmp_path / "kit.conf"
    path.write_text(sample)
    conf = make_conf([str(path)])
    [backend] = conf.enabled_backends
    config = load_backend_config(conf, backend, extra_opts=LVM_OPTS)
    shown = dict(re.findall(r"^(\w+) = (.*)$", sample.split(f"[{backend}]")[1], re.MULTILINE))
    assert shown, "the sample's backend section sets no option"
    for option, value in shown.items():
        assert str(getattr(conf[backend], option)) == value, option
    assert config.over_provisioning_calculation == shown["over_provisioning_calculation"]


def test_no_ini_block_puts_a_comment_after_a_value() -> None:
    """oslo.config (and cinder.conf) read ``20.0 ; or auto`` as the value itself."""
    for block in blocks("ini"):
        for line in block.splitlines():
            if "=" in line and not line.lstrip().startswith(("#", ";")):
                value = line.split("=", 1)[1]
                assert not re.search(r"\s[;#]", value), line


def command_lines(block: str) -> list[str]:
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def tour() -> list[str]:
    return command_lines(blocks("sh", section("A five-minute tour"))[0])


def kit_env(tmp_path: Path) -> dict[str, str]:
    """This checkout's code on a fresh simulator, whatever the machine's configuration."""
    env = {k: v for k, v in os.environ.items() if k != "DRIVER_KIT_CONFIG"}
    return dict(env, XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path),
                PYTHONPATH=str(REPO))


def test_the_tour_runs_in_order_on_a_fresh_simulator(tmp_path: Path) -> None:
    steps = [shlex.split(line, comments=True) for line in tour()]
    assert len(steps) >= 8 and any("thick" in argv for argv in steps)
    outputs = {}
    for argv in steps:
        assert argv[0] == ".venv/bin/driver-kit", argv
        proc = subprocess.run([sys.executable, "-m", "driver_kit.cli", *argv[1:]],
                              cwd=tmp_path, env=kit_env(tmp_path), capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
        if argv[1] != "check":  # the harness makes a simulator of its own
            assert str(tmp_path / "state") in proc.stderr  # the fresh one, not the user's
        outputs[" ".join(argv[1:])] = proc.stdout
    assert json.loads(outputs["show volume-1 -f json"])["size_gb"] == 20.0
    assert "snap-1" in outputs["list"] and "volume-2" in outputs["list"]


def test_the_lvm_host_command_reads_the_sample_config(tmp_path: Path) -> None:
    """The host's command on the README's sample, with the simulator standing for the
    host's volume group (the VM lane runs the driver on real LVM)."""
    [line] = [line for block in blocks("sh", section("A five-minute tour"))[1:]
              for line in command_lines(block) if "--config-file kit.conf" in line]
    argv = shlex.split(line)
    assert argv[:2] == ["sudo", ".venv/bin/driver-kit"]
    (tmp_path / "kit.conf").write_text(
        config_sample() + f"lvm_backend = simulator\n"
        f"lvm_simulator_state_file = {tmp_path / 'sim.json'}\n"
        f"lock_path = {tmp_path / 'locks'}\n")
    proc = subprocess.run([sys.executable, "-m", "driver_kit.cli", *argv[2:]], cwd=tmp_path,
                          env=kit_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[2].split()[:2] == ["cinder-volumes-pool", "up"]


#: each command line of the README outside the tour, and the test that runs it
RUN_ELSEWHERE = {
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/driver-kit demo":
        "tools/run-tests.sh makes the venv and installs the same way (.ci/run); "
        "tests/unit/test_cli.py::test_help_and_demo runs the demo",
    "bash tools/run-tests.sh": "CI: .ci/run (test_ci_runs_the_readmes_test_command)",
    "sudo .venv/bin/driver-kit --config-file kit.conf --backend lvm-1 stats":
        "test_the_lvm_host_command_reads_the_sample_config",
    ".venv/bin/pip install -e '.[harness]'":
        "tests/unit/test_cli_operator.py::test_the_package_ships_type_hints_and_the_harness_extra;"
        " tests/compliance/test_guide.py runs the harness's front ends",
}


def test_every_readme_command_is_run_by_a_test() -> None:
    lines = [line for block in blocks("sh") for line in command_lines(block)]
    unrun = [line for line in lines if line not in tour() and line not in RUN_ELSEWHERE]
    assert not unrun, f"README commands no test runs: {unrun}"
    assert set(RUN_ELSEWHERE) <= set(lines), "RUN_ELSEWHERE names a line the README lost"


def test_ci_runs_the_readmes_test_command() -> None:
    assert "exec bash tools/run-tests.sh" in (REPO / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test,cinder,coordination]'" in (
        REPO / "tools" / "run-tests.sh").read_text()


def test_the_compliance_counts_are_the_catalogues(tmp_path: Path) -> None:
    held = re.search(r"`driver_kit.compliance` holds (\d+) checks", GUIDE)
    reported = re.search(r"`\.venv/bin/driver-kit check` reports (\d+)\s+results", GUIDE)
    assert held and reported
    assert int(held.group(1)) == len(CATALOGUE)
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path))
    proc = subprocess.run([str(VENV_BIN / "driver-kit"), "check", "--json",
                           str(tmp_path / "report.json")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "report.json").read_text())["results"]
    assert int(reported.group(1)) == len(results)


def test_the_recorded_cinder_case_count_is_the_data_files() -> None:
    stated = re.search(r"checked against ([\d,]+) cases recorded from Cinder ([\d.]+)",
                       OPERATORS)
    header = json.loads((REPO / "tests" / "unit" / "data" / "cinder_cases.json")
                        .read_text())["header"]
    assert stated
    assert int(stated.group(1).replace(",", "")) == sum(header["counts"].values())
    assert stated.group(2) == header["cinder_version"]


def _command_words(text: str) -> list[str]:
    """The first word of every command line: shell blocks, and inline code with arguments."""
    words = []
    for block in blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            while argv and argv[0] in ("sudo", "&&"):
                argv = argv[1:]
            words += [argv[0]] if argv else []
            words += [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "&&"]
    prose = FENCE.sub("", text)
    for span in re.findall(r"`([^`]+)`", prose):
        argv = span.split()
        if len(argv) > 1:
            words.append(argv[1] if argv[0] == "sudo" else argv[0])
    return words


def test_commands_carry_their_venv_path() -> None:
    words = _command_words(README)
    assert {".venv/bin/driver-kit", ".venv/bin/pip",
            ".venv/bin/oslo-config-generator"} <= set(words)
    bare = [word for word in words if word in VENV_COMMANDS]
    assert not bare, f"commands without their .venv/bin/ path: {bare}"
