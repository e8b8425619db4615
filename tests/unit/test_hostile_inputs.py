"""Generated hostile input (hypothesis) over the command's arguments, its configuration
values and the simulator's state file: every run ends in an exit code the README
documents and at most a few lines, never a traceback, and the volume already there
keeps its data (a failed command changes no file)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driver_kit import GiB
from driver_kit.cli import main
from driver_kit.config import KIT_OPTS
from lvm_driver.driver import LVM_OPTS, VOLUME_TAG
from lvm_driver.simulator import LVMSimulator

EXIT_CODES = {0, 1, 2, 3, 4}  # ok, error, usage or config, refused, not found
EXAMPLES = 80  # per test: 240 generated cases in all
#: options whose value starts processes, reaches the network or points the run at
#: other files: the examples keep them as the lab sets them
FIXED = {"lvm_privilege", "lvm_root_helper", "lvm_backend", "lvm_simulator_state_file",
         "lock_path", "coordination_backend_url", "lvm_conf_file", "volume_driver"}
OPTIONS = sorted(opt.dest for opt in [*KIT_OPTS, *LVM_OPTS] if opt.dest not in FIXED)

SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def private_state_home() -> Iterator[None]:
    """The command's default state directory, away from the user's."""
    home = tempfile.mkdtemp(prefix="dk-hostile-home-")
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = home
    try:
        yield
    finally:
        if old is None:
            del os.environ["XDG_STATE_HOME"]
        else:
            os.environ["XDG_STATE_HOME"] = old
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def lab(extra_lines: str = "") -> Iterator[tuple[Path, str, LVMSimulator]]:
    """A fresh backend holding volume ``keep`` and its config file (with
    ``extra_lines`` in the backend's section)."""
    root = Path(tempfile.mkdtemp(prefix="dk-hostile-"))
    try:
        simulator = LVMSimulator(state_file=str(root / "state.json"))
        simulator.create_vg("vg", 20 * GiB)
        simulator.run(["lvcreate", "-T", "-L", "10g", "vg/pool"])
        simulator.run(["lvcreate", "-T", "-V", "1g", "-n", "keep", "--addtag", VOLUME_TAG,
                       "vg/pool"])
        simulator.write_data("vg", "keep", 4096)
        conf = root / "driver-kit.conf"
        conf.write_text(f"[DEFAULT]\nenabled_backends = b\n[b]\nlvm_backend = simulator\n"
                        f"lvm_simulator_state_file = {root / 'state.json'}\n"
                        f"volume_group = vg\nlvm_thin_pool_name = pool\n"
                        f"lock_path = {root / 'locks'}\n{extra_lines}", encoding="utf-8")
        yield root, str(conf), simulator
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(argv: list[str]) -> tuple[int, str]:
    """The command in this process: its exit code and everything it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue() + err.getvalue()


def files(root: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(root.iterdir())
            if path.is_file() and not path.name.endswith(".lock")}


def keep_of(simulator: LVMSimulator) -> Any:
    lv = simulator.state()["vgs"]["vg"]["lvs"]["keep"]
    return lv["extents"], lv["tags"], simulator.data_bytes("vg", "keep")


def judge(code: int, output: str) -> None:
    assert code in EXIT_CODES, (code, output)
    assert "Traceback" not in output and "unexpected" not in output, output


WORDS = st.sampled_from(["stats", "pools", "create", "extend", "delete", "snapshot",
                         "delete-snapshot", "placement", "check-config", "--json", "--type",
                         "thin", "thick", "--pool", "pool", "vg", "--backend", "b",
                         "--config-file", "volume-a", "1", "0", "-1", "1e9", "nan",
                         "8589934593", "1.5", "", " ", "--", "-", "keep-not", "\x00",
                         "../x", "a" * 300, "☃"])
TOKENS = st.lists(st.one_of(WORDS, st.text(max_size=12)), max_size=6)


@SETTINGS
@given(tokens=TOKENS, with_config=st.booleans())
def test_hostile_command_lines(tokens: list[str], with_config: bool) -> None:
    if "keep" in tokens:  # deleting or extending the kept volume is a legal change
        return
    with lab() as (root, conf, simulator):
        before = keep_of(simulator)
        code, output = run((["--config-file", conf] if with_config else []) + tokens)
        judge(code, output)
        assert keep_of(simulator) == before


VALUES = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=20),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-2 ** 70, max_value=2 ** 70).map(str),
    st.sampled_from(["auto", "none", "zero", "shred", "true", "yes", "1e308", "-0", "$x",
                     "${b.volume_group}", "%(x)s", "0x10", " 5 ", "'quoted'", "[a]"]))


@SETTINGS
@given(values=st.dictionaries(st.sampled_from(OPTIONS), VALUES, min_size=1, max_size=3),
       command=st.sampled_from([["stats"], ["create", "fresh", "1"], ["check-config"],
                                ["extend", "keep", "2"], ["delete", "keep"]]))
def test_hostile_config_values(values: dict[str, str], command: list[str]) -> None:
    lines = "".join(f"{name} = {value}\n" for name, value in values.items())
    with lab(lines) as (root, conf, simulator):
        before, saved = keep_of(simulator), files(root)
        code, output = run(["--config-file", conf, *command])
        judge(code, output)
        if code == 2:  # refused at load: before any backend call
            assert files(root) == saved, output
        if code != 0 or command[0] in ("stats", "create", "check-config"):
            assert keep_of(simulator) == before


def _mutations() -> st.SearchStrategy[tuple[list[str], Any]]:
    paths = st.sampled_from([
        ["vgs", "vg", "extent_size"], ["vgs", "vg", "extent_count"], ["vgs", "vg", "lvs"],
        ["vgs", "vg", "lvs", "keep", "extents"], ["vgs", "vg", "lvs", "keep", "tags"],
        ["vgs", "vg", "lvs", "keep", "kind"], ["vgs", "vg", "lvs", "keep", "pool"],
        ["vgs", "vg", "lvs", "keep", "active"], ["vgs", "vg", "lvs", "pool", "extents"],
        ["vgs", "vg", "lvs", "pool", "chunks"], ["vgs", "vg", "lvs", "pool", "chunk_bytes"],
        ["vgs", "vg", "pvs"], ["vgs", "vg", "seqno"], ["pvs"], ["faults"], ["version"]])
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 64, 2 ** 64),
                       st.floats(allow_nan=False), st.text(max_size=8))
    values = st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
        max_leaves=6)
    return st.tuples(paths, values)


@SETTINGS
@given(mutation=_mutations(),
       command=st.sampled_from([["stats"], ["create", "fresh", "1"], ["delete", "keep"],
                                ["snapshot", "snap", "keep"]]))
def test_hostile_state_files(mutation: tuple[list[str], Any], command: list[str]) -> None:
    path, value = mutation
    with lab() as (root, conf, simulator):
        state_file = root / "state.json"
        state = json.loads(state_file.read_text())
        node = state
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        state_file.write_text(json.dumps(state))
        saved = files(root)
        code, output = run(["--config-file", conf, *command])
        judge(code, output)
        if "is damaged" in output or "is not a simulator state" in output:
            assert code != 0 and files(root) == saved, output  # never overwritten
