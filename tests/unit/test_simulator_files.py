"""Nothing lost by a bad simulator file: an empty or blank state file, or a missing one
whose PV file still holds the VG, is one line naming the file and what to do, exit 1
from ``driver-kit``, an error from the Python API, and both files are left as they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driver_kit.cli import main
from lvm_driver.simulator import LVMSimulator
from lvm_driver.simulator.errors import SimulatorError
from lvm_driver.simulator.sizes import PV_METADATA_BYTES


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    """The CLI's default state file, holding a VG with one volume."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["create", "volume-1", "1"]) == 0
    path = tmp_path / "state" / "driver-kit" / "simulator.json"
    assert path.is_file() and _pv(path).is_file()
    return path


def _pv(state: Path) -> Path:
    return Path(f"{state}.pv-dkvg")


def _snapshot(path: Path) -> tuple | None:
    """What the simulator could change of ``path``: its size, modification time and
    the bytes it writes (a PV file is sparse: its headers and metadata area)."""
    if not path.exists():
        return None
    info = path.stat()
    with open(path, "rb") as handle:
        return info.st_size, info.st_mtime_ns, handle.read(PV_METADATA_BYTES)


def _refused(capsys, state: Path, argv: list[str], *needles: str) -> None:
    capsys.readouterr()
    before = _snapshot(state), _snapshot(_pv(state))
    code = main(argv)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 1 and out == "", (code, out, err)
    assert len(lines) == 2 and lines[0].startswith("(no --config-file")
    assert lines[1].startswith("error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in lines[1], lines[1]
    assert (_snapshot(state), _snapshot(_pv(state))) == before


@pytest.mark.parametrize("content", [b"", b"  \n\t\n"], ids=["empty", "whitespace"])
@pytest.mark.parametrize("argv", [["stats"], ["create", "volume-2", "1"]],
                         ids=["stats", "create"])
def test_an_empty_or_blank_state_file_is_refused_and_kept(state, capsys, content, argv):
    state.write_bytes(content)
    _refused(capsys, state, argv, str(state), "is empty", "restore")
    assert state.read_bytes() == content


@pytest.mark.parametrize("argv", [["stats"], ["create", "volume-2", "1"]],
                         ids=["stats", "create"])
def test_a_missing_state_file_whose_pv_file_holds_the_vg_is_refused(state, capsys, argv):
    state.unlink()
    _refused(capsys, state, argv, str(_pv(state)), "restore")
    assert not state.exists()


def test_the_python_api_refuses_them_too(state):
    simulator = LVMSimulator(state_file=str(state))
    state.write_bytes(b"\n")
    with pytest.raises(SimulatorError, match="is empty"):
        simulator.state()
    state.unlink()
    before = _snapshot(_pv(state))
    with pytest.raises(SimulatorError, match="restore"):
        simulator.create_vg("dkvg", 10 * 1024 ** 3)
    assert _snapshot(_pv(state)) == before and not state.exists()


def test_a_fresh_start_still_makes_its_files(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["create", "volume-1", "1"]) == 0
    assert main(["create", "volume-2", "1"]) == 0  # the second run reads the first's
    state = tmp_path / "state" / "driver-kit" / "simulator.json"
    lvs = json.loads(state.read_text())["vgs"]["dkvg"]["lvs"]
    assert {"volume-1", "volume-2"} <= set(lvs)
