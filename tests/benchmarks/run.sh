#!/usr/bin/env bash
# The benchmark of issue 7, one command on a fresh Debian/Ubuntu machine, as root:
#
#   sudo bash tests/benchmarks/run.sh [--runs 5] [--markdown-out FILE] [--json-out FILE]
#
# 1. installs lvm2 and util-linux (and python3-venv) with apt-get when missing;
# 2. makes a benchmark venv (tests/benchmarks/.venv, apart from the project's
#    .venv so os-brick's dependencies never reach the test suite) with the
#    project and os-brick from PyPI;
# 3. runs `python -m tests.benchmarks.run`, which builds its own volume group on
#    a loop-backed sparse file with its own lvm.conf (only that loop device is
#    seen; the host's LVM state is not touched) and prints the report.
# Loop devices and work files are removed on exit, also after a failure or ^C.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

die() { echo "benchmark: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (losetup, pvcreate, vgcfgrestore): run sudo bash tests/benchmarks/run.sh"

if ! command -v lvs >/dev/null || ! command -v losetup >/dev/null || ! command -v wipefs >/dev/null; then
    echo "benchmark: installing lvm2 util-linux" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q --no-install-recommends lvm2 util-linux
fi

venv_python="$(bash "$here/make_venv.sh")"

# Whatever happens, no loop device of ours outlives the run.
work="$(mktemp -d /var/tmp/driver-kit-bench.XXXXXX)"
cleanup() {
    find "$work" -name '*.img' 2>/dev/null | while read -r img; do
        losetup -j "$img" 2>/dev/null | cut -d: -f1 | xargs -r -n1 losetup -d 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export TMPDIR="$work"
export DK_BENCH_COMMAND="sudo bash tests/benchmarks/run.sh${*:+ $*}"
export PYTHONWARNINGS="ignore::DeprecationWarning"
"$venv_python" -m tests.benchmarks.run "$@"
