#!/usr/bin/env bash
# Make (or reuse) the benchmark venv, tests/benchmarks/.venv: the project and
# os-brick from PyPI, apart from the project's .venv so os-brick's dependencies
# never reach the test suite. Prints the venv's python. Used by run.sh and
# run_realdm.sh (as root: it may apt-get install python3-venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

die() { echo "benchmark: $*" >&2; exit 2; }
python="${PYTHON:-python3}"
command -v "$python" >/dev/null || die "no $python: install Python 3.11 or newer"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "$python is older than 3.11 (the project needs 3.11+): set PYTHON=python3.11"
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    echo "benchmark: installing python3-venv" >&2
    apt-get update -q >&2 && apt-get install -y -q --no-install-recommends python3-venv >&2
fi
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import os_brick, driver_kit, psutil' 2>/dev/null; then
    echo "benchmark: preparing $venv (project + os-brick from PyPI)" >&2
    "$python" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install -q --upgrade pip >&2
    "$venv/bin/python" -m pip install -q -e "$repo" os-brick >&2
fi
echo "$venv/bin/python"
