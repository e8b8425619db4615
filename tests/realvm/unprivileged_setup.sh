#!/usr/bin/env bash
# Runs INSIDE the virtme-ng guest, as root, never on the host: turns the guest into
# a Cinder volume host as a distribution ships it, so tests can run the driver as an
# unprivileged user through the root helper:
#
#   tests/realvm/unprivileged_setup.sh [PYTHON]      (default <repo>/.venv/bin/python)
#
# What it sets up, all guest-private (the guest's /etc is an overlay on its RAM;
# nothing reaches the host):
#   * a group and user `cinder` (no login shell, locked password, home /var/lib/cinder);
#   * sudo as Cinder's packages configure it: `cinder` may run exactly
#     `<venv>/bin/oslo-rootwrap /etc/driver-kit/rootwrap.conf *` as root
#     (/etc/sudoers.d/driver-kit-cinder, as /etc/sudoers.d/cinder-common does
#     for cinder-rootwrap);
#   * /etc/driver-kit/rootwrap.conf: the project's rootwrap.d as filters_path,
#     the venv's bin (privsep-helper) first in exec_dirs;
#   * /root traversable (mode 0711) through an overlay, because the venv's
#     interpreter lives under /root/.pyenv and the host's /root is mode 0700;
#   * the venv's editable install pointed at this repository (a guest-private copy of
#     its finder mapped over the original), so the `cinder` process and the root
#     side's privsep-helper import the code under test, not another checkout's.
# Idempotent: a second call returns at once. The backend's own configuration file
# is written by each test (it names the test's VG and pool).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${1:-$repo/.venv/bin/python}"
venv_bin="$(dirname "$python")"
state=/run/dk-unprivileged
ready="$state/ready"

die() { echo "unprivileged_setup.sh: ERROR: $*" >&2; exit 3; }

[ -f "$ready" ] && exit 0
grep -q 'virtme' /proc/cmdline || die "not inside a virtme-ng guest (it edits /etc)"
[ "$(id -u)" = 0 ] || die "must run as root in the guest"
for target in /etc /etc/sudoers.d; do
    fstype="$(findmnt -n -o FSTYPE --target "$target")"
    case "$fstype" in
        tmpfs|overlay) ;;
        *) die "$target in the guest is on '$fstype', not a guest overlay; refusing to edit it" ;;
    esac
done
command -v sudo >/dev/null || die "sudo is not installed; run tests/realvm/install_deps.sh on the host"
[ -x "$venv_bin/oslo-rootwrap" ] && [ -x "$venv_bin/privsep-helper" ] \
    || die "oslo-rootwrap/privsep-helper missing in $venv_bin (pip install oslo.rootwrap oslo.privsep)"
mkdir -p "$state"

# ---- the service user --------------------------------------------------------
# (edited copies of the account files bound over the originals: useradd cannot write
# /etc/shadow on the guest's overlay)
if ! getent passwd cinder >/dev/null; then
    id=64061
    while getent passwd "$id" >/dev/null || getent group "$id" >/dev/null; do id=$((id + 1)); done
    for file in passwd group shadow gshadow; do
        [ -e "/etc/$file" ] || continue
        cp -p "/etc/$file" "$state/$file"
        case "$file" in
            passwd) echo "cinder:x:$id:$id:OpenStack Cinder:/var/lib/cinder:/usr/sbin/nologin" ;;
            group) echo "cinder:x:$id:" ;;
            shadow) echo "cinder:!:20000::::::" ;;
            gshadow) echo "cinder:!::" ;;
        esac >> "$state/$file"
        mount --bind "$state/$file" "/etc/$file"
    done
fi
install -d -o cinder -g cinder -m 0750 /var/lib/cinder

# ---- the interpreter, reachable by that user ----------------------------------
if ! runuser -u cinder -- test -x "$python"; then
    mkdir -p "$state/root-upper" "$state/root-work"
    mount -t overlay overlay \
        -o "lowerdir=/root,upperdir=$state/root-upper,workdir=$state/root-work" /root \
        || die "cannot put an overlay on /root"
    chmod 0711 /root
fi
runuser -u cinder -- "$python" -c 'import oslo_privsep, oslo_rootwrap' \
    || die "user cinder cannot run $python"

# ---- the venv's editable install maps to this repository ------------------------
site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for finder in "$site"/__editable___driver_kit_*_finder.py; do
    [ -e "$finder" ] || continue
    copy="$state/$(basename "$finder")"
    "$python" - "$finder" "$copy" "$repo" <<'EOF'
import re, sys
source, copy, repo = sys.argv[1:]
text = open(source, encoding="utf-8").read()
text = re.sub(r"'(contrib|driver_kit|lvm_driver)': '[^']*'",
              lambda m: f"'{m.group(1)}': '{repo}/{m.group(1)}'", text)
open(copy, "w", encoding="utf-8").write(text)
EOF
    cmp -s "$finder" "$copy" || mount --bind -o ro "$copy" "$finder"
done
cd /
imported="$(runuser -u cinder -- "$python" -c 'import lvm_driver; print(lvm_driver.__file__)')"
[ "$imported" = "$repo/lvm_driver/__init__.py" ] \
    || die "the venv imports lvm_driver from $imported, not $repo"

# ---- sudo and the root helper, as Cinder's packages ship them -------------------
cat > /etc/sudoers.d/driver-kit-cinder <<EOF
# Written by tests/realvm/unprivileged_setup.sh inside the throw-away VM.
Defaults:cinder !requiretty
cinder ALL = (root) NOPASSWD: $venv_bin/oslo-rootwrap /etc/driver-kit/rootwrap.conf *
EOF
chmod 0440 /etc/sudoers.d/driver-kit-cinder
visudo -c -q || die "sudoers does not parse"
install -d -m 0755 /etc/driver-kit
cat > /etc/driver-kit/rootwrap.conf <<EOF
# Written by tests/realvm/unprivileged_setup.sh inside the throw-away VM.
[DEFAULT]
filters_path=$repo/etc/driver-kit/rootwrap.d
exec_dirs=$venv_bin,/sbin,/usr/sbin,/bin,/usr/bin,/usr/local/bin,/usr/local/sbin
use_syslog=False
EOF
chmod 0644 /etc/driver-kit/rootwrap.conf
# oslo-rootwrap, reached through sudo, refuses a command no filter allows with 99
rc=0
runuser -u cinder -- sudo -n "$venv_bin/oslo-rootwrap" /etc/driver-kit/rootwrap.conf true \
    >"$state/probe.out" 2>&1 || rc=$?
[ "$rc" = 99 ] || die "cinder's root helper probe exited $rc, not 99 (unauthorized): $(cat "$state/probe.out")"
touch "$ready"
