"""The README works as written: its config sample loads as shown, its walkthrough
runs in order on a fresh simulator, its counts are the code's, and every command
carries the path the set-up installs it at."""

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


def walkthrough() -> list[list[str]]:
    commands = blocks("sh", section("The `driver-kit` command"))[0]
    return [shlex.split(line, comments=True) for line in commands.splitlines()
            if line.strip()]


def test_the_walkthrough_runs_in_order_on_a_fresh_simulator(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path))
    steps = walkthrough()
    assert len(steps) >= 8 and any("thick" in argv for argv in steps)
    for argv in steps:
        assert argv[0] == ".venv/bin/driver-kit", argv
        proc = subprocess.run([str(VENV_BIN / "driver-kit"), *argv[1:]], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
        assert str(tmp_path / "state") in proc.stderr  # the fresh simulator, not the user's


def test_the_compliance_counts_are_the_catalogues(tmp_path: Path) -> None:
    held = re.search(r"`driver_kit.compliance` holds (\d+) checks", README)
    reported = re.search(r"`\.venv/bin/driver-kit check` reports (\d+)\s+results", README)
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
    stated = re.search(r"checked against ([\d,]+) cases recorded from Cinder ([\d.]+)", README)
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
    assert {".venv/bin/driver-kit", ".venv/bin/pip", ".venv/bin/pytest",
            ".venv/bin/oslo-config-generator"} <= set(words)
    bare = [word for word in words if word in VENV_COMMANDS]
    assert not bare, f"commands without their .venv/bin/ path: {bare}"
