"""What each request reported, held against what LVM shows it did (checked at the end).

On the simulator every LV has a history (which request made it, when it was
removed and by whom), so a report is checked against the instant the request
returned. On real LVM there is no command record: names decide, and only the
final state is known, so the checks are the lenient ones a name allows.
"""

from __future__ import annotations

from typing import Any

from tests.campaign.audit import is_driver_tagged
from tests.campaign.checks import GiB, OUTSIDE_ROLES, Checker, History, _gb
from tests.campaign.plan import CREATES, DELETES


def unknown_ops(checker: Checker) -> set[Any]:
    """Requests that started and never ended (their process was killed)."""
    return set(checker.starts) - set(checker.ends)


def _alive_named(checker: Checker, name: str, t: float) -> History | None:
    for history in checker.history.values():
        if history.alive_at(t) and history.name_at(t) == name:
            return history
    return None


def check_outcomes(checker: Checker) -> None:
    """Every ended request of the simulator campaign against the LV histories."""
    for op_id, end in checker.ends.items():
        op = checker.op(op_id)
        start = checker.starts.get(op_id)
        if op is None or start is None:
            continue
        t0, t1, outcome = start["t"], end["t"], end["outcome"]
        made = [checker.history[u] for u in checker.created_by.get(op_id, [])]
        if op.kind in CREATES and outcome == "ok":
            _created_ok(checker, op, end, made, t1)
        elif op.kind in CREATES:
            cleanup = end.get("cleanup_faults")
            for history in made:
                if history.removed_t is None or history.removed_t > t1:
                    rule = "failure_left_lv_cleanup_faulted" if cleanup else "failure_left_lv"
                    checker.add(rule, (op_id, history.name),
                                f"request {op_id} ({op.kind} {op.name}) failed "
                                f"({end.get('etype')}: {str(end.get('msg'))[:160]}) and left "
                                f"{history.name} it made"
                                + (f"; its clean-up met {cleanup}" if cleanup else ""),
                                t1, (op.name,), (op_id,))
        elif op.kind in DELETES and outcome == "ok":
            there = _alive_named(checker, op.name, t0)
            if there is not None and there.alive_at(t1):
                checker.add("delete_kept_lv", op_id,
                            f"request {op_id} ({op.kind} {op.name}) reported success; "
                            f"{op.name} ({there.kind}, tags {there.tags}) is still there",
                            t1, (op.name,), (op_id,))
        elif op.kind == "extend" and outcome == "ok":
            there = _alive_named(checker, op.name, t1)
            wanted = end["result"]["size_gb"] * GiB
            if there is not None and there.bytes_at(t1) < wanted:
                checker.add("extend_short", op_id,
                            f"request {op_id} (extend {op.name}) returned "
                            f"{end['result']['size_gb']} GiB; the LV has "
                            f"{_gb(there.bytes_at(t1))}", t1, (op.name,), (op_id,))


def _created_ok(checker: Checker, op: Any, end: dict[str, Any], made: list[History],
                t1: float) -> None:
    named = [h for h in made if any(name == op.name for _, name in h.names)]
    if not named:
        checker.add("success_without_lv", op.id,
                    f"request {op.id} ({op.kind} {op.name}) reported success and made no "
                    f"LV {op.name}", t1, (op.name,), (op.id,))
        return
    history = named[-1]
    if history.removed_t is not None and history.removed_t < t1:
        remover = checker.op(history.removed_by)
        if remover is None or remover.kind not in DELETES or remover.name != op.name:
            checker.add("success_without_lv", op.id,
                        f"request {op.id} ({op.kind} {op.name}) reported success after "
                        f"{checker._describe(history.removed_by)} removed its LV",
                        t1, (op.name,), (op.id, history.removed_by))
        return
    if op.kind != "snapshot":
        wanted = end["result"]["size_gb"] * GiB
        if history.bytes_at(t1) < wanted:
            checker.add("short_volume", op.id,
                        f"request {op.id} ({op.kind} {op.name}) returned "
                        f"{end['result']['size_gb']} GiB; its LV has "
                        f"{_gb(history.bytes_at(t1))}", t1, (op.name,), (op.id,))


def check_accounted(checker: Checker, lvs: dict[str, dict[str, Any]], t: float) -> None:
    """Every LV at the end has a maker: the set-up, the operator, or a request."""
    in_flight = {checker.op(op_id).name for op_id in unknown_ops(checker)
                 if checker.op(op_id) is not None}
    for uuid, rec in lvs.items():
        history = checker.history.get(uuid)
        if history is not None and (history.role in OUTSIDE_ROLES
                                    or history.created_by is not None):
            continue  # a failed maker is failure_left_lv, an untagged one untagged_create
        if rec["name"] in in_flight and is_driver_tagged(rec["tags"]):
            continue  # a killed request's LV, made just before the kill
        checker.add("unaccounted", uuid,
                    f"{rec['name']} ({rec['kind']}, {_gb(rec['bytes'])}, tags {rec['tags']}) "
                    f"was made by nobody the campaign knows", t, (rec["name"],))


def check_real(checker: Checker, lvs: dict[str, dict[str, Any]], operator_names: set[str],
               t: float) -> None:
    """The name-based end checks of the real-LVM campaign (no command records there)."""
    final = {rec["name"]: rec for rec in lvs.values()}
    unknown = unknown_ops(checker)
    by_name: dict[str, list[Any]] = {}
    for op_id in list(checker.ends) + list(unknown):
        op = checker.op(op_id)
        if op is not None:
            by_name.setdefault(op.name, []).append(op_id)

    def later(op_id: Any, kinds: frozenset[str], ok_only: bool) -> bool:
        """Another request of these kinds on the same name started after this one."""
        t0 = checker.starts[op_id]["t"]
        for other in by_name.get(checker.op(op_id).name, []):
            if other == op_id or checker.op(other).kind not in kinds:
                continue
            outcome = checker.ends.get(other, {}).get("outcome", "unknown")
            if checker.starts[other]["t"] > t0 and (not ok_only or outcome in
                                                    ("ok", "unknown")):
                return True
        return False

    for op_id, end in checker.ends.items():
        op = checker.op(op_id)
        if op is None:
            continue
        there = op.name in final
        if op.kind in CREATES and end["outcome"] == "ok" and not there \
                and not later(op_id, DELETES, False):
            checker.add("success_without_lv", op_id, f"request {op_id} ({op.kind} {op.name}) "
                        f"reported success; {op.name} is not there", t, (op.name,), (op_id,))
        if op.kind in CREATES and end["outcome"] != "ok" and there \
                and is_driver_tagged(final[op.name]["tags"]) \
                and not any(checker.ends.get(o, {}).get("outcome", "unknown") in
                            ("ok", "unknown") for o in by_name[op.name]
                            if checker.op(o).kind in CREATES):
            checker.add("failure_left_lv", op_id, f"request {op_id} ({op.kind} {op.name}) "
                        f"failed ({end.get('etype')}) and {op.name} is there", t,
                        (op.name,), (op_id,))
        if op.kind in DELETES and end["outcome"] == "ok" and there \
                and op.name not in operator_names and not later(op_id, CREATES, True):
            checker.add("delete_kept_lv", op_id, f"request {op_id} ({op.kind} {op.name}) "
                        f"reported success; {op.name} is still there", t, (op.name,), (op_id,))
    for uuid, rec in lvs.items():
        if rec["kind"] == "thin-pool" or rec["name"] in operator_names:
            continue
        makers = [o for o in by_name.get(rec["name"], []) if checker.op(o).kind in CREATES]
        if not is_driver_tagged(rec["tags"]) or not makers:
            checker.add("unaccounted", uuid, f"{rec['name']} ({rec['kind']}, tags "
                        f"{rec['tags']}) was made by nobody the campaign knows", t,
                        (rec["name"],))
