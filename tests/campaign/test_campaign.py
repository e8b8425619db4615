"""The fault campaign at CI size, and proofs that its invariant checks can fail.

The campaign's seed changes every day (``DK_CAMPAIGN_SEED`` fixes it; the
report prints the command that replays it). Its size stays small enough for
CI: ``DK_CAMPAIGN_OPS`` raises it.
"""

from __future__ import annotations

import datetime
import os

import pytest

from tests.campaign.checks import Checker, Limits
from tests.campaign.plan import Op
from tests.campaign.runner import Settings, replay_command, run_campaign

GiB = 1024 ** 3
CI_OPS = 800


def _seed() -> int:
    return int(os.environ.get("DK_CAMPAIGN_SEED")
               or datetime.date.today().strftime("%Y%m%d"))


def test_campaign_keeps_every_invariant(tmp_path, capsys):
    settings = Settings(seed=_seed(), ops=int(os.environ.get("DK_CAMPAIGN_OPS", CI_OPS)),
                        procs=4, threads=3, kills=1, run_dir=str(tmp_path / "run"))
    result = run_campaign(settings)
    with capsys.disabled():
        print("\n" + result.report)
    assert result.passed, (f"{len(result.violations)} invariant violations; replay with "
                           f"`{replay_command(settings)}`:\n{result.report}")


# -- the checks themselves, on hand-made records ----------------------------------------

def _checker(*ops: Op) -> Checker:
    limits = Limits.compute(pool_bytes=10 * GiB, thick_total_bytes=10 * GiB, ratio=1.0,
                            reserved_percentage=0)
    return Checker({op.id: op for op in ops}, limits)


def _lv(name: str, nbytes: int, tags: list[str], uuid: str, origin: str | None = None,
        kind: str = "thin") -> dict:
    return {"name": name, "kind": kind, "bytes": nbytes, "tags": tags, "origin": origin,
            "pool": "pool", "uuid": uuid}


def _mut(t: float, role: str, op, created=(), removed=(), thin=(0, 0)) -> dict:
    return {"ev": "mut", "t": t, "seq": int(t * 10), "role": role, "op": op,
            "argv": ["lvsomething"], "created": list(created), "removed": list(removed),
            "changed": [], "totals_before": {"thin": thin[0], "linear": 0, "vg_free": GiB * 9},
            "totals_after": {"thin": thin[1], "linear": 0, "vg_free": GiB * 9}}


def test_a_driver_removing_the_operators_lv_is_a_violation():
    delete = Op(1, "delete", name="mine")
    checker = _checker(delete)
    checker.feed([_mut(1.0, "operator", None, created=[_lv("mine", GiB // 2, [], "u1")]),
                  {"ev": "start", "op": 1, "t": 2.0},
                  _mut(2.1, "driver", 1, removed=[_lv("mine", GiB // 2, [], "u1")]),
                  {"ev": "end", "op": 1, "t": 2.2, "outcome": "ok", "cmds": []}])
    assert [v.rule for v in checker.violations] == ["foreign_removed"]


@pytest.mark.parametrize("pool_gib, read_t, rules", [
    (9, 1.2, ["cap_thin"]),  # 12 GiB after, 11 without the operator's later LV: over 10
    (8, 1.2, []),            # 11 after, 10 without the operator's LV made after the read
    (8, 1.6, ["cap_thin"]),  # the read saw the operator's LV: the driver had to refuse
])
def test_a_create_over_the_cap_is_a_violation_unless_the_operators_later_lvs_did_it(
        pool_gib, read_t, rules):
    checker = _checker(Op(1, "create_thin", name="v1", size_gb=2))  # cap 10 GiB
    checker.feed([{"ev": "start", "op": 1, "t": 1.0},
                  _mut(1.5, "operator", None, thin=(pool_gib * GiB, (pool_gib + 1) * GiB),
                       created=[_lv("opr0", GiB, [], "u0")]),
                  _mut(2.0, "driver", 1, thin=((pool_gib + 1) * GiB, (pool_gib + 3) * GiB),
                       created=[_lv("v1", 2 * GiB, ["driver_kit_volume"], "u1")]),
                  {"ev": "end", "op": 1, "t": 2.1, "outcome": "ok", "read_t": read_t,
                   "result": {"size_gb": 2}, "cmds": []}])
    checker.flush()
    assert [v.rule for v in checker.violations] == rules


def test_a_failed_create_that_leaves_its_lv_is_a_violation():
    from tests.campaign.outcomes import check_outcomes
    create = Op(1, "create_thin", name="v1", size_gb=1)
    checker = _checker(create)
    checker.feed([{"ev": "start", "op": 1, "t": 1.0},
                  _mut(1.1, "driver", 1, created=[_lv("v1", GiB, ["driver_kit_volume"], "u1")],
                       thin=(0, GiB)),
                  {"ev": "end", "op": 1, "t": 1.2, "outcome": "error", "etype": "LVMError",
                   "cmds": [["lvs", 0, []], ["lvcreate", 5, ["fail_after_apply"]],
                            ["lvs", 0, []]]}])
    checker.flush()
    check_outcomes(checker)
    assert [v.rule for v in checker.violations] == ["failure_left_lv"]


def test_stats_up_after_a_faulted_read_is_a_violation():
    stats = Op(1, "stats")
    checker = _checker(stats)
    checker.feed([{"ev": "start", "op": 1, "t": 1.0},
                  {"ev": "end", "op": 1, "t": 1.1, "outcome": "ok", "cmds": [
                      ["lvs", 0, ["empty_report"]], ["vgs", 0, []]],
                   "result": {"pools": [{"pool": "vg", "state": "up"}]}}])
    assert [v.rule for v in checker.violations] == ["stats_up_after_fault"]


def test_a_delete_that_reports_success_while_the_lv_stays_is_a_violation():
    from tests.campaign.outcomes import check_outcomes
    create, delete = Op(1, "create_thin", name="v1", size_gb=1), Op(2, "delete", name="v1")
    checker = _checker(create, delete)
    checker.feed([{"ev": "start", "op": 1, "t": 1.0},
                  _mut(1.1, "driver", 1, created=[_lv("v1", GiB, ["driver_kit_volume"], "u1")],
                       thin=(0, GiB)),
                  {"ev": "end", "op": 1, "t": 1.2, "outcome": "ok", "result": {"size_gb": 1},
                   "cmds": []},
                  {"ev": "start", "op": 2, "t": 2.0},  # its lvs met an empty report
                  {"ev": "end", "op": 2, "t": 2.1, "outcome": "ok", "result": None,
                   "cmds": [["lvs", 0, ["empty_report"]]]}])
    checker.flush()
    check_outcomes(checker)
    assert [v.rule for v in checker.violations] == ["delete_kept_lv"]
