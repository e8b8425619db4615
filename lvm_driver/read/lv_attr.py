"""``LVAttr``: the 10 characters of an LV's ``lv_attr`` decoded once into a typed record
(re-exported by ``lvm_driver.read.report``)."""

from __future__ import annotations

from dataclasses import dataclass

from lvm_driver.run.executor import LVMOutputError

__all__ = ["LVAttr"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LVAttr:
    """The 10 characters of ``lv_attr`` decoded once (see lvs(8))."""

    raw: str
    volume_type: str        # t thin pool, V thin volume, - plain, s COW snapshot, o origin
    permissions: str        # w writeable, r read-only, R read-only activation
    allocation_policy: str  # i inherited, n normal, c contiguous, l cling, a anywhere
    fixed_minor: bool
    state: str              # a active, - inactive, X unknown, s suspended, ...
    device_open: bool | None  # None when LVM cannot tell (X)
    target_type: str        # t thin, - none, s snapshot, m mirror, r raid, ...
    zero: bool              # newly-allocated blocks are zeroed
    health: str             # - ok, p partial, F failed, D out of data, M md read-only
    skip_activation: bool   # k: skipped by normal activation (thin snapshots)

    @classmethod
    def parse(cls, raw: str) -> LVAttr:
        """Decode an ``lv_attr`` string; LVMOutputError unless it has 10 chars."""
        if not isinstance(raw, str) or len(raw) != 10:
            raise LVMOutputError(f"lv_attr must be 10 characters, got {raw!r}")
        open_char = raw[5]
        return cls(
            raw=raw, volume_type=raw[0], permissions=raw[1],
            allocation_policy=raw[2], fixed_minor=raw[3] == "m", state=raw[4],
            device_open=None if open_char == "X" else open_char == "o",
            target_type=raw[6], zero=raw[7] == "z", health=raw[8],
            skip_activation=raw[9] == "k")

    @property
    def is_thin_pool(self) -> bool:
        return self.volume_type == "t"

    @property
    def is_thin_volume(self) -> bool:
        """A thin LV by its segment type (target ``t``), whether or not it is also the
        origin of a COW snapshot (volume type ``o``, ``O`` merging) or plain ``V``."""
        return self.target_type == "t" and self.volume_type != "t"

    @property
    def is_cow_snapshot(self) -> bool:
        """An old-style (COW) snapshot: its own extents store the origin's old blocks."""
        return self.volume_type in "sS" and self.target_type == "s"

    @property
    def is_active(self) -> bool:
        return self.state == "a"

    @property
    def is_state_known(self) -> bool:
        """False when LVM could not ask the kernel (e.g. activation disabled)."""
        return self.state != "X"

    @property
    def is_writable(self) -> bool:
        return self.permissions == "w"

    @property
    def is_partial(self) -> bool:
        return self.health == "p"

    @property
    def is_healthy(self) -> bool:
        """No health flag: not partial, failed, out of space or read-only."""
        return self.health == "-"
