#!/usr/bin/env bash
# Mutation testing of the compliance harness (see docs/mutation.md):
#   tests/mutation/run.sh [sparse|memory ...] [--doc docs/mutation.md] [--sample N] ...
# Mutants are made in a scratch copy of the tree, never in this checkout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python="${PYTHON:-.venv/bin/python}"
"$python" -c 'import cosmic_ray' 2>/dev/null \
    || { echo "run.sh: cosmic-ray is missing: pip install -e '.[test]'" >&2; exit 2; }
exec "$python" -m tests.mutation.run "$@"
