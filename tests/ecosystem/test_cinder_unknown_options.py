"""Inside Cinder, the adapter logs each option a backend section sets that nothing
registered there, with the nearest known name (oslo.config ignores it silently);
what Cinder, the adapter, the kit or the driver define passes unremarked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.ecosystem.support import REPO, requires_cinder

# as Cinder's volume manager builds its backend's configuration, then the adapter
SIDE = """
import logging, sys, warnings
warnings.simplefilter("ignore")
from oslo_config import cfg
from cinder import objects
objects.register_all()
from cinder.volume import configuration, manager
import contrib.cinder_adapter as adapter
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s", stream=sys.stdout,
                    force=True)
cfg.CONF(["--config-file", sys.argv[1]], project="cinder", default_config_files=[])
conf = configuration.Configuration(manager.volume_manager_opts, config_group="kit")
driver = adapter.DriverKitVolumeDriver(configuration=conf, host="host")
assert driver._config_error is None, driver._config_error
driver._warn_unknown_options()
"""


@requires_cinder
def test_unknown_options_in_the_backend_section_are_warnings(tmp_path: Path) -> None:
    conf = tmp_path / "cinder.conf"
    conf.write_text(
        "[DEFAULT]\nenabled_backends = kit\n"
        "[kit]\nvolume_driver = contrib.cinder_adapter.DriverKitVolumeDriver\n"
        "volume_backend_name = kit\ntarget_helper = fake\n"
        "max_over_subscripton_ratio = 2\n"            # line 7: misspelled
        "volume_group = vg\nlvm_backend = simulator\nvolume_clear = zero\n"
        "driver_kit_driver = lvm_driver.driver.ThinLVMDriver\nstats_timeout = 30\n"
        "iscsi_ip_address = 192.0.2.1\n"              # line 13: gone from Cinder
        "[backend_defaults]\nreserved_percentage = 5\n")
    proc = subprocess.run([sys.executable, "-c", SIDE, str(conf)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"WARNING [kit] max_over_subscripton_ratio ({conf}:7): unknown option, ignored; "
        f"did you mean max_over_subscription_ratio?",
        f"WARNING [kit] iscsi_ip_address ({conf}:13): unknown option, ignored; did you "
        f"mean iser_ip_address?"]
