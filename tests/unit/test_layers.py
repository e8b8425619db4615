"""The packages import one way: no import circle, and the command line on top.

Read from the source (``ast``), every import counted, those inside functions
too: a lazy import that closes a circle is still a circle in the design.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("driver_kit", "lvm_driver", "contrib")
#: front ends nothing else may import, each with the one module that starts it
TOP = {"driver_kit.console": frozenset(), "driver_kit.cli": frozenset({"driver_kit.console"})}
#: circles closed by a lazy import in driver_kit/compliance/checks.py, which takes
#: the spec loader from the runner rather than from driver_kit.compliance.spec
KNOWN_CIRCLES = {frozenset({"driver_kit.compliance.checks", "driver_kit.compliance.runner"})}
#: lvm_driver's subpackages by concern (docs/architecture.md), bottom first, each with
#: the others it may import: the read path never reaches the commands or the policy
LVM_DRIVER_GROUPS = {
    "run": set(),
    "read": {"run"},
    "commands": {"run", "read"},
    "policy": {"run", "read", "commands"},
    "compliance": {"run", "commands", "policy"},
    "simulator": {"run", "read"},
    # the daemon checks names, builds argv, reads headers, refuses LVs the driver does
    # not own (policy.tags) and serves a simulated backend's state file too
    "privileged": {"run", "read", "commands", "policy", "simulator"},
}
#: lvm_driver's top-level modules: its face, the paths configs name, the composition
LVM_DRIVER_TOP = {"lvm_driver", "lvm_driver.driver", "lvm_driver.backends",
                  "lvm_driver.privsep_runner", "lvm_driver.demo"}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (a package's own face excepted)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for imported in names:
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            # a module importing its own package's __init__ is how packages work
            if imported and imported != name and not name.startswith(imported + "."):
                targets.add(imported)
    return targets


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, each found once (graphlib names one per attempt)."""
    graph = {name: set(targets) for name, targets in graph.items()}
    circles = []
    while True:
        try:
            graphlib.TopologicalSorter(graph).prepare()
            return circles
        except graphlib.CycleError as error:
            circle = error.args[1]  # [a, b, ..., a]
            circles.append(circle)
            graph[circle[1]].discard(circle[0])  # graphlib lists it as dependency order


def test_the_walk_sees_the_packages_and_their_imports() -> None:
    graph = _graph()
    assert {"driver_kit.cli", "driver_kit.loading", "lvm_driver.simulator",
            "contrib.cinder_adapter"} <= graph.keys()
    assert "driver_kit.loading" in graph["driver_kit.cli"]
    assert "driver_kit.compliance.cli" in graph["driver_kit.cli"]  # a lazy import counts
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) != []


def test_no_import_circles() -> None:
    circles = [c for c in _circles(_graph()) if frozenset(c) not in KNOWN_CIRCLES]
    assert circles == [], "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_nothing_imports_the_command_line() -> None:
    importers = sorted(f"{name} imports {top}" for name, targets in _graph().items()
                       for top, starter in TOP.items() if top in targets and name not in starter)
    assert importers == []


def test_the_driver_does_not_know_it_may_be_simulated() -> None:
    """Only the composition (lvm_driver.backends, front ends, tests) picks the simulator."""
    assert "lvm_driver.simulator" not in _graph()["lvm_driver.driver"]
    assert "lvm_driver.simulator" in _graph()["lvm_driver.backends"]


def _group(module: str) -> str:
    """The subpackage of ``lvm_driver`` a module belongs to, or the top-level module itself."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in LVM_DRIVER_GROUPS):
        return parts[1]
    return module


def _external_imports(path: Path) -> set[str]:
    """The top-level names of what a module imports from outside the project."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.partition(".")[0])
    return found - set(PACKAGES)


def test_lvm_driver_is_grouped_by_concern() -> None:
    """Every module sits in a subpackage of the table, but the face and the composition."""
    modules = [name for name in _graph() if name.startswith("lvm_driver")]
    loose = sorted(name for name in modules
                   if name not in LVM_DRIVER_TOP and _group(name) not in LVM_DRIVER_GROUPS)
    assert loose == [], f"modules outside the groups of docs/architecture.md: {loose}"
    assert {_group(name) for name in modules} >= LVM_DRIVER_GROUPS.keys()
    graphlib.TopologicalSorter(LVM_DRIVER_GROUPS).prepare()  # the groups form no circle


def test_each_group_imports_only_the_groups_below_it() -> None:
    crossings = sorted(
        f"{name} imports {target}"
        for name, targets in _graph().items() if _group(name) in LVM_DRIVER_GROUPS
        for target in targets if target.startswith("lvm_driver.")
        and _group(target) not in LVM_DRIVER_GROUPS[_group(name)] | {_group(name)})
    assert crossings == []


def test_only_the_privsep_runner_reaches_the_privileged_daemon() -> None:
    """Root is one narrow door: the daemon's own package and its one client."""
    graph, modules = _graph(), _modules()
    clients = sorted(name for name, targets in graph.items()
                     if not name.startswith("lvm_driver.privileged")
                     and any(t.startswith("lvm_driver.privileged") for t in targets))
    assert clients == ["lvm_driver.privsep_runner"]
    privsep_users = sorted(name for name, path in modules.items()
                           if "oslo_privsep" in _external_imports(path))
    assert privsep_users == ["lvm_driver.privileged"]


def test_running_the_simulator_module_prints_no_warning() -> None:
    result = subprocess.run([sys.executable, "-W", "error", "-m", "lvm_driver.simulator"],
                            capture_output=True, text=True, timeout=60)
    assert result.stderr.startswith("usage:") and result.returncode == 2, result.stderr
