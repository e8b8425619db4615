"""The driver-kit command as a user runs it, on the default simulator."""

import json
import subprocess
import sys

import pytest

from driver_kit import validate_stats
from driver_kit import ConfigError
from driver_kit.cli import _parser, main
from driver_kit.loading import default_overrides, driver_class, load_driver


@pytest.fixture(autouse=True)
def state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_stats_json_is_the_report(capsys):
    code, out, err = run(capsys, "stats", "--json")
    assert code == 0 and "using the LVM simulator" in err
    stats = json.loads(out)
    assert validate_stats(stats) == []
    assert [p["pool_name"] for p in stats["pools"]] == ["pool", "dkvg"]


def test_volume_lifecycle_and_refusal(capsys):
    assert run(capsys, "create", "volume-1", "10")[0] == 0
    assert run(capsys, "extend", "volume-1", "20")[0] == 0
    assert run(capsys, "snapshot", "snap-1", "volume-1")[0] == 0
    code, out, err = run(capsys, "create", "huge", "100000")
    assert code == 3 and "provisioned_cap" in err and "FAILED" in err
    code, out, _ = run(capsys, "stats")
    assert "volume" in out.splitlines()[0] and "pool" in out
    code, _, err = run(capsys, "delete", "volume-1")
    assert code == 1 and "snap-1" in err  # a volume with snapshots is not deleted
    assert run(capsys, "delete-snapshot", "snap-1")[0] == 0
    assert run(capsys, "delete", "volume-1")[0] == 0
    assert run(capsys, "delete", "volume-1")[0] == 4
    code, out, _ = run(capsys, "pools")
    assert "thin" in out and "thick" in out


@pytest.mark.parametrize("argv, code, needle", [
    (["create", "a;b", "1"], 1, "characters LVM does not allow"),
    (["extend", "nope", "2"], 4, "no volume 'nope'"),
    (["create", "v", "1", "--pool", "nope"], 4, "no pool 'nope'"),
    (["--config-file", "/no/such.conf", "stats"], 2, "/no/such.conf: no such file"),
])
def test_errors_are_one_clear_line(capsys, argv, code, needle):
    got, out, err = run(capsys, *argv)
    assert got == code
    assert needle in err and "Traceback" not in err


def test_delete_says_when_there_was_nothing_to_delete(capsys):
    assert run(capsys, "create", "volume-1", "1")[0] == 0
    assert run(capsys, "snapshot", "snap-1", "volume-1")[0] == 0
    for command, name, kind in (("delete-snapshot", "snap-1", "snapshot"),
                                ("delete", "volume-1", "volume")):
        code, out, err = run(capsys, command, name)
        assert (code, out) == (0, f"deleted {kind} {name}\n")
        code, out, err = run(capsys, command, name)
        assert (code, out) == (4, "")
        assert err.splitlines()[-1] == f"error: no {kind} '{name}' on backend lvm-sim"
    code, _, err = run(capsys, "delete-snapshot", "gone")
    assert code == 4 and "no snapshot 'gone'" in err


def test_delete_refusals_and_bad_names_keep_their_own_exit_code(capsys):
    assert run(capsys, "create", "volume-1", "1")[0] == 0
    assert run(capsys, "snapshot", "snap-1", "volume-1")[0] == 0
    for argv in (["delete", "snap-1"], ["delete", "pool"], ["delete-snapshot", "a;b"]):
        code, out, err = run(capsys, *argv)  # the driver's refusal, not "no volume"
        assert (code, out) == (1, "") and err.splitlines()[-1].startswith("error: ")
        assert "no volume" not in err and "no snapshot" not in err
    code, out, _ = run(capsys, "stats", "--json")
    pool = json.loads(out)["pools"][0]
    assert (pool["total_volumes"], pool["snapshot_capacity_gb"]) == (1, 1)  # all kept


def test_the_python_api_stays_idempotent(tmp_path):
    driver = load_driver(overrides=default_overrides(str(tmp_path / "sim.json")))
    driver.do_setup()
    assert driver.delete_volume("never-there") is None
    assert driver.delete_snapshot("never-there") is None


@pytest.mark.parametrize("command", ["create", "extend"])
@pytest.mark.parametrize("size", ["1.5", "10_0", " 3 ", "\uff13", "+3", "0x10", "1e3", "0",
                                  str(10 ** 400), "8589934593"])
def test_bad_size_is_a_one_line_usage_error(capsys, command, size):
    with pytest.raises(SystemExit) as exit_:
        main([command, "v", size])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 2  # usage, then the reason
    assert "error: argument size: size must be " in err
    assert ("whole number of GiB" in err or "at least 1 GiB" in err
            or "at most 8589934592 GiB (8 EiB" in err)


@pytest.mark.parametrize("argv", [["stats"], ["create", "v", "1"], ["delete", "v"]])
def test_a_corrupt_state_file_is_one_line_naming_it_and_is_kept(tmp_path, capsys, argv):
    state = tmp_path / "state" / "driver-kit" / "simulator.json"
    state.parent.mkdir(parents=True)
    state.write_bytes(b'{"version": 1, "vgs": {"dkvg": ')
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("(no --config-file: using the LVM simulator")
    assert len(lines) == 2 and "Traceback" not in err
    assert lines[1].startswith("error: ") and f"state file {state} is not JSON" in lines[1]
    assert state.read_bytes() == b'{"version": 1, "vgs": {"dkvg": '


def test_driver_class_says_why_a_path_names_no_driver(tmp_path, monkeypatch):
    (tmp_path / "raises_at_import.py").write_text("raise RuntimeError('no licence')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for path, needle in (
            ("raises_at_import:Driver", "cannot import 'raises_at_import' for backend_x "
                                        "'raises_at_import:Driver': RuntimeError: no licence"),
            ("collections.OrderedDict", "backend_x 'collections.OrderedDict' is not a "
                                        "driver_kit.VolumeDriver subclass"),
            ("NoDots", "backend_x path 'NoDots' must be module.Name or module:Name")):
        with pytest.raises(ConfigError) as error:
            driver_class(path, "backend_x")
        assert needle in str(error.value)
    assert driver_class("lvm_driver.driver:ThinLVMDriver").__name__ == "ThinLVMDriver"


@pytest.mark.parametrize("port", ["70000", "65536", "-1", "http"])
def test_bad_port_is_a_usage_error(capsys, port):
    with pytest.raises(SystemExit) as exit_:
        main(["exporter", "--port", port])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"port must be a whole number in 0..65535, got '{port}'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("interval", ["nan", "inf", "0", "0.0", "-1", "-0.5", "soon", ""])
def test_bad_exporter_interval_is_a_one_line_usage_error(capsys, interval):
    with pytest.raises(SystemExit) as exit_:
        main(["exporter", "--port", "0", "--interval", interval])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].endswith(
        f"interval must be a finite number of seconds above 0, got {interval!r}")
    assert "Traceback" not in err


def test_exporter_interval_is_optional():
    assert _parser().parse_args(["exporter", "--port", "0"]).interval is None
    assert _parser().parse_args(["exporter", "--port", "0", "--interval", "2.5"]).interval == 2.5


def test_port_range_ends_are_accepted():
    for port in (0, 65535):
        assert _parser().parse_args(["exporter", "--port", str(port)]).port == port


def test_config_file_backend(tmp_path, capsys):
    conf = tmp_path / "kit.conf"
    conf.write_text(f"""[DEFAULT]
enabled_backends = one
[one]
volume_driver = lvm_driver.driver.ThinLVMDriver
lvm_backend = simulator
lvm_simulator_state_file = {tmp_path / 'sim.json'}
volume_group = vg1
max_over_subscription_ratio = 0.5
""")
    code, _, err = run(capsys, "--config-file", str(conf), "stats")
    assert code == 2 and "[one] max_over_subscription_ratio = '0.5'" in err
    conf.write_text(conf.read_text().replace("= 0.5", "= auto"))
    code, out, _ = run(capsys, "--config-file", str(conf), "stats", "--json")
    assert code == 0 and json.loads(out)["volume_backend_name"] == "one"
    code, _, err = run(capsys, "--config-file", str(conf), "--backend", "two", "stats")
    assert code == 2 and "unknown backend 'two'" in err


def test_help_and_demo():
    help_text = subprocess.run([sys.executable, "-m", "driver_kit.cli", "--help"],
                               capture_output=True, text=True, check=True).stdout
    for command in ("demo", "stats", "pools", "create", "extend", "delete", "snapshot",
                    "delete-snapshot", "check"):
        assert command in help_text
    demo = subprocess.run([sys.executable, "-m", "driver_kit.cli", "demo"],
                          capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stderr
    assert "refused" in demo.stdout and "provisioned counts it: 10.0 GiB" in demo.stdout


def test_a_volume_called_check_is_not_the_check_command(capsys):
    code, out, _ = run(capsys, "--debug", "create", "check", "1")
    assert code == 0 and "created thin volume check" in out


def test_check_after_global_options_runs_the_harness(capsys):
    code, out, _ = run(capsys, "--debug", "check", "--only", "stats.ratio-ge-1")
    assert code == 0 and "stats.ratio-ge-1" in out
