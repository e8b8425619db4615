#!/bin/bash
# shellcheck disable=SC2032,SC2033 # sudo is a stub function here: it may call stub functions
# Run the DevStack plugin's phases with DevStack's functions and the system's
# LVM commands stubbed: every call is recorded in WORKDIR/calls.log, the
# volume group lives as marker files in WORKDIR/lvm, and iniset/iniget edit
# WORKDIR/etc/cinder/cinder.conf and WORKDIR/etc/tempest/tempest.conf for real.
#
#   devstack_harness.sh WORKDIR "stack install" "stack post-config" ... "clean"
#
# Like stack.sh, it runs with errexit, sources devstack/settings once and
# devstack/plugin.sh once per phase. lib/lvm's two entry points are stubs that
# keep its contract (the backing file $DATA_DIR/<vg>-backing-file, its loop
# device, the VG, emptied on init); with DEVSTACK_DIR set to a DevStack
# checkout, its real lib/lvm is sourced instead, on the same stubbed commands.
set -o errexit -o nounset -o pipefail

WORKDIR=$1
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PLUGIN=$(cd "$HERE/../../devstack" && pwd)
PYTHON=${PYTHON:-python3}
CALLS=$WORKDIR/calls.log
LVM=$WORKDIR/lvm
mkdir -p "$WORKDIR/data" "$WORKDIR/etc/cinder" "$LVM"
touch "$CALLS"

# What DevStack defines before it sources a plugin
# shellcheck disable=SC2034 # read by the sourced plugin
DATA_DIR=$WORKDIR/data
CINDER_CONF=$WORKDIR/etc/cinder/cinder.conf
CINDER_CONF_DIR=$WORKDIR/etc/cinder
# the plugin's default is under /etc: here, the work dir's
DRIVER_KIT_PRIVSEP_CONF=${DRIVER_KIT_PRIVSEP_CONF:-$WORKDIR/etc/driver-kit/privsep.conf}
TEMPEST_CONFIG=$WORKDIR/etc/tempest/tempest.conf
REGION_NAME=RegionOne
ENABLED_SERVICES=${ENABLED_SERVICES:-key,c-api,c-sch,c-vol,tempest}
CINDER_ENABLED_BACKENDS=${CINDER_ENABLED_BACKENDS:-lvm:lvmdriver-1}
CINDER_TARGET_HELPER=${CINDER_TARGET_HELPER:-lioadm}
CINDER_TARGET_PROTOCOL=${CINDER_TARGET_PROTOCOL:-iscsi}
mkdir -p "$WORKDIR/etc/tempest"

record() { printf '%s\n' "$*" >>"$CALLS"; }

# DevStack's functions
define_plugin() { record "define_plugin $*"; }
echo_summary() { record "echo_summary $*"; }
setup_develop() { record "setup_develop $*"; }
is_service_enabled() {
    local service
    for service in "$@"; do
        [[ ",$ENABLED_SERVICES," == *",$service,"* ]] && return 0
    done
    return 1
}
_ini() {
    "$PYTHON" - "$@" <<'PY'
import configparser, sys
action, path, section, option = sys.argv[1:5]
ini = configparser.RawConfigParser(strict=False)
ini.optionxform = str
ini.read(path)
if action == "get":
    print(ini.get(section, option, fallback=""))
else:
    if section != "DEFAULT" and not ini.has_section(section):
        ini.add_section(section)
    ini.set(section, option, sys.argv[5])
    with open(path, "w") as out:
        ini.write(out)
PY
}
iniset() { record "iniset $*"; _ini set "$@"; }
iniget() { _ini get "$@"; }
trueorfalse() {
    local value=${!2:-$1}
    case ${value,,} in
        1|yes|true|on) echo True ;;
        0|no|false|off|"") echo False ;;
        *) echo "$1" ;;
    esac
}
is_fedora() { return 1; }
start_service() { record "start_service $*"; }
get_rootwrap_location() { echo "/usr/local/bin/$1-rootwrap"; }

# The system's commands the plugin runs
sudo() { record "sudo $*"; "$@"; }
truncate() { record "truncate $*"; : >"${*: -1}"; }
install() { record "install $*"; mkdir -p "$(dirname "${*: -1}")"; cp "${@: -2:1}" "${*: -1}"; }
vgs() { [[ -e "$LVM/vg.${1%% *}" ]]; }
lvs() { [[ -e "$LVM/lv.${1//\//.}" ]]; }
vgcreate() { touch "$LVM/vg.$1"; }
vgremove() { rm -f "$LVM/vg.${*: -1}"; }
lvremove() { rm -f "$LVM"/lv."${*: -1}".*; }
lvcreate() {
    local name="" arg
    while (($#)); do
        arg=$1
        shift
        if [[ $arg == -n ]]; then name=$1; shift; fi
    done
    touch "$LVM/lv.$arg.$name"
}
losetup() {
    case $1 in
        --associated) cat "$LVM/loop" 2>/dev/null || true ;;
        --find) echo /dev/loop7 >"$LVM/loop"; echo /dev/loop7 ;;
        --detach|-d) rm -f "$LVM/loop" ;;
        -h) echo "      --direct-io[=<on|off>]    open backing file with O_DIRECT" ;;
        *) echo "unexpected losetup $*" >&2; return 1 ;;
    esac
}
systemctl() {  # the unit lib/lvm writes attaches the loop device at start, detaches at stop
    record "systemctl $*"
    case "${1:-} ${2:-}" in
        "enable --now") losetup --find >/dev/null ;;
        "disable --now") losetup --detach ;;
    esac
}
tee() { cat >/dev/null; }  # lib/lvm writes its unit under /etc/systemd: not here

if [[ -n "${DEVSTACK_DIR:-}" ]]; then
    # shellcheck disable=SC2034 # read by lib/lvm
    FILES=$DEVSTACK_DIR/files
    # shellcheck source=/dev/null
    source "$DEVSTACK_DIR/lib/lvm"
else
    # lib/lvm's entry points, keeping its contract
    BACKING_FILE_SUFFIX=-backing-file
    init_lvm_volume_group() {
        record "init_lvm_volume_group $*"
        local vg=$1 size=$2 file=$DATA_DIR/$1$BACKING_FILE_SUFFIX
        if ! sudo vgs "$vg"; then
            [[ -f $file ]] || truncate -s "$size" "$file"
            systemctl enable --now "$vg$BACKING_FILE_SUFFIX.service"
            sudo vgcreate "$vg" "$(sudo losetup --associated "$file" -O NAME -n)"
        fi
        sudo lvremove -f "$vg"
    }
    clean_lvm_volume_group() {
        record "clean_lvm_volume_group $*"
        local vg=$1
        sudo lvremove -f "$vg"
        sudo vgremove -f "$vg"
        systemctl disable --now "$vg$BACKING_FILE_SUFFIX.service"
        rm -f "$DATA_DIR/$vg$BACKING_FILE_SUFFIX"
    }
fi
openstack() {
    record "openstack $(printf '%q ' "$@")"
    if [[ "$*" == *"volume type show"* ]]; then
        [[ -e "$WORKDIR/volume-type.${*: -1}" ]]
    else
        touch "$WORKDIR/volume-type.${*: -1}"
    fi
}

# shellcheck source=devstack/settings
source "$PLUGIN/settings"
for phase in "$@"; do
    # shellcheck source=devstack/plugin.sh
    # shellcheck disable=SC2086 # "stack install" is two arguments, as DevStack passes them
    source "$PLUGIN/plugin.sh" $phase
done
