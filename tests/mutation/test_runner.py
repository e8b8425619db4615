"""The mutation runner works end to end on two chosen mutants of the memory driver
(the full run is ``tests/mutation/run.sh``, far too long for every test run)."""

import pytest

from tests.mutation.run import ROOT, run_target
from tests.mutation.targets import TARGETS

#: provisioned counting dropped (GiB * n becomes n / GiB: ~0), which the harness must fail
DROPPED = ("core/ReplaceBinaryOperator_Mul_Div",
           "provisioned_bytes=sum(self.volumes.values()) * GiB,")
#: a delete that raises VolumeNotFound after deleting: the kit's idempotent delete
#: swallows it, so no check can tell (an equivalent mutant)
EQUIVALENT = ("core/ReplaceComparisonOperator_Is_IsNot",
              "if self.volumes.pop(name, None) is None:")


@pytest.mark.mutation
def test_a_dropped_count_is_killed_and_an_equivalent_mutant_survives(tmp_path):
    target = TARGETS["memory"]
    before = (ROOT / target.path).read_bytes()
    summary = run_target(target, out=tmp_path, keep=lambda op, line: (op, line) in
                         (DROPPED, EQUIVALENT), log=lambda _: None)
    outcomes = {(m["operator"], m["change"].splitlines()[0][1:]): m
                for m in summary["mutants"]}
    assert set(outcomes) == {DROPPED, EQUIVALENT}
    killed, survived = outcomes[DROPPED], outcomes[EQUIVALENT]
    assert killed["outcome"] == "killed"
    # killed by a must check that failed, not by a crash or a timeout
    assert killed["killed_by"] and not killed["killed_by"].startswith(("crash", "timeout"))
    assert survived["outcome"] == "survived"
    assert survived["change"] == ("-if self.volumes.pop(name, None) is None:\n"
                                  "+if self.volumes.pop(name, None) is not None:")
    assert (summary["killed"], summary["survived"], summary["score_pct"]) == (1, 1, 50.0)
    assert (tmp_path / "memory.json").exists()
    assert (ROOT / target.path).read_bytes() == before  # the checkout is never mutated
