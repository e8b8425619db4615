"""``python -m lvm_driver.simulator --state FILE COMMAND...``: see ``cli``."""

import sys

from lvm_driver.simulator.cli import main

sys.exit(main())
