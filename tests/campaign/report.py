"""The campaign's closing table: requests by kind and outcome, errors, faults, violations.

Each violation kind shows its first examples with the sequence of requests
and LVM changes that touched the same names just before it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from driver_kit.tables import format_columns

from tests.campaign.checks import Checker, Violation, _gb
from tests.campaign.outcomes import unknown_ops

OUTCOMES = ("ok", "refused", "error", "crash", "unknown")
EXAMPLES_PER_RULE = 3
SEQUENCE_LENGTH = 12


def _ops_table(checker: Checker) -> str:
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for op_id in checker.starts:
        op = checker.op(op_id)
        if op is None:
            continue
        outcome = checker.ends.get(op_id, {}).get("outcome", "unknown")
        by_kind[op.kind + (" (retry)" if op.note == "retry" else "")][outcome] += 1
    rows = [[kind, sum(c.values()), *(c[o] for o in OUTCOMES)]
            for kind, c in sorted(by_kind.items())]
    total = Counter()
    for c in by_kind.values():
        total.update(c)
    rows.append(["all", sum(total.values()), *(total[o] for o in OUTCOMES)])
    return format_columns(rows, ["request", "run", *OUTCOMES])


def _errors_table(checker: Checker) -> str:
    errors = Counter((end["outcome"], end.get("etype")) for end in checker.ends.values()
                     if end["outcome"] != "ok")
    rows = [[outcome, etype, n] for (outcome, etype), n in errors.most_common()]
    return format_columns(rows, ["outcome", "error type", "count"])


def _faults_table(injected: Counter[str], taken: Counter[str]) -> str:
    kinds = sorted(set(injected) | set(taken))
    return format_columns([[k, injected[k], taken[k]] for k in kinds],
                          ["fault", "injected", "met by a request"])


def _event_line(checker: Checker, rec: dict[str, Any], t0: float) -> str:
    when = f"{rec['t'] - t0:9.3f}s"
    if rec["ev"] == "start":
        op = checker.op(rec["op"])
        what = op.to_dict() if op else {}
        return f"{when} start  #{rec['op']} {what}"
    if rec["ev"] == "end":
        detail = rec.get("result") if rec["outcome"] == "ok" else \
            f"{rec.get('etype')}: {str(rec.get('msg'))[:110]}"
        return f"{when} end    #{rec['op']} {rec['outcome']} {detail}"
    parts = [f"+{lv['name']}({_gb(lv['bytes'])},{','.join(lv['tags']) or 'untagged'})"
             for lv in rec["created"]]
    parts += [f"-{lv['name']}" for lv in rec["removed"]]
    parts += [f"~{c['after']['name']}({_gb(c['after']['bytes'])})" for c in rec["changed"]]
    who = rec["role"] if rec["op"] is None else f"#{rec['op']}"
    return f"{when} lvm    {who} `{' '.join(rec['argv'][:6])}...` {' '.join(parts)}"


def sequence(checker: Checker, violation: Violation, t0: float) -> list[str]:
    """The requests and LVM changes touching the violation's names, up to it."""
    names = set(violation.names)
    ops = {o for o in violation.ops if o is not None}
    ops |= {op_id for op_id, op in checker.ops.items() if names & {op.name, op.source}}
    events = [r for r in list(checker.starts.values()) + list(checker.ends.values())
              if r["op"] in ops]
    events += [m for m in checker.mutations if m["op"] in ops or names & {
        lv["name"] for lv in m["created"] + m["removed"]}]
    events = sorted((e for e in events if e["t"] <= violation.t + 1e-6), key=lambda e: e["t"])
    return [_event_line(checker, e, t0) for e in events[-SEQUENCE_LENGTH:]]


def render(checker: Checker, *, header: list[str], injected: Counter[str],
           extra: list[str], t0: float) -> str:
    """The whole closing report as text."""
    lines = [*header, "", _ops_table(checker), "", _errors_table(checker), "",
             _faults_table(injected, checker.faults_taken), "", *extra, ""]
    unknown = unknown_ops(checker)
    if unknown:
        lines.append(f"requests in flight in killed processes (outcome unknown): "
                     f"{sorted(unknown, key=str)}")
    if not checker.violations:
        lines.append("violations: none")
        return "\n".join(lines)
    rules = Counter(v.rule for v in checker.violations)
    lines += ["", format_columns([list(item) for item in rules.most_common()],
                                 ["violation", "count"])]
    shown: Counter[str] = Counter()
    for violation in sorted(checker.violations, key=lambda v: v.t):
        if shown[violation.rule] >= EXAMPLES_PER_RULE:
            continue
        shown[violation.rule] += 1
        lines += ["", f"[{violation.rule}] at {violation.t - t0:.3f}s: {violation.message}"]
        lines += [f"    {line}" for line in sequence(checker, violation, t0)]
    return "\n".join(lines)
