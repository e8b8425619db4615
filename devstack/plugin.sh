#!/bin/bash
# plugin.sh - DevStack plugin: driver-kit's LVM thin-pool driver as a Cinder backend
#
# Enabled with `enable_plugin driver-kit <git url of this repository>` in
# local.conf; defaults are in devstack/settings. DevStack sources this file as
# `plugin.sh <mode> [phase]`, on every node; each phase acts only where the
# service it serves runs:
#   stack install      (c-vol) install this package into DevStack's Python, then
#                      make the volume group with DevStack's lib/lvm and the thin pool
#   stack post-config  (c-vol) write the backend section into cinder.conf, enable it
#   stack extra        (c-api) create the volume types bound to the backend
#   stack test-config  (tempest) tell Tempest about the backend
#   clean              (c-vol) remove the volume group and its backing file (lib/lvm)
# The backend runs in cinder-volume through contrib.cinder_adapter.

DRIVER_KIT_DIR=${DRIVER_KIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}

function install_driver_kit {
    setup_develop "$DRIVER_KIT_DIR"
}

function init_driver_kit_volume_group {
    local vg=$DRIVER_KIT_VOLUME_GROUP
    # DevStack's own helper, as for its LVM backend: the sparse backing file
    # $DATA_DIR/$vg-backing-file, its loop device (re-attached at boot) and the
    # volume group, emptied, since Cinder's database is new on every stack.sh
    init_lvm_volume_group "$vg" "$DRIVER_KIT_BACKING_FILE_SIZE"
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
    # cinder-volume runs as the stack user: LVM and the devices through the driver's
    # privileged daemon (configure_driver_kit_privsep)
    iniset "$CINDER_CONF" "$section" lvm_privilege privsep
    configure_driver_kit_privsep
    iniset "$CINDER_CONF" "$section" max_over_subscription_ratio \
        "$DRIVER_KIT_MAX_OVER_SUBSCRIPTION_RATIO"
    iniset "$CINDER_CONF" "$section" reserved_percentage "$DRIVER_KIT_RESERVED_PERCENTAGE"
    iniset "$CINDER_CONF" "$section" over_provisioning_calculation \
        "$DRIVER_KIT_OVER_PROVISIONING_CALCULATION"
    iniset "$CINDER_CONF" "$section" lock_path "$DRIVER_KIT_LOCK_PATH"
    # the export DevStack sets up for its own LVM backend (lib/cinder's defaults)
    if [[ -n "${CINDER_TARGET_HELPER:-}" ]]; then
        iniset "$CINDER_CONF" "$section" target_helper "$CINDER_TARGET_HELPER"
    fi
    if [[ -n "${CINDER_TARGET_PROTOCOL:-}" ]]; then
        iniset "$CINDER_CONF" "$section" target_protocol "$CINDER_TARGET_PROTOCOL"
    fi

    local enabled
    enabled=$(iniget "$CINDER_CONF" DEFAULT enabled_backends)
    if [[ ",$enabled," != *",$section,"* ]]; then
        iniset "$CINDER_CONF" DEFAULT enabled_backends "${enabled:+$enabled,}$section"
    fi
}

# The driver's privileged daemon (lvm_driver.privileged.default), as Cinder starts
# os-brick's: cinder-rootwrap may start privsep-helper for it (the one line of
# driver-kit.filters). The daemon trusts only a root-owned config file, and DevStack's
# cinder.conf belongs to the stack user, so the daemon gets a file of its own, with
# what it takes from the backend (its VG and thin pool), and Cinder starts it with that.
function configure_driver_kit_privsep {
    local section=$DRIVER_KIT_BACKEND_NAME conf
    sudo install -D -o root -g root -m 0644 \
        "$DRIVER_KIT_DIR/etc/driver-kit/rootwrap.d/driver-kit.filters" \
        "$CINDER_CONF_DIR/rootwrap.d/driver-kit.filters"
    conf=$(mktemp)
    iniset "$conf" DEFAULT enabled_backends "$section"
    iniset "$conf" "$section" volume_driver contrib.cinder_adapter.DriverKitVolumeDriver
    iniset "$conf" "$section" driver_kit_driver lvm_driver.driver.ThinLVMDriver
    iniset "$conf" "$section" volume_group "$DRIVER_KIT_VOLUME_GROUP"
    iniset "$conf" "$section" lvm_thin_pool_name "$DRIVER_KIT_THIN_POOL"
    sudo install -D -o root -g root -m 0644 "$conf" "$DRIVER_KIT_PRIVSEP_CONF"
    rm -f "$conf"
    iniset "$CINDER_CONF" lvm_driver_privileged helper_command \
        "sudo $(get_rootwrap_location cinder) $CINDER_CONF_DIR/rootwrap.conf privsep-helper --config-file $DRIVER_KIT_PRIVSEP_CONF"
}

# A volume type bound to the backend, with the given extra properties; kept if it exists
function _driver_kit_volume_type {
    local name=$1
    shift
    if ! openstack --os-region-name="$REGION_NAME" volume type show "$name" \
            >/dev/null 2>&1; then
        openstack --os-region-name="$REGION_NAME" volume type create \
            --property volume_backend_name="$DRIVER_KIT_BACKEND_NAME" "$@" "$name"
    fi
}

# The capability keys let Cinder's CapabilitiesFilter send each type to its own pool, so
# a full pool is refused by the scheduler (docs/cinder-deployment.md, "Which volume types")
function create_driver_kit_volume_types {
    _driver_kit_volume_type "$DRIVER_KIT_VOLUME_TYPE" --property provisioning:type=thin \
        --property thin_provisioning_support='<is> True'
    if [[ "$(trueorfalse False DRIVER_KIT_OFFER_THICK)" == "True" ]]; then
        _driver_kit_volume_type "$DRIVER_KIT_THICK_VOLUME_TYPE" \
            --property provisioning:type=thick \
            --property thick_provisioning_support='<is> True'
    fi
}

# The backend among Tempest's backends, so its multi-backend tests use it too
function configure_driver_kit_tempest {
    local names be
    names=$(iniget "$TEMPEST_CONFIG" volume backend_names)
    if [[ -z "$names" ]]; then  # DevStack sets it only for two backends or more
        for be in ${CINDER_ENABLED_BACKENDS//,/ }; do
            names+="${names:+,}${be##*:}"
        done
    fi
    if [[ ",$names," != *",$DRIVER_KIT_BACKEND_NAME,"* ]]; then
        names+="${names:+,}$DRIVER_KIT_BACKEND_NAME"
    fi
    iniset "$TEMPEST_CONFIG" volume backend_names "$names"
    if [[ "$names" == *,* ]]; then
        iniset "$TEMPEST_CONFIG" volume-feature-enabled multi_backend True
    fi
    if [[ "$(trueorfalse False DRIVER_KIT_TEMPEST_USE_TYPE)" == "True" ]]; then
        iniset "$TEMPEST_CONFIG" volume volume_type "$DRIVER_KIT_VOLUME_TYPE"
        iniset "$TEMPEST_CONFIG" volume vendor_name "$DRIVER_KIT_VENDOR_NAME"
        iniset "$TEMPEST_CONFIG" volume storage_protocol "$DRIVER_KIT_STORAGE_PROTOCOL"
    fi
}

function clean_driver_kit_volume_group {
    # DevStack's own helper: the volumes, the volume group, the boot-time unit,
    # the loop device and the backing file
    clean_lvm_volume_group "$DRIVER_KIT_VOLUME_GROUP"
}

mode=${1:-}
phase=${2:-}
if [[ "$mode" == "stack" ]]; then
    case "$phase" in
        install)
            if is_service_enabled c-vol; then
                echo_summary "Installing driver-kit and its LVM thin pool"
                install_driver_kit
                init_driver_kit_volume_group
            fi
            ;;
        post-config)
            if is_service_enabled c-vol; then
                echo_summary "Configuring the driver-kit Cinder backend $DRIVER_KIT_BACKEND_NAME"
                configure_driver_kit_backend
            fi
            ;;
        extra)
            if is_service_enabled c-api; then
                echo_summary "Creating the driver-kit volume types"
                create_driver_kit_volume_types
            fi
            ;;
        test-config)
            if is_service_enabled tempest; then
                echo_summary "Configuring Tempest for the driver-kit backend"
                configure_driver_kit_tempest
            fi
            ;;
    esac
elif [[ "$mode" == "clean" ]] && is_service_enabled c-vol; then
    clean_driver_kit_volume_group
fi
