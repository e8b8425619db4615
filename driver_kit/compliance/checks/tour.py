"""The tour: one walk through the states a pool goes through in service, at scale.

On every up pool in turn, the pools walked before still full (pools sharing a
disk group then meet each other's volumes): a volume made and resized out of
band, more than 60 volumes (a listing read only to its first page of 50 shows),
several snapshots of a volume (the 4th and later counted would show),
over-subscription, the cap reached by large creates and then by small ones;
then deletes back to where it started. Each state's report is kept with the truth read beside it
(an *observation*), for the report rules and the truth checks to judge; each
create near the cap is kept with the decision the truth demanded (a
*decision*), for the admission checks. Walked once per run, shared by every
check that judges it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from driver_kit import CapacityExceeded, GiB, InvalidInput
from driver_kit.compliance.checks.base import CheckContext, Target, targets
from driver_kit.compliance.checks.expect import Settings, settings_of
from driver_kit.compliance.checks.truth import agrees
from driver_kit.compliance.hooks import BackendTruth

__all__ = ["Decision", "Observation", "Tour", "walk"]

#: snapshots taken of each of two volumes (a 4th counted as provisioned shows)
SNAPSHOTS_PER_VOLUME = 4
#: creates near the cap before the tour gives up reaching it
MAX_FILL_STEPS = 40
#: below this many allocation units of room the cap is reached one unit at a time
SMALL_ROOM_GB = 8


@dataclass(frozen=True, slots=True)
class Observation:
    """One state's report with the truth read right after it."""

    label: str
    report: Any
    truth: BackendTruth | None
    settings: Settings


@dataclass(frozen=True, slots=True)
class Decision:
    """One create near the cap: what the driver did and what the truth demanded."""

    label: str
    admitted: bool
    allowed: bool
    why: str


@dataclass(slots=True)
class Tour:
    """What the walk saw: each state's report and truth, and each decision at a cap."""

    observations: list[Observation] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    #: what the tour could not do, and why
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"{len(self.observations)} states, {len(self.decisions)} decisions at the cap"
        return text + (f" ({'; '.join(self.notes)})" if self.notes else "")


class _Walk:
    """The walk in progress: the driver it drives and what it made, deleted at the end."""

    def __init__(self, ctx: CheckContext, drv: Any, tour: Tour) -> None:
        self.ctx, self.drv, self.tour = ctx, drv, tour
        self.volumes: list[str] = []
        #: the volumes made on the pool being walked
        self.made_here: list[str] = []
        self.snapshots: list[str] = []
        self.oob: list[str] = []

    def observe(self, label: str) -> None:
        """Keep a fresh report with the truth read just before it. A report that does not
        agree with it is kept only once the truth read after it is the same (up to 3
        tries): the backend may have changed meanwhile (a file system others write to)."""
        settings = settings_of(self.drv)
        truth = self.ctx.truth(self.drv)
        for _ in range(3):
            report = self.drv.get_volume_stats(refresh=True)
            if agrees(report, truth, settings):
                break
            before, truth = truth, self.ctx.truth(self.drv)
            if truth == before:
                break
        self.tour.observations.append(Observation(label, report, truth, settings))

    def create(self, size_gb: int, target: Target) -> str:
        name = self.ctx.name("tour")
        self.ctx.track_volume(self.drv, name)
        try:
            self.drv.create_volume(name, size_gb, pool_name=target.pool_name,
                                   extra_specs=target.specs)
        except CapacityExceeded:
            self.ctx.done(("volume", name))  # refused: nothing to delete
            raise
        self.volumes.append(name)
        self.made_here.append(name)
        return name

    # ------------------------------------------------------------ the states
    def scale(self, target: Target, others: list[Target]) -> None:
        self.made_here = []
        unit = self.ctx.unit_gb(self.drv, target)
        pool = self.ctx.truth(self.drv).pool(target.pool_name)
        taken = pool.allocated_bytes(unit * GiB) if pool is not None else unit * GiB
        # each volume takes whole allocation units: 1 GiB may take 1.5 GiB of 768 MiB units
        count = min(self.ctx.scale, self.ctx.room_gb(self.drv, target) * GiB // taken)
        for _ in range(count):
            self.create(unit, target)
        for other in others:  # a thin+thick pool holds both kinds
            if self.ctx.room_gb(self.drv, other) >= unit:
                self.create(unit, other)
        self.observe(f"{target}: {len(self.made_here)} volumes")

    def snapshot_some(self, target: Target) -> None:
        for volume in self.made_here[:2]:
            for _ in range(SNAPSHOTS_PER_VOLUME):
                try:
                    self.snapshots.append(self.ctx.snapshot(self.drv, volume))
                except (NotImplementedError, InvalidInput) as exc:
                    self.tour.notes.append(f"no snapshots on {target}: {exc}")
                    return
                except CapacityExceeded:
                    break
        self.observe(f"{target}: {len(self.snapshots)} snapshots of "
                     f"{min(2, len(self.made_here))} volumes")

    def out_of_band(self, target: Target) -> None:
        if not (self.ctx.hooks.create_out_of_band and self.ctx.hooks.resize_out_of_band):
            return
        unit = self.ctx.unit_gb(self.drv, target)
        name = self.ctx.out_of_band(self.drv, unit, target.pool_name)
        self.oob.append(name)
        self.observe(f"{target}: a {unit} GiB volume made out of band")
        self.ctx.hooks.resize_out_of_band(self.drv, name, 2 * unit)
        self.observe(f"{target}: that volume resized to {2 * unit} GiB out of band")

    def over_subscribe(self, target: Target) -> None:
        expected = self.ctx.expected(self.drv, target)
        unit = self.ctx.unit_gb(self.drv, target)
        need = -(-(int(expected.total_gb - expected.provisioned_gb) + 1) // unit) * unit
        if target.thin and need >= 1 and need <= self.ctx.room_gb(self.drv, target):
            self.create(need, target)
            self.observe(f"{target}: over-subscribed")

    def fill(self, target: Target) -> None:
        last_room, unit = None, self.ctx.unit_gb(self.drv, target)
        for _ in range(MAX_FILL_STEPS):
            truth = self.ctx.truth(self.drv)
            room = self.ctx.room_gb(self.drv, target, truth)
            if last_room is not None and room >= last_room > 0:
                self.tour.notes.append(f"the cap of {target} grows with every create "
                                       f"(max_over_subscription_ratio = auto): not reached")
                break
            last_room = room
            size = max(1, room // 2 // unit) * unit if room >= SMALL_ROOM_GB * unit \
                else unit
            decision = self.ctx.must_admit(self.drv, target, size, truth)
            label = f"a {size} GiB create on {target} with {room} GiB of room"
            try:
                self.create(size, target)
                admitted = True
            except CapacityExceeded:
                admitted = False
            self.tour.decisions.append(Decision(label, admitted, decision.admitted,
                                                decision.explain()))
            if not admitted or not decision.admitted:
                break  # at the cap, or past it
        self.observe(f"{target}: at the cap")

    def delete_all(self) -> None:
        for snap in reversed(self.snapshots):
            self.drv.delete_snapshot(snap)
            self.ctx.done(("snapshot", snap))
        for name in reversed(self.volumes):
            self.ctx.delete(self.drv, name)
        for name in self.oob:
            self.ctx.remove_out_of_band(name)
        self.volumes, self.snapshots, self.oob = [], [], []
        self.observe("after deletes")


def _walk_pool(walker: _Walk, tour: Tour, main: Target, others: list[Target]) -> None:
    try:
        for step in (lambda: walker.out_of_band(main), lambda: walker.scale(main, others),
                     lambda: walker.snapshot_some(main), lambda: walker.over_subscribe(main),
                     lambda: walker.fill(main)):
            step()
    except CapacityExceeded as exc:
        tour.notes.append(f"{main}: a create the truth admits was refused: "
                          f"{str(exc).splitlines()[0]}")
    except Exception as exc:  # judged by the checks that drive each operation
        tour.notes.append(f"{main}: stopped: {type(exc).__name__}: {exc}")


def walk(ctx: CheckContext) -> Tour:
    """Walk every up pool of a fresh driver; a step that fails ends that pool's walk
    (noted), the clean-up still runs."""
    tour = Tour()
    drv = ctx.driver(operations=False)
    if ctx.hooks.read_truth is None:
        tour.notes.append("no read_truth hook: only the first report is judged")
        return tour
    walker = _Walk(ctx, drv, tour)
    walker.observe("start")
    if not callable(getattr(drv, "create_volume", None)):
        tour.notes.append("no operations API: only the first report is judged")
        return tour
    by_pool: dict[str, list[Target]] = {}
    for target in targets(drv):
        by_pool.setdefault(target.pool_name, []).append(target)
    try:
        for pool_targets in by_pool.values():  # each pool still holding the ones before
            _walk_pool(walker, tour, pool_targets[0], pool_targets[1:])
    finally:
        try:
            walker.delete_all()
        except Exception as exc:  # what is left is the runner's clean-up
            tour.notes.append(f"deletes failed: {type(exc).__name__}: {exc}")
    return tour
