"""The attack suite as Cinder deploys the driver (``unprivileged_attacks.ATTACKS``):
everything the ``cinder`` user can send to ``sudo oslo-rootwrap`` (Cinder's rootwrap
route, the project's filters) or to the daemon's entrypoints, aimed at a decoy VG on a
second loop device, a decoy raw device of known checksum and root-owned files; each
attempt must be refused and nothing else may change. In the VM lane (``-m realvm``).
The rows oslo.rootwrap itself lets through are strict xfails here; the set-up that
refuses them too is ``test_unprivileged_pinned_realvm.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.functional.unprivileged_attacks import (ATTACKS, KNOWN, ROOTWRAP_LETS_THROUGH,
                                                   Helper, attempt, write_table)
from tests.functional.unprivileged_host import (DECOY_VG, LOG_VICTIM, MiB, Host, fill, head,
                                                root, sha256)

pytestmark = pytest.mark.realvm


@pytest.fixture(scope="module")
def host(unprivileged_host: Host) -> Host:
    return unprivileged_host


@pytest.fixture(scope="module")
def suite(host: Host) -> Iterator[dict[str, Any]]:
    """The state nothing may change, taken before the first attempt; the table after."""
    victim = f"/dev/{host.vg}/victim-thin"
    root("lvcreate", "-q", "-T", "-V", "4m", "-n", "victim-thin", f"{host.vg}/pool")
    table: dict[str, Any] = {"rows": []}
    try:
        fill(victim, 0x3C, MiB)
        host.watched[victim] = ""
        host.cinder.ok("refresh")  # the daemon is up before the first attempt
        table["before"] = host.untouched()
        # the root helper's refusals are separate processes of a few seconds each under
        # TCG: they run four at a time up front (each row then reports its own outcome;
        # the checks after each row and after the suite still see any change)
        early = [row for row in ATTACKS
                 if isinstance(row[2], Helper) and row[0] not in ROOTWRAP_LETS_THROUGH]
        with ThreadPoolExecutor(max_workers=4) as pool:
            outcomes = pool.map(lambda row: attempt(row[2], host), early)
            table["early"] = dict(zip([row[0] for row in early], outcomes))
        yield table
        write_table(table["rows"])
    finally:  # the other modules share the host: leave its VG as it was
        host.watched.pop(victim, None)
        root("lvremove", "-q", "-f", f"{host.vg}/victim-thin")


def test_the_attack_suite_has_at_least_40_attempts():
    assert len(ATTACKS) - len(ROOTWRAP_LETS_THROUGH) >= 40
    assert len({row[0] for row in ATTACKS}) == len(ATTACKS)


def _params() -> list[Any]:
    return [pytest.param(row, id=row[0], marks=pytest.mark.xfail(strict=True, reason=KNOWN))
            if row[0] in ROOTWRAP_LETS_THROUGH else pytest.param(row, id=row[0])
            for row in ATTACKS]


@pytest.mark.parametrize("attack", _params())
def test_attack_is_refused(host: Host, suite: dict[str, Any], attack: tuple[str, str, Any]):
    ident, what, how = attack
    log_before = sha256(LOG_VICTIM)
    early = suite["early"].pop(ident, None)
    refused, said = early if early is not None else attempt(how, host)
    if sha256(LOG_VICTIM) != log_before:
        said += f" [root's {LOG_VICTIM} written]"
    suite["rows"].append((ident, what, refused, said))
    files = {path: sha256(path) for path in [host.raw, *host.watched]}
    assert files == suite["before"]["files"], f"{ident} changed a watched file or device"
    assert refused, f"{ident} {what}: not refused: {said}"


def test_after_the_suite_nothing_else_changed(host: Host, suite: dict[str, Any]):
    assert len(suite["rows"]) == len(ATTACKS)
    assert host.untouched() == suite["before"]
    assert head(f"/dev/{DECOY_VG}/precious", MiB) == b"\x77" * MiB

