import subprocess
import sys

import pytest

from driver_kit.config import load_backend_config, make_conf
from driver_kit.exceptions import ConfigError


def write(tmp_path, text):
    path = tmp_path / "kit.conf"
    path.write_text(text)
    return str(path)


def test_defaults_follow_cinder():
    conf = load_backend_config()
    assert conf.max_over_subscription_ratio == 20.0
    assert conf.reserved_percentage == 0
    assert conf.over_provisioning_calculation == "standard"  # what Cinder's filter checks


def test_backend_sections(tmp_path):
    path = write(tmp_path, "[DEFAULT]\nenabled_backends = fast\n[fast]\n"
                           "max_over_subscription_ratio = auto\nreserved_percentage = 5\n"
                           "over_provisioning_calculation = standard\n")
    conf = load_backend_config(make_conf([path]), "fast")
    assert (conf.max_over_subscription_ratio, conf.reserved_percentage,
            conf.over_provisioning_calculation, conf.volume_backend_name) == \
        ("auto", 5, "standard", "fast")


@pytest.mark.parametrize("line, needle", [
    ("max_over_subscription_ratio = 0.5", "[fast] max_over_subscription_ratio = '0.5'"),
    ("max_over_subscription_ratio = lots", "max_over_subscription_ratio"),
    ("reserved_percentage = 101", "reserved_percentage = '101'"),
    ("reserved_percentage = half", "reserved_percentage"),
    ("over_provisioning_calculation = magic", "over_provisioning_calculation"),
])
def test_bad_values_name_section_option_and_value(tmp_path, line, needle):
    path = write(tmp_path, f"[DEFAULT]\nenabled_backends = fast\n[fast]\n{line}\n")
    with pytest.raises(ConfigError) as err:
        load_backend_config(make_conf([path]), "fast")
    assert needle in str(err.value)


def test_unknown_backend_and_missing_file(tmp_path):
    path = write(tmp_path, "[DEFAULT]\nenabled_backends = fast\n[fast]\n")
    with pytest.raises(ConfigError, match="unknown backend 'slow'"):
        load_backend_config(make_conf([path]), "slow")
    with pytest.raises(ConfigError, match="nope.conf: no such file"):
        make_conf([str(tmp_path / "nope.conf")])


def test_sample_config_generator_lists_every_option():
    out = subprocess.run([sys.executable, "-m", "oslo_config.generator",
                          "--namespace", "driver_kit"], capture_output=True, text=True,
                         check=True).stdout
    for name in ("enabled_backends", "max_over_subscription_ratio", "reserved_percentage",
                 "over_provisioning_calculation", "lock_path",
                 "capacity_warning_used_percent"):
        assert f"#{name} =" in out
