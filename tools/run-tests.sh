#!/usr/bin/env bash
# The whole test suite, installing what it needs on a fresh machine:
#   1. a venv (.venv) with the project and its test extra;
#   2. every host test: unit, Cinder agreement, simulator functional scenarios,
#      compliance harness, the fault campaign at CI size (pytest, warnings as
#      errors, zero tests = failure);
#   3. alongside 2, the real-LVM lane: the functional scenarios, the compliance harness, a short
#      fault campaign and Cinder's services (RabbitMQ, MariaDB, cinder-api, -scheduler,
#      -volume) attaching a volume through LIO and open-iscsi, on a real thin pool
#      inside a VM (tests/realvm). Needs root; installs its Debian packages itself.
#      Under CI=true it is mandatory; elsewhere, without root, it is skipped
#      with one loud line saying why.
# Results (JUnit XML) go to test-results/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
die() { echo "run-tests: $*" >&2; exit 2; }

if [ ! -x .venv/bin/python ]; then
    command -v "$python" >/dev/null || die "no $python: install Python 3.11 or newer"
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || die "$python is older than 3.11 (the project needs 3.11+): set PYTHON=python3.11"
    # Debian and Ubuntu ship venv's ensurepip in a package of its own
    if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
        [ "$(id -u)" = 0 ] || die "$python cannot make a venv: apt-get install python3-venv (as root)"
        echo "run-tests: installing python3-venv" >&2
        apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends python3-venv >/dev/null
    fi
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test,cinder,coordination]'
# tests/ecosystem/test_devstack.py lints the DevStack plugin with ShellCheck;
# tests/ecosystem/test_cinder_datapath.py converts images with qemu-img;
# tests/unit/test_coordination.py runs a real etcd (Debian's etcd-server);
# tests/ecosystem/test_cinder_deployment.py runs RabbitMQ and MariaDB (private
# instances it starts and stops itself)
for tool in shellcheck:shellcheck qemu-img:qemu-utils etcd:etcd-server \
        rabbitmq-server:rabbitmq-server mariadbd:mariadb-server; do
    if ! command -v "${tool%%:*}" >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get install -y -q "${tool#*:}" >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null && apt-get install -y -q "${tool#*:}" >/dev/null; } \
            || echo "run-tests: could not install ${tool#*:}" >&2
    fi
done
mkdir -p test-results

# The real-LVM lane, when it runs, boots its VM while the host lane runs: the
# lanes share nothing but the checkout, and the VM spends much of its time
# waiting on its emulated devices. Its output goes to test-results/realvm.log,
# shown when it ends.
vm_pid=""
# a run stopped from outside (CI's limit, ^C) takes the VM down with it:
# run_in_vm.sh passes the signal on to vng and qemu
stop_vm_lane() {
    if [ -n "$vm_pid" ]; then kill -TERM "$vm_pid" 2>/dev/null || true; fi
}
# ...and shows how far the VM had got, which would otherwise be lost with it
stopped_from_outside() {
    if [ -n "$vm_pid" ] && [ -f test-results/realvm.log ]; then
        echo "===== real-LVM lane, stopped (test-results/realvm.log) =====" >&2
        tail -n 200 test-results/realvm.log >&2
    fi
    stop_vm_lane
    exit 143
}
trap stop_vm_lane EXIT
trap stopped_from_outside TERM INT
if [ "${DK_SKIP_REAL_LVM:-0}" = 1 ] && [ "${CI:-}" != true ]; then
    echo "run-tests: REAL-LVM LANE NOT RUN: DK_SKIP_REAL_LVM=1" >&2
elif [ "$(id -u)" != 0 ]; then
    if [ "${CI:-}" = true ]; then echo "run-tests: the real-LVM lane needs root in CI" >&2; exit 1; fi
    echo "run-tests: REAL-LVM LANE NOT RUN: needs root (it installs qemu and boots a VM)" >&2
else
    bash tests/realvm/install_deps.sh .venv/bin/python
    # compiled once here, so the guest (its imports slow over 9p) compiles nothing
    .venv/bin/python -m compileall -q -j 0 driver_kit lvm_driver contrib tests >/dev/null
    # Cinder's database for the services in the guest, made here in seconds (alembic's
    # db sync takes minutes in the guest): tests/ecosystem/test_cinder_services_realvm.py
    .venv/bin/python -m tests.ecosystem.deployment test-results/cinder-schema.sql
    echo "run-tests: real-LVM lane started in a VM (output: test-results/realvm.log)" >&2
    # the lane grew (harness tour, campaign): give the VM room under TCG; and memory:
    # at the lane's end Cinder's five services run beside the lane's pytest, their data
    # on the guest's tmpfs, and 2G was not enough (the guest killed the pytest)
    DK_REALVM_TIMEOUT="${DK_REALVM_TIMEOUT:-3600}" DK_REALVM_MEMORY="${DK_REALVM_MEMORY:-4G}" \
        bash tests/realvm/run_in_vm.sh -- .venv/bin/python -m pytest tests/functional tests/compliance tests/campaign \
        tests/ecosystem/test_cinder_services_realvm.py \
        -m realvm -p no:cacheprovider --junitxml=test-results/realvm.xml -v \
        > test-results/realvm.log 2>&1 &
    vm_pid=$!
fi

status=0
.venv/bin/python -m pytest tests -m "not realvm" -p no:cacheprovider --timeout=600 \
    --junitxml=test-results/host.xml || status=$?

vm_status=0
if [ -n "$vm_pid" ]; then
    [ "$status" -eq 0 ] || echo "run-tests: host tests failed ($status); waiting for the real-LVM lane" >&2
    wait "$vm_pid" || vm_status=$?
    echo "===== real-LVM lane (test-results/realvm.log) =====" >&2
    cat test-results/realvm.log >&2
fi
if [ "$status" -eq 5 ]; then echo "run-tests: no host test ran" >&2; exit 1; fi
[ "$status" -eq 0 ] || { echo "run-tests: host tests failed ($status)" >&2; exit "$status"; }
[ "$vm_status" -eq 0 ] || { echo "run-tests: real-LVM lane failed ($vm_status)" >&2; exit "$vm_status"; }
echo "run-tests: all lanes passed"
