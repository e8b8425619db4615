"""The campaign's audit: every change a command makes to the VG is journaled as that
command's, also when a slow or hung command's fault was saved as used up first."""

from __future__ import annotations

import json

import pytest

from lvm_driver.run.executor import LVMTimeoutError
from tests.campaign.audit import AuditSimulator
from tests.campaign.journal import Journal

GiB = 1024 ** 3
CREATE = ["lvcreate", "-T", "-V", "1g", "-n", "made", "vg/pool"]


@pytest.fixture
def audited(tmp_path):
    """(the simulator, its journal's path) with VG ``vg`` and thin pool ``pool``."""
    path = str(tmp_path / "ops.jsonl")
    sim = AuditSimulator(str(tmp_path / "state.json"), role="driver", journal=Journal(path),
                         vg_name="vg", pool_name="pool")
    sim.create_vg("vg", 8 * GiB)
    sim.run(["lvcreate", "-T", "-L", "1g", "vg/pool"])
    return sim, path


def _creations_of_made(path):
    with open(path, encoding="utf-8") as handle:
        return [rec["argv"] for rec in map(json.loads, handle) if rec["ev"] == "mut"
                and any(lv["name"] == "made" for lv in rec["created"])]


def test_a_slow_create_is_journaled_as_the_create(audited):
    sim, path = audited
    sim.inject("lvcreate", delay_s=0.01)  # saved as used up before the create runs
    sim.executor(timeout_s=5).run(CREATE, readonly=False)
    assert _creations_of_made(path) == [CREATE]


def test_a_hung_create_changes_nothing_and_the_next_is_journaled(audited):
    sim, path = audited
    sim.inject("lvcreate", hang=True)
    with pytest.raises(LVMTimeoutError):
        sim.executor(timeout_s=0.05).run(CREATE, readonly=False)
    assert _creations_of_made(path) == []
    sim.executor(timeout_s=5).run(CREATE, readonly=False)
    assert _creations_of_made(path) == [CREATE]
