#!/usr/bin/env bash
# Runs INSIDE the virtme-ng guest (started by tests/realvm/run_in_vm.sh), never
# on the host. It gives the guest a real, empty LVM volume group and then runs
# the requested command from the repository root:
#
#   guest_setup.sh <host-scratch-dir>
#
# <host-scratch-dir> is the host directory run_in_vm.sh shared read-write with
# the guest. It holds `argv` (the command, NUL-separated) and `env` (variables
# passed through from the host); this script writes the command's exit code to
# `rc` there so the host can tell "command failed" from "VM never ran it".
#
# What the guest looks like (virtme-ng 1.42, Debian 6.1 kernel, --force-9p):
#   * `/` is the host's root over 9p, READ-ONLY; /etc, /usr, /var, /tmp, ... are
#     overlays whose upper layer is the guest's /run tmpfs (RAM, ~half of the
#     guest memory, ~980 MiB with --memory 2G). Writes there never reach the host.
#   * /etc/lvm is an EMPTY guest tmpfs (virtme-ng hides the host's LVM config on
#     purpose), so LVM starts with built-in defaults and no lvm.conf.
#   * systemd-udevd IS started by virtme-ng-init (Debian's udev package is pulled
#     in by linux-image-amd64), so LVM's default udev sync works, but it is slow
#     under TCG (thin-pool lvcreate ~5.3 s instead of ~1.3 s) and dmeventd would
#     be spawned for pool monitoring.
#   * Only what run_in_vm.sh passes with --rwdir (the repo and its scratch dir)
#     is writable on the host.
#   * virtme-ng-init leaks fds 3,4,5 (/dev/vport*p1) into the command; every LVM
#     command run from a shell then prints "File descriptor N (/dev/vport2p1)
#     leaked on lvs invocation" on stderr. LVM_SUPPRESS_FD_WARNINGS=1 (exported)
#     silences that; closing the fds instead loses guest output (see below).
#
# What LVM needs here, found by trial (see lvm.conf written below):
#   * modules: loop, dm-mod, dm-thin-pool (dm-snapshot only for thick snapshots;
#     loaded too, it is cheap). None are built in.
#   * activation/udev_sync=0 + udev_rules=0: LVM creates /dev/mapper nodes and
#     /dev/<vg>/<lv> links itself and never waits for udev cookies. Works with or
#     without a running udevd, and is 2-4x faster per lvcreate under TCG.
#   * activation/monitoring=0: no dmeventd (no daemon left behind, no autoextend
#     changing pool sizes behind the test's back).
#   * global/event_activation=0: udev-triggered pvscan must not auto-activate
#     anything when the loop device appears.
#   * devices/use_devicesfile=0 and a global_filter accepting only /dev/loop*:
#     no devices file to maintain, and LVM never looks at other guest devices.
#   * Nothing else: use_lvmetad no longer exists in LVM 2.03, locking_type is
#     gone too (file locks under /run/lock/lvm, a guest tmpfs, just work), and
#     DM_DISABLE_UDEV is unnecessary given udev_sync=0/udev_rules=0.
# The config goes to /etc/lvm/lvm.conf (guest-private tmpfs, checked below), the
# default place, so LVM picks it up even when the project's Python code builds
# its own environment for subprocesses. LVM_SYSTEM_DIR=/etc/lvm is exported
# anyway so code that honours/forwards it sees the same directory. The Python
# code does not have to pass anything to LVM.
#
# Exported to the command:
#   DK_REAL_LVM=1, DK_REAL_LVM_VG=<vg> (default dkvg), DK_REAL_LVM_PV=/dev/loopN,
#   LVM_SYSTEM_DIR=/etc/lvm, LVM_SUPPRESS_FD_WARNINGS=1.
# No thin pool is created here: tests create their own.
set -uo pipefail

scratch="${1:-}"
die() {
    echo "guest_setup.sh: ERROR: $*" >&2
    [ -d "$scratch" ] && echo "$*" > "$scratch/setup_error"
    exit 3
}

if [ -z "$scratch" ] || [ ! -f "$scratch/argv" ]; then
    die "usage: guest_setup.sh <scratch-dir with argv> (run it through tests/realvm/run_in_vm.sh)"
fi

# Refuse to run on the host: this script runs losetup/pvcreate.
grep -q 'virtme' /proc/cmdline || die "not inside a virtme-ng guest (no 'virtme' on the kernel command line)"
: > "$scratch/booted"  # the host's watchdog: the guest got this far

# virtme-ng-init leaks its /dev/vport*p1 fds (3,4,5) into the command. Do NOT
# close or redirect them: they are separate opens of the ports behind our
# stdout/stderr, and closing one makes virtio-console report the port closed,
# so the host silently loses the rest of the guest's stdout/stderr (seen here).
# LVM's complaint about them is silenced with LVM_SUPPRESS_FD_WARNINGS=1 below;
# Python's subprocess (close_fds=True by default) does not pass them on anyway.

# Variables passed through from the host (DK_*, PYTEST_*, CI).
# shellcheck disable=SC1091
[ -f "$scratch/env" ] && . "$scratch/env"

repo="${DK_REALVM_REPO:?run_in_vm.sh must pass DK_REALVM_REPO}"
vg="${DK_REAL_LVM_VG:-dkvg}"
pv_size="${DK_REAL_LVM_PV_SIZE:-4G}"

for m in loop dm-mod dm-thin-pool dm-snapshot; do
    modprobe "$m" || die "modprobe $m failed (kernel $(uname -r) lacks the module?)"
done
[ -c /dev/mapper/control ] || die "/dev/mapper/control missing after modprobe dm-mod"
for t in lvm losetup thin_check; do
    command -v "$t" >/dev/null || die "$t not found in the guest; run tests/realvm/install_deps.sh on the host"
done

# /etc/lvm must be guest-private (virtme-ng mounts a tmpfs there; /etc itself
# is an overlay on the guest's tmpfs). Never write the host's /etc/lvm.
fstype="$(findmnt -n -o FSTYPE --target /etc/lvm)"
case "$fstype" in
    tmpfs|overlay) ;;
    *) die "/etc/lvm in the guest is on '$fstype', not a guest tmpfs/overlay; refusing to write lvm.conf" ;;
esac
mkdir -p /etc/lvm
cat > /etc/lvm/lvm.conf <<'EOF'
# Written by tests/realvm/guest_setup.sh inside the throw-away VM.
devices {
    global_filter = [ "a|^/dev/loop[0-9]+$|", "r|.*|" ]
    use_devicesfile = 0
}
activation {
    udev_sync = 0
    udev_rules = 0
    monitoring = 0
}
global {
    event_activation = 0
}
EOF
export LVM_SYSTEM_DIR=/etc/lvm
export LVM_SUPPRESS_FD_WARNINGS=1

# Backing store: a sparse file in guest RAM (the guest's /tmp is an overlay on
# its /run tmpfs), so nothing is ever written into the repo or the host disk.
# Only data actually written uses memory: keep test writes well under ~800 MiB.
work="$(mktemp -d /tmp/dk-realvm.XXXXXX)" || die "mktemp failed"
truncate -s "$pv_size" "$work/pv0.img" || die "cannot create $pv_size sparse file in $work"
pv="$(losetup --find --show "$work/pv0.img")" || die "losetup failed"
pvcreate -q "$pv" >/dev/null || die "pvcreate $pv failed"
vgcreate -q "$vg" "$pv" >/dev/null || die "vgcreate $vg $pv failed"

export DK_REAL_LVM=1 DK_REAL_LVM_VG="$vg" DK_REAL_LVM_PV="$pv"
export DK_REALVM_GUEST_SCRATCH="$work"

mapfile -d '' -t argv < "$scratch/argv"
[ "${#argv[@]}" -gt 0 ] || die "empty command"
: > "$scratch/started"  # the host's watchdog: set-up done, the command runs
cd "$repo" || die "cannot cd to $repo"
"${argv[@]}"
rc=$?
echo "$rc" > "$scratch/rc"
exit "$rc"
