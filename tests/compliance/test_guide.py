"""A newcomer follows docs/writing-a-driver.md to a green run: the toy driver of its
section 6, taken from the guide as written, passes every must check through
``driver-kit check``, and the checks it cannot take are skipped saying why."""

import json
import re
import sys
from pathlib import Path

from driver_kit.compliance import CATALOGUE, REQUIRED_HOOKS
from driver_kit.compliance.cli import main_check

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "writing-a-driver.md"


def _section(text, heading):
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _blocks(section, language):
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_the_guides_toy_driver_passes_every_must_check(tmp_path, monkeypatch, capsys):
    section = _section(GUIDE.read_text(encoding="utf-8"), "6. A first green run")
    (tmp_path / "toy_driver.py").write_text("\n\n".join(_blocks(section, "python")))
    [config] = _blocks(section, "ini")
    (tmp_path / "toy.conf").write_text(config.replace("/tmp/toy", str(tmp_path / "toy")))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        code = main_check(["--config-file", str(tmp_path / "toy.conf"),
                           "--json", str(tmp_path / "report.json")])
    finally:
        sys.modules.pop("toy_driver", None)
    table = capsys.readouterr().out
    assert code == 0, table
    results = {r["id"]: r for r in json.loads((tmp_path / "report.json").read_text())["results"]}
    assert {r["status"] for r in results.values()} == {"passed", "skipped"}
    skipped = {i: r["reason"] for i, r in results.items() if r["status"] == "skipped"}
    # what the toy cannot do is said as such, never as a lack of room
    assert all("no pool has room" not in reason for reason in skipped.values()), skipped
    assert skipped["ops.copy-readback"].startswith("not supported by the driver")
    assert skipped["ops.snapshot-existing"].startswith("snapshots not supported")
    assert results["hooks.required"]["status"] == "passed"
    assert json.loads((tmp_path / "toy" / "array.json").read_text())["volumes"] == {}
    # the guide names every hook with its signature, and every check is in its rules
    guide = GUIDE.read_text(encoding="utf-8")
    assert all(f"`{name}(driver" in guide for name in REQUIRED_HOOKS)
    families = {c.id.split(".")[0] for c in CATALOGUE}
    assert all(f"`{family}.*`" in guide for family in families - {"truth"})
    assert all(f"`{c.id}`" in guide for c in CATALOGUE if c.id.startswith("truth."))


def test_the_guides_three_front_ends_run_outside_the_checkout(tmp_path):
    """Section 8's commands, as a newcomer types them in the toy driver's directory
    (with this checkout's venv for ``~/driver-kit/.venv``): each front end goes green."""
    import os
    import subprocess

    guide = GUIDE.read_text(encoding="utf-8")
    first = _section(guide, "6. A first green run")
    toy = tmp_path / "toy"
    toy.mkdir()
    (toy / "toy_driver.py").write_text("\n\n".join(_blocks(first, "python")))
    [config] = _blocks(first, "ini")
    (toy / "toy.conf").write_text(config.replace("/tmp/toy", str(tmp_path / "toy-state")))
    front_ends = _section(guide, "8. The checks and the three front ends")
    [testcase] = _blocks(front_ends, "python")
    (toy / "test_toy_compliance.py").write_text(testcase)
    venv = str(Path(sys.executable).parent.parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DRIVER_KIT_CONFIG")}
    repo = str(GUIDE.parents[1])
    for block in _blocks(front_ends, "sh"):
        # the kit itself from this checkout (an installed kit needs nothing more)
        script = block.replace("cd ~/toy", f"cd {toy}").replace("~/driver-kit/.venv", venv) \
            .replace("export PYTHONPATH=$PWD", f"export PYTHONPATH=$PWD:{repo}")
        proc = subprocess.run(["bash", "-euc", f"export PYTHONPATH={repo}\n{script}"],
                              cwd=toy, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, (block, proc.stdout[-3000:], proc.stderr[-3000:])
    assert json.loads((toy / "report.json").read_text())["exit_code"] == 0
    assert (toy / "report.xml").exists()
