"""The documentation holds together: the configuration reference is what
oslo-config-generator makes of the options today, every link between the README
and docs/ lands on a file and heading that exist, and the README stays a landing
page."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted((REPO / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _tool():
    spec = importlib.util.spec_from_file_location("config_reference",
                                                  REPO / "tools" / "config_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_is_the_generators_output_of_the_options():
    tool = _tool()
    documented = tool.documented(tool.DOC.read_text(encoding="utf-8"))
    assert documented == tool.generated(), (
        "docs/operators.md's configuration reference is out of date: run "
        "`.venv/bin/python tools/config_reference.py`")
    assert "#volume_group = cinder-volumes" in documented  # the LVM driver's options too


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of ``path``."""
    anchors = set()
    text = _outside_code(path.read_text(encoding="utf-8"))
    for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def _outside_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def test_every_link_lands_on_a_file_and_a_heading_that_exist():
    broken = []
    for page in [REPO / "README.md", *DOCS]:
        for target in LINK.findall(_outside_code(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path_part, _, anchor = target.partition("#")
            path = (page.parent / path_part).resolve() if path_part else page
            if not path.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_the_readme_is_a_landing_page_with_its_documentation_list():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    headings = re.findall(r"^## (.+)$", readme, re.MULTILINE)
    assert headings[:2] == ["Set up", "A five-minute tour"]
    assert headings[-1] == "Documentation"  # the list others add their one-line links to
    listed = set(re.findall(r"\]\(docs/([\w.-]+\.md)", readme.split("\n## Documentation\n")[1]))
    assert listed == {page.name for page in DOCS}, "every page of docs/ is listed"


def test_no_ini_sample_in_the_docs_puts_a_comment_after_a_value():
    """oslo.config (and cinder.conf) read ``mycluster  # ...`` as the value itself."""
    for page in [REPO / "README.md", *DOCS]:
        for block in re.findall(r"^```ini\n(.*?)^```", page.read_text(encoding="utf-8"),
                                re.MULTILINE | re.DOTALL):
            for line in block.splitlines():
                if "=" in line and not line.lstrip().startswith(("#", ";")):
                    value = line.split("=", 1)[1]
                    assert not re.search(r"\s[;#]", value), f"{page.name}: {line}"
