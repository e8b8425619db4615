#!/usr/bin/env bash
# Record what real LVM prints, as test data for the unit tests (simulator and
# report parser). Runs INSIDE the VM only:
#
#   tests/realvm/run_in_vm.sh -- tests/realvm/capture_lvm_outputs.sh
#
# Needs the empty VG prepared by guest_setup.sh (DK_REAL_LVM=1, DK_REAL_LVM_VG).
# Every capture is one JSON file in tests/unit/data/lvm/:
#   {"argv": [...], "exit_code": N, "stdout": "...", "stderr": "..."}
# plus timings.txt (wall seconds of each command in the guest) and README.md
# (index of the captures, LVM version, the lvm.conf in force). The data dir is
# only replaced once every capture has been taken.
set -uo pipefail

die() { echo "capture_lvm_outputs.sh: ERROR: $*" >&2; exit 1; }

[ "${DK_REAL_LVM:-}" = 1 ] || die "run me inside the VM: tests/realvm/run_in_vm.sh -- $0"
vg="${DK_REAL_LVM_VG:?}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out_dir="$repo/tests/unit/data/lvm"
python="${DK_REALVM_PYTHON:-$repo/.venv/bin/python}"
[ -x "$python" ] || die "no python at $python (needed to write the JSON files)"
[ -z "$(lvs --noheadings -o lv_name "$vg" 2>/dev/null)" ] || die "VG $vg is not empty"

# The C locale, as the driver runs LVM (decimal point, untranslated messages).
export LC_ALL=C

raw="$(mktemp -d /tmp/dk-capture.XXXXXX)" || die "mktemp failed"
seq=0

# cap NAME -- ARGV... : run ARGV, keep argv/stdout/stderr/exit code/time.
cap() {
    local name="$1"; shift
    [ "$1" = "--" ] && shift
    seq=$((seq + 1))
    local base
    base="$raw/$(printf '%02d' "$seq")_$name"
    printf '%s\0' "$@" > "$base.argv"
    local t0="$EPOCHREALTIME"
    "$@" > "$base.out" 2> "$base.err"
    local rc=$?
    local t1="$EPOCHREALTIME"
    echo "$rc" > "$base.rc"
    echo "$t0 $t1" > "$base.time"
    printf '%-34s rc=%-3s %s\n' "$name" "$rc" "$*" >&2
    return 0
}

# timed NAME -- ARGV... : a non-LVM step, only timed (listed in timings.txt).
timed() {
    local name="$1"; shift
    [ "$1" = "--" ] && shift
    local t0="$EPOCHREALTIME"
    "$@" || die "$name failed: $*"
    echo "$name $t0 $EPOCHREALTIME $*" >> "$raw/steps.time"
}

must() {  # the setup commands must succeed
    local name="$1"
    cap "$@"
    local rc; rc="$(cat "$raw/$(printf '%02d' "$seq")_$name.rc")"
    [ "$rc" = 0 ] || { cat "$raw/$(printf '%02d' "$seq")_$name.err" >&2; die "$name failed (rc=$rc)"; }
}

# The stats report the driver is meant to run, verbatim from the brief ...
stats_fields=vg_name,vg_size,vg_free,vg_extent_size,lv_name,lv_size,lv_attr,lv_layout,lv_role,pool_lv,origin,data_percent,metadata_percent,lv_metadata_size,lv_uuid
stats_ro=(lvs --reportformat json --units b --nosuffix --readonly --all -o "$stats_fields")
# ... and the same without --readonly: --readonly never asks the kernel, so
# lv_attr shows 'X' (unknown) for state and data/metadata_percent are empty.
stats_live=(lvs --reportformat json --units b --nosuffix --all -o "$stats_fields")
stats() {  # stats STATE [VG]
    cap "lvs_stats_$1" -- "${stats_ro[@]}" "${2:-$vg}"
    cap "lvs_stats_$1_live" -- "${stats_live[@]}" "${2:-$vg}"
}

# --- versions and capabilities ----------------------------------------------
cap lvm_version -- lvm version
cap lvs_version -- lvs --version
cap lvm_segtypes -- lvm segtypes
cap lvm_config_diff -- lvm config --type diff

# --- empty VG ------------------------------------------------------------------
stats empty_vg
cap vgs_report_empty_vg -- vgs --reportformat json --units b --nosuffix --readonly -o vg_name,vg_size,vg_free,vg_extent_size "$vg"

# --- VG with only an empty thin pool ---------------------------------------------
must create_pool -- lvcreate --type thin-pool -L 1G -n pool "$vg"
stats pool_only

# --- the full picture ----------------------------------------------------------
must create_volume_aaa -- lvcreate --type thin -V 2G --thinpool pool -n volume-aaa "$vg"
must create_volume_bbb -- lvcreate --type thin -V 512M --thinpool pool -n volume-bbb "$vg"
timed dd_100MiB_into_volume_aaa -- dd if=/dev/urandom of="/dev/$vg/volume-aaa" bs=1M count=100 oflag=direct status=none
timed sync -- sync
must create_snap_aaa -- lvcreate --snapshot -n snap-aaa "$vg/volume-aaa"
must create_thick_1 -- lvcreate --type linear -L 64M -n thick-1 "$vg"
must create_operator_made -- lvcreate --type thin -V 256M --thinpool pool -n operator-made "$vg"
stats full
cap vgs_report -- vgs --reportformat json --units b --nosuffix --readonly -o vg_name,vg_size,vg_free,vg_extent_size "$vg"
cap vgs_report_live -- vgs --reportformat json --units b --nosuffix -o vg_name,vg_size,vg_free,vg_extent_size "$vg"
# Every kind of LV and its attr string (pool, thin, thin snapshot, linear,
# hidden tdata/tmeta/pmspare).
cap lv_attrs -- lvs --reportformat json --all -o lv_name,lv_attr,lv_layout,lv_role,lv_active,lv_skip_activation "$vg"
# The usual human table, for eyeballing.
cap lvs_table -- lvs --all --units b "$vg"

# --- error cases -----------------------------------------------------------------
missing_vg=no-such-vg
cap err_lvs_missing_vg -- "${stats_ro[@]}" "$missing_vg"
cap err_lvs_missing_vg_live -- "${stats_live[@]}" "$missing_vg"
cap err_vgs_missing_vg -- vgs --reportformat json --units b --nosuffix --readonly -o vg_name,vg_size,vg_free,vg_extent_size "$missing_vg"
cap err_lvcreate_thin_name_exists -- lvcreate --type thin -V 1G --thinpool pool -n volume-aaa "$vg"
cap err_lvcreate_thin_missing_pool -- lvcreate --type thin -V 1G --thinpool no-such-pool -n volume-ccc "$vg"
cap err_lvcreate_thick_too_big -- lvcreate --type linear -L 10G -n thick-too-big "$vg"
cap err_lvextend_smaller -- lvextend -L 1G "$vg/volume-aaa"
cap err_lvextend_same_size -- lvextend -L 2G "$vg/volume-aaa"
cap err_lvremove_missing_lv -- lvremove -y "$vg/no-such-lv"
cap err_lvcreate_bad_name_slash -- lvcreate --type thin -V 1G --thinpool pool -n bad/name "$vg"
cap err_lvcreate_bad_name_snapshot -- lvcreate --type thin -V 1G --thinpool pool -n snapshot "$vg"
cap err_lvcreate_bad_name_tdata -- lvcreate --type thin -V 1G --thinpool pool -n x_tdata "$vg"

# --- successful extend / remove (what the driver runs on the happy path) ----------
cap ok_lvextend_thin -- lvextend -L 768M "$vg/volume-bbb"
cap ok_lvremove_thick -- lvremove -y "$vg/thick-1"

# --- pool inactive ---------------------------------------------------------------
must deactivate_pool -- lvchange -an "$vg/volume-aaa" "$vg/volume-bbb" "$vg/operator-made" "$vg/pool"
stats pool_inactive

# --- write the files (only now touch the repo) ----------------------------------
cp /etc/lvm/lvm.conf "$raw/lvm.conf"
uname -r > "$raw/kernel"
"$python" - "$raw" "$out_dir" <<'PY' || die "writing the capture files failed"
import json, os, pathlib, shutil, sys

raw, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
# Replace our previous captures, nothing else.
for old in list(out.glob("*.json")) + [out / "timings.txt", out / "README.md"]:
    if old.exists():
        old.unlink()

timings, index = [], []
for argv_file in sorted(raw.glob("*.argv")):
    stem = argv_file.name[: -len(".argv")]
    name = stem.split("_", 1)[1]
    argv = argv_file.read_bytes().split(b"\0")[:-1]
    rec = {
        "argv": [a.decode() for a in argv],
        "exit_code": int((raw / f"{stem}.rc").read_text()),
        "stdout": (raw / f"{stem}.out").read_text(errors="replace"),
        "stderr": (raw / f"{stem}.err").read_text(errors="replace"),
    }
    (out / f"{name}.json").write_text(json.dumps(rec, indent=2, ensure_ascii=False) + "\n")
    t0, t1 = map(float, (raw / f"{stem}.time").read_text().split())
    timings.append((t1 - t0, name, rec["exit_code"], " ".join(rec["argv"])))
    first_err = rec["stderr"].strip().splitlines()
    index.append((name, rec["exit_code"], first_err[0].strip() if first_err else ""))

steps = []
if (raw / "steps.time").exists():
    for line in (raw / "steps.time").read_text().splitlines():
        n, t0, t1, cmd = line.split(" ", 3)
        steps.append((float(t1) - float(t0), n, cmd))

with open(out / "timings.txt", "w") as f:
    f.write("# Wall seconds of each command inside the TCG guest (kernel %s),\n"
            "# in execution order. seconds  rc  name  argv\n" % (raw / "kernel").read_text().strip())
    for secs, name, rc, cmd in timings:
        f.write(f"{secs:7.3f}  {rc:3d}  {name:34s} {cmd}\n")
    f.write("# non-LVM steps\n")
    for secs, name, cmd in steps:
        f.write(f"{secs:7.3f}    -  {name:34s} {cmd}\n")
    lvm_secs = [t[0] for t in timings]
    f.write(f"# {len(lvm_secs)} LVM commands, total {sum(lvm_secs):.1f} s, "
            f"mean {sum(lvm_secs)/len(lvm_secs):.2f} s, max {max(lvm_secs):.2f} s\n")

version = json.loads((out / "lvm_version.json").read_text())["stdout"].splitlines()
with open(out / "README.md", "w") as f:
    f.write("# Real LVM outputs\n\n"
            "Generated by `tests/realvm/run_in_vm.sh -- tests/realvm/capture_lvm_outputs.sh`;\n"
            "do not edit by hand. One JSON file per command: "
            "`{\"argv\", \"exit_code\", \"stdout\", \"stderr\"}`.\n"
            "Commands ran with `LC_ALL=C` in a virtme-ng guest, kernel "
            f"{(raw / 'kernel').read_text().strip()}.\n\n"
            + "".join(f"    {l.strip()}\n" for l in version[:2]) +
            "\nlvm.conf in force (`LVM_SYSTEM_DIR=/etc/lvm`):\n\n"
            + "".join(f"    {l}\n" for l in (raw / "lvm.conf").read_text().splitlines()) +
            "\n| file | exit | first stderr line |\n|---|---|---|\n")
    for name, rc, err in index:
        err = err.replace("|", "\\|")
        f.write(f"| {name}.json | {rc} | {err} |\n")
print(f"wrote {len(index)} captures to {out}", file=sys.stderr)
PY
rm -rf "$raw"
