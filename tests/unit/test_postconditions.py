"""After a create, snapshot or copy whose LVM command exits 0, the driver confirms its
request marker is on the LV; a success that cannot be this request's is a failure."""

import pytest

from driver_kit import AlreadyExists
from driver_kit.exceptions import BackendError
from lvm_driver.driver import VOLUME_TAG
from lvm_driver.policy.tags import REQUEST_TAG_PREFIX
from tests.unit.test_lvm_driver import make, sim  # noqa: F401 - sim: the 10 GiB pool fixture


def lvs(sim):
    return sim.state()["vgs"]["dkvg"]["lvs"]


@pytest.mark.parametrize("parse", [False, True], ids=["lvs", "metadata-text"])
def test_a_create_that_lost_its_tags_fails_and_removes_nothing(sim, tmp_path, parse):
    driver = make(tmp_path, lvm_metadata_parse=parse)
    sim.inject("lvcreate", exit_code=0, drop_tags=True)
    with pytest.raises(BackendError, match=r"lacks this request's marker .*this create "
                                           r"failed"):
        driver.create_volume("volume-a", 1)
    assert lvs(sim)["volume-a"]["tags"] == []  # not provably the driver's: left alone
    assert driver.backend_find_volume("volume-a") is not None  # counted, as an operator's LV


@pytest.mark.parametrize("operation", ["snapshot", "copy"])
def test_a_snapshot_or_copy_that_lost_its_tags_fails(sim, tmp_path, operation):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    sim.inject("lvcreate", exit_code=0, drop_tags=True)
    with pytest.raises(BackendError, match="lacks this request's marker"):
        if operation == "snapshot":
            driver.create_snapshot("made", "volume-a")
        else:
            driver.create_cloned_volume("made", "volume-a")
    assert lvs(sim)["made"]["tags"] == []


def test_an_exit_0_that_made_nothing_fails(sim, tmp_path):
    driver = make(tmp_path)
    sim.inject("lvcreate", exit_code=0, stderr="")
    with pytest.raises(BackendError, match="LVM lists no such LV: this create failed"):
        driver.create_volume("volume-a", 1)
    assert "volume-a" not in lvs(sim)


def test_an_exit_0_while_another_request_made_the_name_keeps_its_lv(sim, tmp_path):
    """The fault campaign's case: a masked failure while another request's LV holds the
    name must neither report success nor remove the other request's LV."""
    driver = make(tmp_path)
    other = f"{REQUEST_TAG_PREFIX}other"
    sim.run(["lvcreate", "-T", "-V", "1g", "-n", "volume-a", "--addtag", VOLUME_TAG,
             "--addtag", other, "dkvg/pool"])
    sim.inject("lvcreate", exit_code=0, stderr="")
    with pytest.raises(BackendError, match="another request made it"):
        driver.create_volume("volume-a", 1)
    assert sorted(lvs(sim)["volume-a"]["tags"]) == sorted([VOLUME_TAG, other])


def test_a_duplicate_says_already_exists_in_one_line(sim, tmp_path):
    driver = make(tmp_path)
    driver.create_volume("volume-a", 1)
    with pytest.raises(AlreadyExists) as caught:
        driver.create_volume("volume-a", 1)
    assert str(caught.value) == ("'volume-a' already exists in volume group 'dkvg': "
                                 "nothing was created")
