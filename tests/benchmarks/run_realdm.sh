#!/usr/bin/env bash
# The stats-refresh benchmark on real device-mapper, one command, as root:
#
#   sudo bash tests/benchmarks/run_realdm.sh [--lvs 1000] [--runs 5] [--create-budget-s 1500]
#   sudo bash tests/benchmarks/run_realdm.sh --unprivileged [--lvs 1000] [--runs 5]
#   sudo bash tests/benchmarks/run_realdm.sh --pair [--lvs 1000] [--runs 5] [--profile 5]
#   sudo bash tests/benchmarks/run_realdm.sh --creates [--sizes 1000,10000] [--runs 5]
#
# (--unprivileged: the driver as user cinder through its privileged daemon against
# os-brick through cinder-rootwrap, tests/benchmarks/realdm_unprivileged.py; --pair:
# that and the root path side by side on one VG, and where a refresh after a change
# goes, tests/benchmarks/realdm_pair.py; both with the project's .venv; steps 1 and 2
# below otherwise.)
#
# 1. makes the benchmark venv (tests/benchmarks/.venv: the project + os-brick from
#    PyPI, see make_venv.sh) and puts virtme-ng into it with the VM lane's
#    tests/realvm/install_deps.sh (qemu, a kernel with dm-thin-pool, lvm2, ...);
# 2. boots one throw-away VM (tests/realvm/run_in_vm.sh: qemu TCG, the host's
#    filesystem read-only, the repository read-write) and runs
#    `python -m tests.benchmarks.realdm` in it, which builds its own VG on a
#    sparse file in guest RAM and prints the Markdown report.
# Options go through to tests.benchmarks.realdm. Host variables: DK_REALVM_TIMEOUT
# (default here 3600 s: building 1,000 thin LVs under TCG takes a while),
# DK_REALVM_MEMORY (default 2G), DK_REALVM_CPUS (default 2).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

[ "$(id -u)" = 0 ] || { echo "benchmark: needs root (the VM lane): run sudo bash tests/benchmarks/run_realdm.sh" >&2; exit 2; }

export DK_BENCH_COMMAND="sudo bash tests/benchmarks/run_realdm.sh${*:+ $*}"
export DK_REALVM_TIMEOUT="${DK_REALVM_TIMEOUT:-3600}"
if [ "${1:-}" = "--creates" ]; then
    # creates and refreshes at 1,000 and 10,000 thin LVs against bare lvcreate and
    # Cinder's LVM driver: the project's venv, which has Cinder and os-brick
    # (tests/benchmarks/realdm_creates.py)
    shift
    bash "$repo/tests/realvm/install_deps.sh" "$repo/.venv/bin/python" >&2
    exec bash "$repo/tests/realvm/run_in_vm.sh" -- \
        "$repo/.venv/bin/python" -W "ignore::DeprecationWarning" \
        -m tests.benchmarks.realdm_creates "$@"
fi
if [ "${1:-}" = "--unprivileged" ] || [ "${1:-}" = "--pair" ]; then
    # the driver as user cinder through its privileged daemon, os-brick through
    # cinder-rootwrap (--pair: and both as root, in the same run): the project's venv,
    # which has Cinder, os-brick, oslo.privsep and oslo.rootwrap
    # (tests/benchmarks/realdm_unprivileged.py, realdm_pair.py)
    module=realdm_unprivileged
    [ "$1" = "--pair" ] && module=realdm_pair
    shift
    bash "$repo/tests/realvm/install_deps.sh" "$repo/.venv/bin/python" >&2
    exec bash "$repo/tests/realvm/run_in_vm.sh" -- \
        "$repo/.venv/bin/python" -W "ignore::DeprecationWarning" \
        -m "tests.benchmarks.$module" "$@"
fi
venv_python="$(bash "$here/make_venv.sh")"
bash "$repo/tests/realvm/install_deps.sh" "$venv_python" >&2

export DK_REALVM_PYTHON="$venv_python"
# the venv's python by its path under the repo, so the guest finds it too
exec bash "$repo/tests/realvm/run_in_vm.sh" -- \
    "tests/benchmarks/.venv/bin/python" -W "ignore::DeprecationWarning" \
    -m tests.benchmarks.realdm "$@"
