#!/usr/bin/env bash
# Boot ONE throw-away VM with real device-mapper and LVM, give it an empty
# volume group, run a command in it from the repo root, and exit with that
# command's exit code.
#
#   tests/realvm/run_in_vm.sh [--verbose] -- <command> [args...]
#
# e.g. tests/realvm/run_in_vm.sh -- .venv/bin/python -m pytest tests/functional
#
# The guest (virtme-ng + qemu TCG, the installed Debian kernel) sees the host's
# filesystem read-only, except the repository (read-write, so test data and
# reports land in it) and a private scratch dir. The LVM backing file lives in
# guest RAM; see guest_setup.sh for what is set up and exported
# (DK_REAL_LVM=1, DK_REAL_LVM_VG, LVM_SYSTEM_DIR, ...).
#
# Host variables (all optional):
#   DK_REALVM_PYTHON   interpreter whose bin/ holds vng (default <repo>/.venv/bin/python)
#   DK_REALVM_KERNEL   kernel image (default: newest /boot/vmlinuz-* with dm-thin-pool)
#   DK_REALVM_TIMEOUT  seconds for the whole VM run, boot included (default 900)
#   DK_REALVM_BOOT_TIMEOUT  seconds for the guest to start the command; a guest
#                      that has not is stopped and booted once more (default 420)
#   DK_REALVM_MEMORY   guest memory (default 2G)   DK_REALVM_CPUS (default 2)
#   DK_REAL_LVM_VG     VG name in the guest (default dkvg)
#   DK_REAL_LVM_PV_SIZE  sparse PV size in the guest (default 4G)
# Variables named DK_*, PYTEST_* and CI are passed through to the command.
#
# Exit codes: the command's own code; 124 on timeout; 125 when the VM cannot
# start or never ran the command; 3 when the guest setup failed; 2 on usage or
# missing host prerequisites (run tests/realvm/install_deps.sh).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

die() { echo "run_in_vm.sh: ERROR: $1" >&2; exit "${2:-2}"; }
usage() { echo "usage: $0 [--verbose] -- <command> [args...]" >&2; exit 2; }

verbose=()
while [ $# -gt 0 ]; do
    case "$1" in
        --) shift; break ;;
        --verbose|-v) verbose=(--verbose); shift ;;
        -h|--help) usage ;;
        *) echo "run_in_vm.sh: unexpected argument '$1' (did you forget '--'?)" >&2; usage ;;
    esac
done
[ $# -gt 0 ] || usage

# ---- host prerequisites: fail loudly, never skip ---------------------------
hint="run tests/realvm/install_deps.sh"
[ "$(id -u)" = 0 ] || die "must run as root (the guest user mirrors the host user and LVM needs root)"
python="${DK_REALVM_PYTHON:-$repo/.venv/bin/python}"
vng="$(dirname "$python")/vng"
[ -x "$vng" ] || vng="$(command -v vng || true)"
if [ -z "$vng" ] || [ ! -x "$vng" ]; then
    die "virtme-ng (vng) not found next to $python nor on PATH; $hint"
fi
# vng runs its helper 'virtme-run' through PATH.
vng_dir="$(dirname "$vng")"
export PATH="$vng_dir:$PATH"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found; $hint"
command -v busybox >/dev/null || die "busybox (static) not found; $hint"
if ! command -v lvm >/dev/null || ! command -v thin_check >/dev/null; then
    die "lvm2/thin-provisioning-tools not installed; $hint"
fi

kernel="${DK_REALVM_KERNEL:-}"
if [ -z "$kernel" ]; then
    for k in $(printf '%s\n' /boot/vmlinuz-* | sort -V -r); do
        [ -e "$k" ] || continue  # no match: the pattern itself
        v="${k#/boot/vmlinuz-}"
        if ls /lib/modules/"$v"/kernel/drivers/md/dm-thin-pool.ko* >/dev/null 2>&1; then
            kernel="$k"; break
        fi
    done
fi
[ -n "$kernel" ] || die "no /boot/vmlinuz-* with dm-thin-pool modules in /lib/modules; $hint"
[ -r "$kernel" ] || die "kernel image $kernel not found (DK_REALVM_KERNEL)"
kver="$(basename "$kernel")"; kver="${kver#vmlinuz-}"
[ -d "/lib/modules/$kver" ] || die "no /lib/modules/$kver for $kernel (the guest loads its modules from there)"

timeout_s="${DK_REALVM_TIMEOUT:-900}"

# ---- hand the command over through a private scratch dir --------------------
scratch="$(mktemp -d /tmp/dk-realvm-host.XXXXXX)" || die "mktemp failed"
trap 'rm -rf "$scratch"' EXIT
printf '%s\0' "$@" > "$scratch/argv"
{
    printf 'export DK_REALVM_REPO=%q\n' "$repo"
    for name in $(compgen -e); do
        case "$name" in
            DK_REALVM_REPO) ;;
            DK_*|PYTEST_*|CI) printf 'export %s=%q\n' "$name" "${!name}" ;;
        esac
    done
} > "$scratch/env"

cmd=("$vng" --run "$kernel" --disable-kvm --force-9p
     --memory "${DK_REALVM_MEMORY:-2G}" --cpus "${DK_REALVM_CPUS:-2}"
     --rwdir "$repo" --rwdir "$scratch" --cwd "$repo"
     "${verbose[@]}"
     --exec "bash $(printf %q "$here/guest_setup.sh") $(printf %q "$scratch")")

# qemu (started by vng) opens the guest's stdout/stderr ports as
# "file,path=/proc/self/fd/1" (and fd/2): when our stdout/stderr is a regular
# file, that reopens it at offset 0 with O_TRUNC, so guest output and anything
# else written to the same file overwrite each other (seen: CI-style
# `> log 2>&1` loses lines). Always give vng pipes, copied through by cat.
#
# A guest that has not started the command (guest_setup.sh touches `started`
# in the scratch dir) DK_REALVM_BOOT_TIMEOUT seconds after the VM was started
# is stopped and booted once more: seen once, a guest hung before the command
# and the run waited out its whole timeout with no output.
boot_timeout_s="${DK_REALVM_BOOT_TIMEOUT:-420}"
stopped=""
run_vm_once() {  # one VM run; sets vng_rc, and hung=1 if the watchdog stopped it
    local budget="$1" cat_out cat_err watchdog
    rm -f "$scratch/stdout" "$scratch/stderr" "$scratch/booted" "$scratch/started" "$scratch/hung"
    mkfifo "$scratch/stdout" "$scratch/stderr" || die "mkfifo failed"
    cat "$scratch/stdout" &
    cat_out=$!
    cat "$scratch/stderr" >&2 &
    cat_err=$!
    # timeout signals the whole process group (vng and its qemu child). It runs in
    # a process group of its own, so a signal to ours (a run stopped from outside)
    # would not reach it: this script passes TERM, INT and HUP on, and waits for it.
    timeout --kill-after=20 "$budget" "${cmd[@]}" < /dev/null > "$scratch/stdout" 2> "$scratch/stderr" &
    timeout_pid=$!
    (
        # its sleep must not outlive it: a sleep left behind would hold our stdout
        # and stderr open (a pipe reader would wait out the boot timeout)
        sleep "$boot_timeout_s" < /dev/null > /dev/null 2>&1 &
        sleeper=$!
        trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
        wait "$sleeper"
        if [ ! -e "$scratch/started" ] && [ ! -e "$scratch/setup_error" ]; then
            stage="before guest_setup.sh ran (kernel boot or virtme-ng init)"
            [ -e "$scratch/booted" ] && stage="in guest_setup.sh (modules, loop device, VG)"
            echo "run_in_vm.sh: the guest has not started the command after ${boot_timeout_s}s: hung $stage; stopping the VM" >&2
            : > "$scratch/hung"
            kill -TERM "$timeout_pid" 2>/dev/null
        fi
    ) &
    watchdog=$!
    trap 'stopped=1; kill -TERM "$timeout_pid" 2>/dev/null' TERM INT HUP
    while :; do
        vng_rc=0
        wait "$timeout_pid" || vng_rc=$?
        kill -0 "$timeout_pid" 2>/dev/null || break  # else a trapped signal ended the wait early
    done
    trap - TERM INT HUP
    kill "$watchdog" 2>/dev/null
    wait "$watchdog" 2>/dev/null
    wait "$cat_out" "$cat_err"
    hung=""
    [ -e "$scratch/hung" ] && hung=1
    return 0
}

start=$(date +%s)
run_vm_once "$timeout_s"
if [ -n "$hung" ] && [ -z "$stopped" ] && [ ! -f "$scratch/rc" ]; then
    left=$(( timeout_s - ($(date +%s) - start) ))
    if [ "$left" -gt "$boot_timeout_s" ]; then
        echo "run_in_vm.sh: booting the VM once more (${left}s of DK_REALVM_TIMEOUT left)" >&2
        run_vm_once "$left"
    fi
fi
elapsed=$(( $(date +%s) - start ))

if [ -f "$scratch/rc" ]; then
    rc="$(cat "$scratch/rc")"
    if [ "$rc" != "$vng_rc" ]; then
        echo "run_in_vm.sh: note: vng exited $vng_rc, guest command exited $rc; using the latter" >&2
    fi
    echo "run_in_vm.sh: guest command exited $rc (VM wall time ${elapsed}s)" >&2
    exit "$rc"
fi
if [ -f "$scratch/setup_error" ]; then
    die "guest setup failed: $(cat "$scratch/setup_error")" 3
fi
[ -z "$stopped" ] || die "stopped by a signal; the VM was shut down (after ${elapsed}s)" 143
[ -z "$hung" ] || die "the guest never started the command (hung before it, twice or with no time left for a second boot; after ${elapsed}s). Re-run with --verbose to see the guest console" 125
if [ "$vng_rc" = 124 ] || [ "$vng_rc" = 137 ]; then
    die "VM run exceeded DK_REALVM_TIMEOUT=${timeout_s}s and was killed (after ${elapsed}s)" 124
fi
die "the VM did not run the command (vng exit code $vng_rc after ${elapsed}s; boot failure?). Re-run with --verbose to see the guest console. Command was: ${cmd[*]}" 125
