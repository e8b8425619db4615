"""Issue 24's configuration inputs, replayed through the command: each is refused when
the configuration is loaded, before any backend call, in one line that names the
option, the value, where it was set and what it must be."""

import os
import subprocess
import sys

import pytest
from oslo_config import cfg

from driver_kit import ConfigError, load_backend_config, make_conf
from driver_kit.cli import main
from driver_kit.config import KIT_OPTS, list_opts
from driver_kit.config_check import check_configuration
from lvm_driver.driver import LVM_OPTS
from lvm_driver.driver import list_opts as lvm_list_opts


def write_conf(tmp_path, *lines, enabled="b"):
    path = tmp_path / "driver-kit.conf"
    path.write_text(f"[DEFAULT]\nenabled_backends = {enabled}\n[b]\n"
                    f"lvm_backend = simulator\n"
                    f"lvm_simulator_state_file = {tmp_path / 'state.json'}\n"
                    f"lock_path = {tmp_path / 'locks'}\n" + "".join(f"{line}\n" for line in lines))
    return str(path)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("line, message", [
    ("lvm_command_timeout = 0", "lvm_command_timeout = '0' ({conf}:7): must be a finite "
                                "number from 0.01 to 86,400"),
    ("lvm_command_timeout = -5", "lvm_command_timeout = '-5'"),
    ("max_over_subscription_ratio = 1e308", "max_over_subscription_ratio = '1e308' ({conf}:7): "
                                            "must be 'auto' or a number from 1.0 to 1,000"),
    ("stats_timeout = nan", "stats_timeout = 'nan' ({conf}:7): must be a finite number"),
    ("volume_clear = shred", "volume_clear = 'shred' ({conf}:7): must be one of 'none', 'zero'"),
    ("volume_clear_size = -1", "volume_clear_size = '-1' ({conf}:7): must be a whole number "
                               "from 0 to 1,024"),
    ("volume_clear_size = 5000", "volume_clear_size = '5000'"),
    ("capacity_warning_used_percent = 200", "capacity_warning_used_percent = '200' ({conf}:7): "
                                            "must be a finite number from 0 to 100"),
    ("reserved_percentage = half", "reserved_percentage = 'half' ({conf}:7): must be a whole "
                                   "number from 0 to 100"),
    ("lvm_privilege = root", "lvm_privilege = 'root'"),
])
def test_a_bad_value_is_one_line_before_any_backend_call(capsys, tmp_path, line, message):
    conf = write_conf(tmp_path, line)
    code, out, err = run(capsys, "--config-file", conf, "create", "volume-a", "1")
    assert code == 2 and out == ""
    assert err == f"config error: [b] {message.format(conf=conf)}\n" or \
        (err.startswith("config error: [b] ") and message.format(conf=conf) in err
         and err.count("\n") == 1)
    assert not (tmp_path / "state.json").exists()  # no LVM command ran


def test_oslo_location_info_never_shows(tmp_path):
    conf = make_conf([write_conf(tmp_path, "reserved_percentage = 1.5")])
    with pytest.raises(ConfigError) as caught:
        load_backend_config(conf, "b")
    assert "LocationInfo" not in str(caught.value) and "1.5" in str(caught.value)


def test_a_bad_override_says_what_it_must_be():
    with pytest.raises(ConfigError, match=r"\[default\] reserved_percentage = 101: must be "
                                          r"a whole number from 0 to 100"):
        load_backend_config(overrides={"reserved_percentage": 101})


@pytest.mark.parametrize("kind", ["file", "under-a-file"])
def test_a_lock_path_that_cannot_be_a_directory_is_one_line(capsys, tmp_path, kind):
    (tmp_path / "a-file").write_text("")
    lock_path = tmp_path / "a-file" / ("" if kind == "file" else "locks")
    conf = write_conf(tmp_path, f"lock_path = {str(lock_path).rstrip('/')}")
    code, out, err = run(capsys, "--config-file", conf, "create", "volume-a", "1")
    assert code == 2 and "is not a directory" in err and err.count("\n") == 1


def test_a_misspelled_option_is_a_warning_and_a_check_config_error(capsys, tmp_path):
    conf = write_conf(tmp_path, "max_over_subscripton_ratio = 2")
    code, out, err = run(capsys, "--config-file", conf, "stats", "--json")
    assert code == 0
    assert (f"warning: [b] max_over_subscripton_ratio ({conf}:7): unknown option, ignored; "
            f"did you mean max_over_subscription_ratio?") in err
    code, out, err = run(capsys, "--config-file", conf, "check-config")
    assert code == 2 and out == ""
    assert err == (f"config error: [b] max_over_subscripton_ratio ({conf}:7): unknown "
                   f"option, ignored; did you mean max_over_subscription_ratio?\n")


def test_unknown_default_options_are_reported_too(tmp_path):
    conf = write_conf(tmp_path)
    with open(conf, "a") as handle:
        handle.write("[DEFAULT]\nenabled_backend = b\n")
    problems, backends = check_configuration([conf])
    assert backends == ["b"]
    assert problems == [f"[DEFAULT] enabled_backend ({conf}:8): unknown option, ignored; "
                        f"did you mean enabled_backends?"]


def test_check_config_reports_every_problem_at_once(capsys, tmp_path):
    conf = write_conf(tmp_path, "volume_clear = shred", "lvm_thin_pool_size = 5",
                      enabled="b, missing")
    code, out, err = run(capsys, "--config-file", conf, "check-config")
    assert code == 2
    assert err.splitlines() == [
        f"config error: [b] volume_clear = 'shred' ({conf}:7): must be one of 'none', 'zero'",
        "config error: backend 'missing' is in enabled_backends but has no [missing] section "
        f"in {conf}",
        f"config error: [b] lvm_thin_pool_size ({conf}:8): unknown option, ignored; did you "
        f"mean lvm_thin_pool_name?"]


def test_check_config_passes_a_good_file(capsys, tmp_path):
    conf = write_conf(tmp_path, "max_over_subscription_ratio = auto", "volume_clear = none")
    code, out, err = run(capsys, "--config-file", conf, "check-config")
    assert (code, err) == (0, "")
    assert out == f"configuration OK: {conf} (backends: b)\n"
    assert not (tmp_path / "state.json").exists()


def test_an_enabled_backend_without_its_section_is_one_line(capsys, tmp_path):
    conf = write_conf(tmp_path, enabled="other")
    code, out, err = run(capsys, "--config-file", conf, "stats")
    assert code == 2
    assert err == (f"config error: backend 'other' is in enabled_backends but has no "
                   f"[other] section in {conf}\n")


def test_a_backend_named_without_a_config_file_is_refused(capsys):
    code, out, err = run(capsys, "--backend", "nosuch", "stats")
    assert code == 2
    assert err == ("config error: unknown backend 'nosuch': with no --config-file the only "
                   "backend is 'lvm-sim'\n")


@pytest.mark.parametrize("path, why", [
    ("missing.conf", "no such file"),
    ("a-directory", "is a directory, not a file"),
    ("binary.conf", "is not UTF-8 text"),
    ("broken.conf", "line 2: No ':' or '=' found in assignment"),
])
def test_config_file_errors_say_what_is_wrong_with_the_path(capsys, tmp_path, path, why):
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "binary.conf").write_bytes(b"\xff\xfe[DEFAULT]\n")
    (tmp_path / "broken.conf").write_text("[DEFAULT]\njust words\n")
    code, out, err = run(capsys, "--config-file", str(tmp_path / path), "stats")
    assert code == 2
    assert err.startswith(f"config error: config file {tmp_path / path}") and why in err
    assert err.count("\n") == 1


def test_dev_null_is_a_valid_empty_file(capsys):
    code, out, err = run(capsys, "--config-file", os.devnull, "stats")
    assert code == 2
    assert err == ("config error: no backend to use: /dev/null enable none (set [DEFAULT] "
                   "enabled_backends, or choose a section with --backend)\n")


def test_every_number_and_choice_has_its_bounds_in_the_sample():
    """The generated sample states each option's range or choices."""
    for opts in (dict(list_opts())["backend"], dict(lvm_list_opts())["backend"]):
        for opt in opts:
            kind = opt.type
            if isinstance(opt, (cfg.IntOpt, cfg.FloatOpt)):
                assert kind.min is not None and kind.max is not None, opt.dest
    out = subprocess.run([sys.executable, "-m", "oslo_config.generator", "--namespace",
                          "driver_kit", "--namespace", "lvm_driver"], capture_output=True,
                         text=True, check=True).stdout
    for needed in ("# Minimum value: 0\n# Maximum value: 100\n#reserved_percentage = 0",
                   "# Possible values:\n# none - no wipe\n# zero - overwrite with zeros\n"
                   "#volume_clear = zero",
                   "# Minimum value: 0.01\n# Maximum value: 86400.0\n"
                   "#lvm_command_timeout = 120.0",
                   "# Possible values:\n# standard - the test of Cinder's CapacityFilter\n"):
        assert needed in out, needed


def test_all_kit_and_driver_options_are_read_at_load(tmp_path):
    """A bad value of any driver option fails load_backend_config, not its first use."""
    assert {opt.dest for opt in LVM_OPTS} & {"volume_clear", "lvm_command_timeout"}
    conf = make_conf([write_conf(tmp_path, "lvm_read_session_max_commands = 0")])
    load_backend_config(conf, "b")  # without the driver's options: not judged
    with pytest.raises(ConfigError, match="lvm_read_session_max_commands = '0'"):
        load_backend_config(conf, "b", extra_opts=LVM_OPTS)
    assert {opt.dest for opt in KIT_OPTS} <= {opt.dest for opt in dict(list_opts())["backend"]}


def test_the_configuration_doc_states_each_range_as_the_options_do():
    """docs/configuration.md's table says what option_rule() says for every option with
    a range or choices (and lists each of those)."""
    from pathlib import Path

    from driver_kit.config import option_rule

    text = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    table = text.split("| option | must be |")[1].split("\n\n")[0]
    rows = {}
    for line in table.splitlines()[2:]:
        names, rule = line.strip("|").split("|")
        for name in names.replace("`", "").split(","):
            rows[name.strip()] = rule.strip()
    judged = [opt for opt in [*KIT_OPTS, *LVM_OPTS]
              if getattr(opt.type, "choices", None) or isinstance(
                  opt, (cfg.IntOpt, cfg.FloatOpt, cfg.BoolOpt))]
    assert {opt.dest for opt in judged} <= set(rows)
    for opt in judged:
        assert rows[opt.dest].startswith(option_rule(opt)), opt.dest
