#!/usr/bin/env bash
# Install what the real-LVM VM lane needs on a fresh Debian (bookworm) host.
#
#   tests/realvm/install_deps.sh [PYTHON]
#
# PYTHON is the interpreter that gets virtme-ng (default: <repo>/.venv/bin/python).
# Idempotent: when every package and `vng` are already there it does nothing
# (no apt-get update, no pip run) and returns in well under a second.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${1:-$repo/.venv/bin/python}"

# qemu-system-x86         : the VM (TCG; KVM does not work on these hosts)
# linux-image-amd64       : a kernel with loop, dm-mod and dm-thin-pool as modules
# lvm2                    : the LVM CLI (lvs/lvcreate/...), dmsetup comes with it
# thin-provisioning-tools : thin_check/thin_repair, run by LVM on pool activation
# kmod                    : modprobe, inside the guest (the guest root is the host's /)
# busybox-static          : virtme-ng refuses to start without a static busybox (initramfs)
# procps, util-linux      : ps/losetup etc. (normally present already)
# targetcli-fb, python3-rtslib-fb : LIO's admin library, which Cinder's cinder-rtstool
#                           imports (tests/ecosystem/test_cinder_services_realvm.py exports through it)
# rabbitmq-server, mariadb-server : the message bus and database of the Cinder services that
#                           tests/ecosystem/test_cinder_services_realvm.py starts in the guest
# open-iscsi              : iscsid and iscsiadm, the initiator os-brick drives
# sudo                    : the root helper's first step for the unprivileged service user
#                           (tests/realvm/unprivileged_setup.sh), as Cinder's cinder-rootwrap
apt_pkgs=(qemu-system-x86 linux-image-amd64 lvm2 thin-provisioning-tools kmod busybox-static
          procps util-linux targetcli-fb python3-rtslib-fb open-iscsi sudo
          rabbitmq-server mariadb-server)

die() { echo "install_deps.sh: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get)"
[ -x "$python" ] || die "python interpreter not found or not executable: $python"

missing=()
for p in "${apt_pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" -gt 0 ]; then
    echo "install_deps.sh: installing Debian packages: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${apt_pkgs[@]}"
fi

ls /boot/vmlinuz-* >/dev/null 2>&1 || die "no kernel in /boot after installing linux-image-amd64"

if ! "$python" -c 'import virtme_ng' >/dev/null 2>&1; then
    echo "install_deps.sh: pip installing virtme-ng into $python" >&2
    "$python" -m pip install --quiet virtme-ng
fi
vng="$(dirname "$python")/vng"
[ -x "$vng" ] || die "virtme-ng installed but $vng is missing"
exit 0
