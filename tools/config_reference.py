#!/usr/bin/env python3
"""The configuration reference in docs/operators.md, generated from the options.

Writes, between the ``ini`` fence after "## Configuration reference", exactly what
``oslo-config-generator --namespace driver_kit --namespace lvm_driver`` prints, so
the reference cannot drift from the options. Run from the project root after
changing an option (``tests/unit/test_docs.py`` fails until then):

    .venv/bin/python tools/config_reference.py
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from oslo_config import cfg, generator

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "operators.md"
NAMESPACES = ("driver_kit", "lvm_driver")
BLOCK = re.compile(r"(\n## Configuration reference\n.*?```ini\n)(.*?)(```\n)", re.DOTALL)


def generated() -> str:
    """The sample config oslo-config-generator writes for the project's namespaces."""
    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    conf([arg for namespace in NAMESPACES for arg in ("--namespace", namespace)],
         project="driver_kit", default_config_files=[], default_config_dirs=[])
    out = io.StringIO()
    generator.generate(conf, output_file=out)
    return out.getvalue().rstrip("\n") + "\n"


def documented(text: str) -> str:
    """The reference block as the document has it."""
    match = BLOCK.search(text)
    if match is None:
        raise SystemExit(f"{DOC}: no ini block under '## Configuration reference'")
    return match.group(2)


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    documented(text)  # the block must be there
    DOC.write_text(BLOCK.sub(lambda m: m.group(1) + generated() + m.group(3), text, count=1),
                   encoding="utf-8")
    print(f"wrote the configuration reference into {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the options of this checkout, not an installed copy
    sys.exit(main())
