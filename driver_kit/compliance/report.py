"""Writers for a run's results: a terminal table, JSON, and JUnit XML for CI servers."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from driver_kit.compliance.runner import RunReport
from driver_kit.tables import format_columns

__all__ = ["format_table", "hooks_line", "junit_xml", "report_to_dict", "write_json",
           "write_junit"]

_MARK = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "errored": "ERROR",
         "delegated": "SCHEDULER"}
_COUNTED = {"delegated": "relying on the scheduler"}


def format_table(report: RunReport, *, reason_width: int = 100) -> str:
    """Check id, result (with severity when it did not pass) and reason, one row each."""
    rows = []
    for r in report.results:
        mark = _MARK[r.status] + (f" ({r.severity})" if r.status in ("failed", "errored")
                                  else "")
        reason = " ".join(r.reason.split())
        if len(reason) > reason_width:
            reason = reason[:reason_width - 3] + "..."
        rows.append((r.id, mark, reason))
    table = format_columns(rows, ("CHECK", "RESULT", "REASON"))
    counts = ", ".join(f"{n} {_COUNTED.get(s, s)}" for s, n in report.counts().items())
    return (f"{table}\n\n{hooks_line(report)}\n{report.driver}: {counts} in "
            f"{report.duration_s:.1f} s; exit code {report.exit_code}\n")


def hooks_line(report: RunReport) -> str:
    """Which compliance hooks the run had, and what the missing ones would enable."""
    hooks = report.profile.get("hooks") or {}
    present = [name for name, hook in hooks.items() if hook["present"]]
    missing = [f"{name}{' (required)' if hook['required'] else ''}: "
               f"{', '.join(hook['enables']) or 'no check'}"
               for name, hook in hooks.items() if not hook["present"]]
    return (f"hooks: {', '.join(present) or 'none'}"
            + (f"; missing {'; '.join(missing)}" if missing else ""))


def report_to_dict(report: RunReport) -> dict[str, Any]:
    """The JSON document: summary, capability profile and every result."""
    return {
        "harness": "driver_kit.compliance",
        "driver": report.driver,
        "started_at": report.started_at,
        "duration_s": report.duration_s,
        "exit_code": report.exit_code,
        "summary": report.counts(),
        "profile": report.profile,
        "results": [{"id": r.id, "title": r.title, "clause": r.clause,
                     "severity": r.severity, "status": r.status, "reason": r.reason,
                     "duration_s": r.duration_s} for r in report.results],
    }


def write_json(report: RunReport, path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(report_to_dict(report), out, indent=2, sort_keys=False, default=str)
        out.write("\n")


def junit_xml(report: RunReport) -> str:
    """One <testsuite>, one <testcase> per check; should-level failures say so in type."""
    counts = report.counts()
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", {
        "name": f"driver-kit compliance: {report.driver}",
        "tests": str(len(report.results)), "failures": str(counts["failed"]),
        "errors": str(counts["errored"]),
        "skipped": str(counts["skipped"] + counts.get("delegated", 0)),
        "time": f"{report.duration_s:.3f}", "timestamp": report.started_at})
    props = ET.SubElement(suite, "properties")
    for key, value in report.profile.items():
        ET.SubElement(props, "property", {"name": f"profile.{key}",
                                          "value": json.dumps(value, default=str)})
    for r in report.results:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"driver_kit.compliance.{r.id.split('.')[0]}", "name": r.id,
            "time": f"{r.duration_s:.3f}"})
        detail = f"{r.title}\nseverity: {r.severity}\nclause: {r.clause}\nreason: {r.reason}"
        if r.status == "failed":
            ET.SubElement(case, "failure", {"message": r.reason,
                                            "type": r.severity}).text = detail
        elif r.status == "errored":
            ET.SubElement(case, "error", {"message": r.reason,
                                          "type": r.severity}).text = detail
        elif r.status in ("skipped", "delegated"):
            ET.SubElement(case, "skipped", {"message": r.reason})
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(report: RunReport, path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(junit_xml(report))
