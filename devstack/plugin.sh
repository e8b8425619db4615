#!/bin/bash
# plugin.sh - DevStack plugin: driver-kit's LVM thin-pool driver as a Cinder backend
#
# Enabled with `enable_plugin driver-kit <git url of this repository>` in
# local.conf; defaults are in devstack/settings. DevStack sources this file as
# `plugin.sh <mode> [phase]`:
#   stack install      install this package into DevStack's Python, then make the
#                      volume group (a sparse file in $DATA_DIR on a loop device)
#                      and its thin pool
#   stack post-config  write the backend section into cinder.conf and enable it
#   stack extra        create a volume type bound to the backend
#   clean              remove the volume group, the loop device and the file
# The backend runs in cinder-volume through contrib.cinder_adapter.

DRIVER_KIT_DIR=${DRIVER_KIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
DRIVER_KIT_BACKING_FILE=${DRIVER_KIT_BACKING_FILE:-$DATA_DIR/$DRIVER_KIT_VOLUME_GROUP-backing-file}

function install_driver_kit {
    setup_develop "$DRIVER_KIT_DIR"
}

# The loop device the backing file is attached to (empty when it is not attached)
function _driver_kit_attached_loop_device {
    sudo losetup --associated "$DRIVER_KIT_BACKING_FILE" --noheadings --output NAME
}

# The loop device of the backing file, attaching it when it is not attached yet
function _driver_kit_loop_device {
    local device
    device=$(_driver_kit_attached_loop_device)
    if [[ -z "$device" ]]; then
        device=$(sudo losetup --find --show "$DRIVER_KIT_BACKING_FILE")
    fi
    echo "$device"
}

function init_driver_kit_volume_group {
    local vg=$DRIVER_KIT_VOLUME_GROUP
    if ! sudo vgs "$vg" >/dev/null 2>&1; then
        # sparse: it takes space only as volumes are written, like DevStack's own VG
        [[ -f "$DRIVER_KIT_BACKING_FILE" ]] || \
            truncate -s "$DRIVER_KIT_BACKING_FILE_SIZE" "$DRIVER_KIT_BACKING_FILE"
        sudo vgcreate "$vg" "$(_driver_kit_loop_device)"
    fi
    if ! sudo lvs "$vg/$DRIVER_KIT_THIN_POOL" >/dev/null 2>&1; then
        sudo lvcreate --type thin-pool -l "${DRIVER_KIT_THIN_POOL_PERCENT}%FREE" \
            -n "$DRIVER_KIT_THIN_POOL" "$vg"
    fi
    mkdir -p "$DRIVER_KIT_LOCK_PATH"
}

function configure_driver_kit_backend {
    local section=$DRIVER_KIT_BACKEND_NAME
    iniset "$CINDER_CONF" "$section" volume_driver contrib.cinder_adapter.DriverKitVolumeDriver
    iniset "$CINDER_CONF" "$section" driver_kit_driver lvm_driver.driver.ThinLVMDriver
    iniset "$CINDER_CONF" "$section" volume_backend_name "$section"
    iniset "$CINDER_CONF" "$section" volume_group "$DRIVER_KIT_VOLUME_GROUP"
    iniset "$CINDER_CONF" "$section" lvm_thin_pool_name "$DRIVER_KIT_THIN_POOL"
    iniset "$CINDER_CONF" "$section" lvm_create_thin_pool False
    iniset "$CINDER_CONF" "$section" lvm_offer_thick "$DRIVER_KIT_OFFER_THICK"
    # cinder-volume runs as the stack user, who has password-less sudo in DevStack
    iniset "$CINDER_CONF" "$section" lvm_root_helper sudo
    iniset "$CINDER_CONF" "$section" max_over_subscription_ratio \
        "$DRIVER_KIT_MAX_OVER_SUBSCRIPTION_RATIO"
    iniset "$CINDER_CONF" "$section" reserved_percentage "$DRIVER_KIT_RESERVED_PERCENTAGE"
    iniset "$CINDER_CONF" "$section" over_provisioning_calculation \
        "$DRIVER_KIT_OVER_PROVISIONING_CALCULATION"
    iniset "$CINDER_CONF" "$section" lock_path "$DRIVER_KIT_LOCK_PATH"

    local enabled
    enabled=$(iniget "$CINDER_CONF" DEFAULT enabled_backends)
    if [[ ",$enabled," != *",$section,"* ]]; then
        iniset "$CINDER_CONF" DEFAULT enabled_backends "${enabled:+$enabled,}$section"
    fi
}

function create_driver_kit_volume_type {
    if ! openstack --os-region-name="$REGION_NAME" volume type show \
            "$DRIVER_KIT_VOLUME_TYPE" >/dev/null 2>&1; then
        openstack --os-region-name="$REGION_NAME" volume type create \
            --property volume_backend_name="$DRIVER_KIT_BACKEND_NAME" \
            --property provisioning:type=thin "$DRIVER_KIT_VOLUME_TYPE"
    fi
}

function clean_driver_kit_volume_group {
    local vg=$DRIVER_KIT_VOLUME_GROUP
    if sudo vgs "$vg" >/dev/null 2>&1; then
        sudo lvremove -f "$vg"
        sudo vgremove -f "$vg"
    fi
    local device
    device=$(_driver_kit_attached_loop_device)
    if [[ -n "$device" ]]; then
        sudo losetup --detach "$device"
    fi
    rm -f "$DRIVER_KIT_BACKING_FILE"
}

if is_service_enabled c-vol; then
    mode=${1:-}
    phase=${2:-}
    if [[ "$mode" == "stack" && "$phase" == "install" ]]; then
        echo_summary "Installing driver-kit and its LVM thin pool"
        install_driver_kit
        init_driver_kit_volume_group
    elif [[ "$mode" == "stack" && "$phase" == "post-config" ]]; then
        echo_summary "Configuring the driver-kit Cinder backend $DRIVER_KIT_BACKEND_NAME"
        configure_driver_kit_backend
    elif [[ "$mode" == "stack" && "$phase" == "extra" ]]; then
        if is_service_enabled c-api; then
            echo_summary "Creating the volume type $DRIVER_KIT_VOLUME_TYPE"
            create_driver_kit_volume_type
        fi
    fi
    if [[ "$mode" == "clean" ]]; then
        clean_driver_kit_volume_group
    fi
fi
