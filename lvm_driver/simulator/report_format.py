"""LVM's report output: field names, headings, units, and the table or JSON forms.

``lvs`` and ``vgs`` build rows of raw typed values; this module turns them
into exactly what LVM 2.03 prints for ``-o``, ``--units``, ``--nosuffix``,
``--noheadings``, ``--separator`` and ``--reportformat json``.
"""

from __future__ import annotations

import json
from typing import Any

from lvm_driver.simulator.args import Args
from lvm_driver.simulator.errors import EXIT_FAILED, Fail, parse_error
from lvm_driver.simulator.session import Session
from lvm_driver.simulator.sizes import format_size

_SIZE_FIELDS = {"vg_size", "vg_free", "vg_extent_size", "lv_size", "lv_metadata_size",
                "pv_size", "pv_free", "dev_size"}
_COUNT_FIELDS = {"vg_extent_count", "vg_free_count", "lv_count", "pv_count",
                 "snap_count", "vg_seqno", "pv_mda_count", "vg_mda_count"}
_LV_FIELDS = ("lv_name", "lv_size", "lv_attr", "lv_layout", "lv_role", "pool_lv",
              "origin", "data_percent", "metadata_percent", "lv_metadata_size",
              "lv_uuid", "lv_tags", "lv_active", "lv_skip_activation", "lv_full_name",
              "lv_path", "segtype", "move_pv", "mirror_log", "copy_percent", "convert_lv")
_VG_FIELDS = ("vg_name", "vg_size", "vg_free", "vg_extent_size", "vg_uuid",
              "vg_extent_count", "vg_free_count", "lv_count", "pv_count", "snap_count",
              "vg_attr", "vg_seqno", "vg_mda_count")
_PV_FIELDS = ("pv_name", "pv_uuid", "pv_fmt", "pv_mda_count", "pv_size", "pv_free",
              "dev_size", "pv_attr")
_HEADINGS = {
    "vg_mda_count": "#VMda", "pv_name": "PV", "pv_uuid": "PV UUID", "pv_fmt": "Fmt",
    "pv_mda_count": "#PMda",
    "pv_size": "PSize", "pv_free": "PFree", "dev_size": "DevSize", "pv_attr": "Attr",
    "lv_name": "LV", "vg_name": "VG", "lv_attr": "Attr", "lv_size": "LSize",
    "pool_lv": "Pool", "origin": "Origin", "data_percent": "Data%",
    "metadata_percent": "Meta%", "move_pv": "Move", "mirror_log": "Log",
    "copy_percent": "Cpy%Sync", "convert_lv": "Convert", "vg_size": "VSize",
    "vg_free": "VFree", "vg_extent_size": "Ext", "lv_layout": "Layout",
    "lv_role": "Role", "lv_metadata_size": "MSize", "lv_uuid": "LV UUID",
    "lv_tags": "LV Tags", "vg_uuid": "VG UUID", "pv_count": "#PV", "lv_count": "#LV",
    "snap_count": "#SN", "vg_attr": "Attr", "lv_active": "Active",
    "vg_extent_count": "#Ext", "lv_skip_activation": "SkipAct", "vg_free_count": "Free",
    "segtype": "Type", "lv_full_name": "LV", "lv_path": "Path", "vg_seqno": "Seq",
}
_DEFAULT_COLUMNS = {
    "lvs": ("lv_name", "vg_name", "lv_attr", "lv_size", "pool_lv", "origin",
            "data_percent", "metadata_percent", "move_pv", "mirror_log",
            "copy_percent", "convert_lv"),
    "vgs": ("vg_name", "pv_count", "lv_count", "snap_count", "vg_attr", "vg_size",
            "vg_free"),
    "pvs": ("pv_name", "vg_name", "pv_fmt", "pv_attr", "pv_size"),
}


def report_columns(args: Args) -> list[str]:
    """The fields ``-o`` asks for (``+`` adds to the defaults), by their full names."""
    command = "lvs" if args.command == "lvdisplay" else args.command
    known = {"lvs": _LV_FIELDS + _VG_FIELDS, "pvs": _PV_FIELDS + _VG_FIELDS}.get(
        command, _VG_FIELDS)
    prefix = {"lvs": "lv_", "pvs": "pv_"}.get(command, "vg_")
    columns: list[str] = []
    options = args.all("options")
    if not options or options[0].startswith("+"):
        columns += _DEFAULT_COLUMNS[command]
    for option in options:
        for name in option.lstrip("+").split(","):
            name = name.strip().lower()  # LVM matches field names regardless of case
            if not name:
                continue
            if name not in known and prefix + name in known:
                name = prefix + name
            if name not in known:
                raise Fail(EXIT_FAILED, f"Unrecognised field: {name}")
            columns.append(name)
    return columns


def _cell(value: Any, column: str, units: str, suffix: bool) -> str:
    """One value as printed: sizes in ``--units``, nothing for no value."""
    if value is None or value == "":
        return ""
    if column in _SIZE_FIELDS:
        return format_size(value, units, suffix)
    return str(value)


def emit_report(session: Session, args: Args, section: str,
                rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Print ``rows`` as LVM does: a JSON report, or a table (aligned, or with
    ``--separator``) with or without headings."""
    fmt = args.last("reportformat", "basic")
    units = args.last("units", "r") or "r"
    if len(units) != 1 or units not in "hHrRbBsSkKmMgGtTpPeE":
        raise parse_error(f"Invalid argument for --units: {units}")
    suffix = not args.has("nosuffix")
    cells = [[_cell(row.get(col, ""), col, units, suffix) for col in columns] for row in rows]
    if fmt == "json":
        lines = ["  {", '      "report": [', "          {", f'              "{section}": [']
        for index, values in enumerate(cells):
            body = ", ".join(f'"{col}":{json.dumps(val)}' for col, val in zip(columns, values))
            comma = "," if index < len(cells) - 1 else ""
            lines.append(f"                  {{{body}}}{comma}")
        lines += ["              ]", "          }", "      ]", "  }"]
        session.out.raw("\n".join(lines) + "\n")
        return
    if fmt != "basic":
        raise parse_error(f"Invalid argument for --reportformat: {fmt}")
    if not rows:
        return  # LVM prints no table, not even headings, without rows
    separator = args.last("separator")
    numeric = {col for col in columns if col in _SIZE_FIELDS | _COUNT_FIELDS}
    table = cells if args.has("noheadings") else [[_HEADINGS.get(c, c) for c in columns], *cells]
    if separator is not None:
        for values in table:
            session.out.raw("  " + separator.join(values) + "\n")
        return
    widths = [max([6 if columns[i].endswith("percent") else 0]
                  + [len(values[i]) for values in table]) for i in range(len(columns))]
    for line_no, values in enumerate(table):
        parts = []
        for i, value in enumerate(values):
            heading = line_no == 0 and not args.has("noheadings")
            right = columns[i] in numeric and not heading
            parts.append(value.rjust(widths[i]) if right else value.ljust(widths[i]))
        session.out.raw("  " + " ".join(parts) + "\n")
