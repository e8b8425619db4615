"""The driver-kit command as an operator used to OpenStack's clients expects it: list and
show, -f table|json|value everywhere (errors too), --version, shell completion,
progress on a terminal, the configuration found without --config-file, and a
cinder.conf written for the Cinder adapter."""

from __future__ import annotations

import importlib.metadata
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driver_kit import cli_config
from driver_kit.cli import main

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv(cli_config.CONFIG_ENV, raising=False)
    monkeypatch.setattr(cli_config, "DEFAULT_CONFIG_FILE", str(tmp_path / "no-such.conf"))
    return tmp_path / "state" / "driver-kit" / "simulator.json"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, _ = run(capsys, *argv)
    return code, json.loads(out)


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A child's environment running this checkout's code on a fresh simulator."""
    env = {k: v for k, v in os.environ.items() if k != cli_config.CONFIG_ENV}
    return {**env, "PYTHONPATH": str(REPO), "XDG_STATE_HOME": str(tmp_path / "state"),
            "HOME": str(tmp_path), **extra}


def simulator(state: Path, *argv: str) -> None:
    """An operator's LVM command, out of band, on the CLI's simulator state."""
    subprocess.run([sys.executable, "-m", "lvm_driver.simulator", "--state", str(state),
                    *argv], check=True, capture_output=True, env=dict(os.environ,
                                                                       PYTHONPATH=str(REPO)))


# ------------------------------------------------------------------ list, show

def test_list_and_show_tell_the_drivers_volumes_from_the_operators(capsys, state_home):
    for argv in (["create", "vol-thin", "3"], ["create", "vol-thick", "2", "--type", "thick"],
                 ["snapshot", "snap-1", "vol-thin"]):
        assert run(capsys, *argv)[0] == 0
    simulator(state_home, "lvcreate", "-V", "1G", "-T", "dkvg/pool", "-n", "operators")
    simulator(state_home, "lvcreate", "-s", "-n", "operators-snap", "dkvg/operators")
    simulator(state_home, "lvcreate", "-s", "-L", "100M", "-n", "cow-1", "dkvg/vol-thick")
    code, rows = as_json(capsys, "list", "-f", "json")
    assert code == 0
    assert {r["name"]: (r["kind"], r["provisioning"], r["pool"], r["origin"], r["owner"],
                        r["size_gb"]) for r in rows} == {
        "cow-1": ("snapshot", "cow", "dkvg", "vol-thick", "operator", 0.1),
        "operators": ("volume", "thin", "pool", None, "operator", 1.0),
        "operators-snap": ("snapshot", "thin", "pool", "operators", "operator", 1.0),
        "snap-1": ("snapshot", "thin", "pool", "vol-thin", "driver", 3.0),
        "vol-thick": ("volume", "thick", "dkvg", None, "driver", 2.0),
        "vol-thin": ("volume", "thin", "pool", None, "driver", 3.0)}
    assert [r["name"] for r in rows] == sorted(r["name"] for r in rows)
    code, rows = as_json(capsys, "list", "--kind", "snapshot", "-f", "json")
    assert {r["name"] for r in rows} == {"cow-1", "operators-snap", "snap-1"}
    code, out, _ = run(capsys, "list")
    assert out.splitlines()[0].split() == ["name", "kind", "provisioning", "size_gb", "pool",
                                           "origin", "owner"]
    code, shown = as_json(capsys, "show", "vol-thin", "-f", "json")
    assert shown == {"name": "vol-thin", "kind": "volume", "provisioning": "thin",
                     "size_gb": 3.0, "size_bytes": 3 * 1024 ** 3, "pool": "pool",
                     "origin": None, "owner": "driver", "snapshots": "snap-1"}
    code, out, _ = run(capsys, "show", "operators-snap")
    assert code == 0 and "owner         operator" in out and "origin        operators" in out


def test_show_of_a_missing_name_is_exit_4_and_a_bad_name_exit_1(capsys):
    code, out, err = run(capsys, "show", "nothing-here")
    assert (code, out) == (4, "")
    assert err.splitlines()[-1] == "error: no volume or snapshot 'nothing-here' on backend lvm-sim"
    code, out, err = run(capsys, "show", "a;b")
    assert code == 1 and "characters LVM does not allow" in err


def test_a_driver_that_cannot_list_says_so(capsys, tmp_path):
    conf = tmp_path / "mem.conf"
    conf.write_text("[DEFAULT]\nenabled_backends = mem\n\n[mem]\n"
                    "volume_driver = tests.unit.memdriver.MemoryDriver\n")
    code, out, err = run(capsys, "--config-file", str(conf), "list")
    assert code == 1 and out == ""
    assert "MemoryDriver cannot list its backend's volumes" in err.splitlines()[-1]


# ------------------------------------------------------------------ -f everywhere

#: each command, and what it needs made first
COMMANDS = [(["stats"], []), (["pools"], []), (["placement"], []), (["list"], [["create", "v", "2"]]),
            (["show", "v"], [["create", "v", "2"]]), (["create", "w", "1"], []),
            (["extend", "v", "3"], [["create", "v", "2"]]),
            (["snapshot", "s", "v"], [["create", "v", "2"]]),
            (["delete-snapshot", "s"], [["create", "v", "2"], ["snapshot", "s", "v"]]),
            (["delete", "v"], [["create", "v", "2"]])]


@pytest.mark.parametrize("argv, before", COMMANDS, ids=[argv[0] for argv, _ in COMMANDS])
def test_every_command_answers_in_json_and_in_values(capsys, monkeypatch, tmp_path, argv,
                                                     before):
    answers = {}
    for fmt in ("json", "value", "table"):
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / fmt))  # a fresh simulator
        for step in before:
            assert run(capsys, *step)[0] == 0
        # -f after the command, as openstack takes it, or before it
        code, answers[fmt], err = run(capsys, *(argv + ["-f", fmt] if fmt == "json" else
                                                ["-f", fmt] + argv))
        assert code == 0, err
    document = json.loads(answers["json"])
    assert document
    if argv[0] in ("create", "extend", "snapshot", "show"):
        assert document["size_bytes"] % 1024 ** 3 == 0 and document["pool"] == "pool"
        # one value a line, in the document's order
        assert answers["value"].split("\n")[0] == document["name"]
        assert answers["table"].split()[:2] == ["Field", "Value"]
    value = answers["value"]
    assert value.strip() and not any(w in value for w in ("Field", "---", "{", "GiB"))


@pytest.mark.parametrize("argv, code, error_type, needle", [
    (["show", "nope"], 4, "VolumeNotFound", "no volume or snapshot 'nope'"),
    (["delete", "nope"], 4, "VolumeNotFound", "no volume 'nope' on backend lvm-sim"),
    (["create", "a;b", "1"], 1, "InvalidName", "characters LVM does not allow"),
    (["create", "huge", "100000"], 3, "CapacityExceeded", "FAILED"),
    (["--config-file", "/no/such.conf", "stats"], 2, "ConfigError", "no such file"),
    (["create", "v", "1.5"], 2, "UsageError", "size must be a whole number of GiB"),
    (["nosuch"], 2, "UsageError", "invalid choice: 'nosuch'"),
    (["check", "--only", "nosuch"], 2, "CheckError", "no check matches 'nosuch'"),
    (["check", "--bogus"], 2, "UsageError", "unrecognized arguments: --bogus"),
])
def test_with_f_json_an_error_is_a_json_document_too(capsys, argv, code, error_type, needle):
    try:
        got = main(["-f", "json", *argv])
    except SystemExit as exit_:  # argparse's usage errors leave as SystemExit
        got = exit_.code
    out, err = capsys.readouterr()
    assert got == code
    error = json.loads(out)["error"]
    assert error["type"] == error_type and error["exit_code"] == code
    assert needle in error["message"] and "Traceback" not in out + err
    assert "error:" not in err  # the document, not the line for people


def test_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"driver-kit {importlib.metadata.version('driver-kit')}\n"


# ------------------------------------------------------------------ terminal niceties

def complete(tmp_path: Path, line: str) -> list[str]:
    """What the shell completion offers for ``line``, as bash's hook asks argcomplete."""
    env = child_env(tmp_path, _ARGCOMPLETE="1", _ARGCOMPLETE_IFS="\n", COMP_LINE=line,
                    COMP_POINT=str(len(line)), _ARGCOMPLETE_SUPPRESS_SPACE="1")
    proc = subprocess.run(["bash", "-c", f'"{VENV_BIN}/python" -m driver_kit.cli 8>&1 9>/dev/null'],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")


def test_shell_completion_offers_commands_and_options(tmp_path):
    assert "list" in complete(tmp_path, "driver-kit li")
    assert {"delete", "delete-snapshot"} <= set(complete(tmp_path, "driver-kit del"))
    assert "--format" in complete(tmp_path, "driver-kit show --for")
    assert "--only" in complete(tmp_path, "driver-kit check --on")  # the harness's own


def on_a_terminal(tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    """Run the command with stderr on a pseudo-terminal; stdout stays a pipe."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "driver_kit.cli", *argv],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                            env=child_env(tmp_path, COLUMNS="120", TERM="xterm"))
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=300), out, seen.decode(errors="replace")


def test_progress_shows_on_a_terminal_and_never_on_stdout(tmp_path):
    code, out, terminal = on_a_terminal(tmp_path, "check", "--only", "stats.ratio-ge-1",
                                        "-f", "value")
    assert code == 0 and out == "driver.setup passed\nstats.ratio-ge-1 passed\n"
    assert "checking" in terminal and "2/2" in terminal and "stats.ratio-ge-1" in terminal
    assert on_a_terminal(tmp_path, "create", "thick-1", "1", "--type", "thick")[0] == 0
    code, out, terminal = on_a_terminal(tmp_path, "delete", "thick-1")
    assert (code, out) == (0, "deleted volume thick-1\n")
    assert "deleting thick volume thick-1: writing 1.00 GiB of zeros first" in terminal


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "driver_kit.cli", "check", "--only",
                           "stats.ratio-ge-1"], env=child_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stderr == ""


# ------------------------------------------------------------------ where the config is

def simulator_conf(path: Path, section: str, state: Path) -> Path:
    path.write_text(f"[DEFAULT]\nenabled_backends = {section}\n\n[{section}]\n"
                    f"volume_driver = lvm_driver.driver.ThinLVMDriver\n"
                    f"lvm_backend = simulator\nlvm_simulator_state_file = {state}\n"
                    f"volume_group = dkvg\nlvm_thin_pool_name = pool\n"
                    f"lock_path = {path.parent / 'locks'}\n")
    return path


def test_the_environment_variable_then_the_default_path_name_the_config(
        capsys, tmp_path, monkeypatch):
    conf = simulator_conf(tmp_path / "env.conf", "from-env", tmp_path / "env.json")
    monkeypatch.setenv(cli_config.CONFIG_ENV, str(conf))
    code, stats = as_json(capsys, "stats", "-f", "json")
    assert code == 0 and stats["volume_backend_name"] == "from-env"
    monkeypatch.delenv(cli_config.CONFIG_ENV)
    default = simulator_conf(tmp_path / "etc.conf", "from-etc", tmp_path / "etc.json")
    monkeypatch.setattr(cli_config, "DEFAULT_CONFIG_FILE", str(default))
    code, stats = as_json(capsys, "stats", "-f", "json")
    assert code == 0 and stats["volume_backend_name"] == "from-etc"
    monkeypatch.setenv(cli_config.CONFIG_ENV, str(conf))  # the variable wins over the path
    assert as_json(capsys, "stats", "-f", "json")[1]["volume_backend_name"] == "from-env"
    other = simulator_conf(tmp_path / "cli.conf", "from-option", tmp_path / "cli.json")
    code, stats = as_json(capsys, "--config-file", str(other), "stats", "-f", "json")
    assert stats["volume_backend_name"] == "from-option"  # and the option over both


def test_a_missing_file_named_by_the_variable_says_where_the_name_came_from(
        capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(cli_config.CONFIG_ENV, str(tmp_path / "typo.conf"))
    code, out, err = run(capsys, "stats")
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == (f"config error: config file {tmp_path / 'typo.conf'}: "
                                    f"no such file (configuration from $DRIVER_KIT_CONFIG)")


def test_a_cinder_conf_written_for_the_adapter_is_read_as_the_adapter_reads_it(
        capsys, tmp_path):
    """The section Cinder runs (contrib/cinder_adapter.py), with Cinder's own options
    beside the kit's, Cinder's [backend_defaults] fallback and Cinder's lock_path: the
    command takes the same locks and admits with the same figures."""
    cinder_locks = tmp_path / "cinder-locks"
    conf = tmp_path / "cinder.conf"
    conf.write_text(
        "[DEFAULT]\nenabled_backends = kit-lvm\nstate_path = " + str(tmp_path) + "\n"
        "transport_url = rabbit://guest:guest@localhost:5672/\n\n"
        "[oslo_concurrency]\nlock_path = $state_path/cinder-locks\n\n"
        "[backend_defaults]\nreserved_percentage = 5\nmax_over_subscription_ratio = 1.5\n\n"
        "[kit-lvm]\nvolume_driver = contrib.cinder_adapter.DriverKitVolumeDriver\n"
        "driver_kit_driver = lvm_driver.driver.ThinLVMDriver\n"
        "volume_backend_name = kit-lvm\ntarget_helper = lioadm\n"
        f"lvm_backend = simulator\nlvm_simulator_state_file = {tmp_path / 'sim.json'}\n"
        "volume_group = dkvg\nlvm_thin_pool_name = pool\n"
        "max_over_subscription_ratio = 20.0\n")
    code, out, err = run(capsys, "--config-file", str(conf), "create", "volume-1", "1")
    assert (code, out) == (0, "created thin volume volume-1 of 1 GiB in pool pool\n"), err
    assert any(cinder_locks.iterdir())  # the admission lock is Cinder's
    code, stats = as_json(capsys, "--config-file", str(conf), "stats", "-f", "json")
    assert stats["volume_backend_name"] == "kit-lvm"
    assert stats["pools"][0]["reserved_percentage"] == 5  # from [backend_defaults]
    assert stats["pools"][0]["max_over_subscription_ratio"] == 20.0  # the section's own


def test_the_package_ships_type_hints_and_the_harness_extra(tmp_path):
    """What ``pip install`` gives, from setuptools' own metadata of this checkout:
    ``py.typed`` in both packages (PEP 561), and the ``harness`` extra bringing pytest
    and testtools."""
    proc = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base",
                           str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    [info] = tmp_path.glob("*.egg-info")
    shipped = set((info / "SOURCES.txt").read_text().split())
    assert {"driver_kit/py.typed", "lvm_driver/py.typed"} <= shipped
    extras = (info / "requires.txt").read_text().split("\n\n")
    [harness] = [block for block in extras if block.startswith("[harness]")]
    assert sorted(line.split("<")[0].split(">")[0] for line in harness.split()[1:]) == [
        "pytest", "testtools"]


def test_as_root_a_config_found_implicitly_must_be_roots_alone(capsys, tmp_path, monkeypatch):
    """An inherited $DRIVER_KIT_CONFIG, or a loose /etc file, would make root import the
    classes another user names: refused in one line, unless given with --config-file."""
    conf = simulator_conf(tmp_path / "loose.conf", "loose", tmp_path / "loose.json")
    conf.chmod(0o666)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv(cli_config.CONFIG_ENV, str(conf))
    code, out, err = run(capsys, "stats")
    assert code == 2 and out == ""
    assert err.splitlines()[-1].startswith(
        f"config error: config file '{conf}' (from $DRIVER_KIT_CONFIG) is not root's alone")
    monkeypatch.delenv(cli_config.CONFIG_ENV)
    monkeypatch.setattr(cli_config, "DEFAULT_CONFIG_FILE", str(conf))
    code, _, err = run(capsys, "stats")
    assert code == 2 and "(from the default path) is not root's alone" in err
    code, out, _ = run(capsys, "--config-file", str(conf), "stats", "-f", "json")
    assert code == 0 and json.loads(out)["volume_backend_name"] == "loose"  # named: taken
    conf.chmod(0o644)
    if os.getuid() == 0:  # the file is root's only when the tests run as root
        assert run(capsys, "stats")[0] == 0
