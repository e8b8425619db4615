"""One cinder-volume host of an active-active test: the adapter on a shared array.

    python tests/ecosystem/cinder_coordination_side.py WORKDIR

WORKDIR holds this host's ``cinder.conf`` (its own lock_path, database and
coordination settings). The service starts as ``cinder-volume`` does, in the
cluster the file names if any; then it writes ``WORKDIR/ready``, waits for
``go`` beside WORKDIR, creates one 2 GiB volume through the adapter and writes
the outcome and the kit's coordination URL to ``WORKDIR/answer.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.ecosystem import cinder_side as side  # noqa: E402 (sets up Cinder first)

from cinder import objects  # noqa: E402
from oslo_config import cfg  # noqa: E402

BACKEND = "kit-shared"
# cinder-volume's own option (cinder/cmd/volume.py, whose import would monkey-patch)
side.CONF.register_opt(cfg.StrOpt("cluster", help="Active-active cluster of this service."))


def main(workdir: Path) -> int:
    side.start(workdir)
    host = f"{workdir.name}@{BACKEND}"
    manager = side.volume_service(BACKEND, host, cluster=side.CONF.cluster)
    driver = manager.driver
    volume = objects.Volume(side.ctxt(), size=2, host=f"{host}#fast", status="creating",
                            attach_status="detached", project_id="project",
                            user_id="user", availability_zone="nova")
    volume.create()
    (workdir / "ready").touch()
    while not (workdir.parent / "go").exists():
        time.sleep(0.02)
    answer = {"initialized": driver.initialized,
              "url": driver.kit.configuration.coordination_backend_url,
              "error": side.error_of(lambda: driver.create_volume(volume))}
    (workdir / "answer.json").write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
