"""dm_status: a thin pool's usage from device-mapper ioctls, and lvm2's percent arithmetic.

The ioctl is replaced by a fake kernel that answers DM_TABLE_STATUS in the
kernel's own layout (struct dm_ioctl, then dm_target_spec records and strings),
including DM_BUFFER_FULL_FLAG when the caller's buffer is too small.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import math
import random
import struct

import pytest

from driver_kit.exceptions import InvalidName
from lvm_driver.read import dm_status
from lvm_driver.read.dm_status import (
    DM_TABLE_STATUS, DeviceMapperError, ThinPoolStatus, dm_name, lvs_percent,
    parse_thin_pool_status, thin_pool_status,
)

HEADER = struct.Struct("=3IIIIiIIIQ128s129s7s")
SPEC = struct.Struct("=QQiI16s")
STATUS_TABLE_FLAG, ACTIVE_PRESENT, BUFFER_FULL, NOFLUSH = 1 << 4, 1 << 5, 1 << 8, 1 << 11

EMPTY_POOL_STATUS = "0 13/1024 0/32768 - rw discard_passdown queue_if_no_space - 1024"
POOL_TABLE = "252:0 252:1 128 0 1 skip_block_zeroing"


class FakeKernel:
    """Answers DM_TABLE_STATUS for a few named devices as the kernel lays it out."""

    def __init__(self, devices: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]],
                 *, fail_with: int | None = None, no_active_table: tuple[str, ...] = ()):
        self.devices = devices  # name -> (status targets, table targets)
        self.fail_with = fail_with
        self.no_active_table = no_active_table
        self.calls: list[tuple[str, int, int]] = []  # (name, flags, buffer bytes)

    def __call__(self, fd: int, request: int, buf: bytearray, mutate: bool = True) -> int:
        assert request == DM_TABLE_STATUS and mutate
        fields = list(HEADER.unpack_from(buf, 0))
        assert fields[:3] == [4, 0, 0]
        data_size, flags = fields[3], fields[7]
        assert data_size == len(buf)
        name = fields[11].split(b"\0", 1)[0].decode()
        self.calls.append((name, flags, data_size))
        if self.fail_with is not None:
            raise OSError(self.fail_with, "fake")
        if name not in self.devices:
            raise OSError(errno.ENXIO, "No such device or address")
        status, table = self.devices[name]
        targets = table if flags & STATUS_TABLE_FLAG else status
        out = flags
        data_start = HEADER.size
        body = bytearray()
        if name not in self.no_active_table:
            out |= ACTIVE_PRESENT
            for kind, text in targets:
                record = SPEC.size + len(text) + 1
                padded = (record + 7) // 8 * 8
                spec = SPEC.pack(0, 2048, 0, len(body) + padded, kind.encode())
                body += spec + text.encode() + b"\0" + b"\0" * (padded - record)
        if data_start + len(body) > data_size:
            out |= BUFFER_FULL
            body = bytearray()
        fields[4], fields[5], fields[7] = data_start, len(targets), out
        HEADER.pack_into(buf, 0, *fields)
        buf[data_start:data_start + len(body)] = body
        return 0


@pytest.fixture
def kernel(monkeypatch, tmp_path):
    control = tmp_path / "control"
    control.write_bytes(b"")
    monkeypatch.setattr(dm_status, "CONTROL_PATH", str(control))

    def install(fake: FakeKernel) -> FakeKernel:
        monkeypatch.setattr(dm_status.fcntl, "ioctl", fake)
        return fake
    return install


def pool(status: str = EMPTY_POOL_STATUS, table: str = POOL_TABLE):
    return ([("thin-pool", status)], [("thin-pool", table)])


# ---------------------------------------------------------------------------
# names

def test_dm_names_double_every_dash_as_lvm_does():
    assert dm_name("vg", "pool", "tpool") == "vg-pool-tpool"
    assert dm_name("my-vg", "thin-pool-1") == "my--vg-thin--pool--1"
    assert dm_name("a--b", "c") == "a----b-c"


def test_a_bad_name_is_refused_before_any_ioctl(kernel):
    fake = kernel(FakeKernel({}))
    with pytest.raises(InvalidName):
        thin_pool_status("vg", "bad name")
    with pytest.raises(InvalidName):
        thin_pool_status("-vg", "pool")
    assert fake.calls == []


# ---------------------------------------------------------------------------
# the ioctl path

def test_an_active_pool_is_read_from_its_tpool_layer(kernel):
    fake = kernel(FakeKernel({"my--vg-thin--pool-tpool": pool(
        "7 200/1024 5000/32768 - rw no_discard_passdown error_if_no_space - 1024")}))
    status = thin_pool_status("my-vg", "thin-pool")
    assert status == ThinPoolStatus(7, 200, 1024, 5000, 32768, 128 * 512, "rw", False)
    assert status.data_percent == 15.26
    assert status.metadata_percent == 19.53
    # the status as lvs asks for it (no metadata flush), then the table
    assert fake.calls == [("my--vg-thin--pool-tpool", NOFLUSH, 16384),
                          ("my--vg-thin--pool-tpool", STATUS_TABLE_FLAG, 16384)]


def test_a_pool_without_a_tpool_layer_is_read_under_its_own_name(kernel):
    fake = kernel(FakeKernel({"vg-pool": pool()}))
    status = thin_pool_status("vg", "pool")
    assert (status.used_data_blocks, status.total_data_blocks) == (0, 32768)
    assert status.data_percent == 0.0
    assert [name for name, _, _ in fake.calls] == ["vg-pool-tpool", "vg-pool", "vg-pool"]


def test_an_inactive_pool_is_none(kernel):
    kernel(FakeKernel({"other-lv": pool()}))
    assert thin_pool_status("vg", "pool") is None


def test_a_device_without_an_active_table_is_none(kernel):
    kernel(FakeKernel({"vg-pool-tpool": pool()}, no_active_table=("vg-pool-tpool",)))
    assert thin_pool_status("vg", "pool") is None


def test_a_pool_name_holding_another_target_is_an_error(kernel):
    kernel(FakeKernel({"vg-pool": ([("linear", "")], [("linear", "7:0 2048")])}))
    with pytest.raises(DeviceMapperError, match="vg-pool is linear, not one thin-pool target"):
        thin_pool_status("vg", "pool")


def test_a_full_buffer_is_retried_bigger(kernel):
    long_flags = " ".join(["rw"] + ["x" * 1000] * 20)  # a 20 KiB status line
    fake = kernel(FakeKernel({"vg-pool-tpool": pool(f"3 1/10 2/20 - {long_flags}")}))
    status = thin_pool_status("vg", "pool")
    assert (status.transaction_id, status.used_data_blocks) == (3, 2)
    assert [size for _, _, size in fake.calls] == [16384, 65536, 16384]


@pytest.mark.parametrize("code", [errno.EACCES, errno.EINVAL, errno.EIO])
def test_other_ioctl_errors_raise(kernel, code):
    kernel(FakeKernel({}, fail_with=code))
    with pytest.raises(DeviceMapperError) as info:
        thin_pool_status("vg", "pool")
    assert info.value.errno == code
    assert "DM_TABLE_STATUS of vg-pool-tpool" in str(info.value)


def test_no_control_node_raises(monkeypatch, tmp_path):
    monkeypatch.setattr(dm_status, "CONTROL_PATH", str(tmp_path / "missing"))
    with pytest.raises(DeviceMapperError, match="cannot open") as info:
        thin_pool_status("vg", "pool")
    assert info.value.errno == errno.ENOENT


def test_a_garbled_table_raises(kernel):
    kernel(FakeKernel({"vg-pool-tpool": pool(table="252:0")}))
    with pytest.raises(DeviceMapperError, match="unexpected thin-pool table line"):
        thin_pool_status("vg", "pool")


# ---------------------------------------------------------------------------
# the status line

@pytest.mark.parametrize("params, mode, needs_check", [
    ("1 10/100 20/200 - rw discard_passdown queue_if_no_space - 1024", "rw", False),
    ("1 10/100 20/200 - ro discard_passdown queue_if_no_space needs_check 1024", "ro", True),
    ("1 10/100 200/200 - out_of_data_space discard_passdown error_if_no_space - 1024",
     "out_of_data_space", False),
    ("1 10/100 20/200 -", "rw", False),  # older kernels print fewer words
])
def test_status_modes(params, mode, needs_check):
    status = parse_thin_pool_status(params, data_block_bytes=65536)
    assert (status.mode, status.needs_check) == (mode, needs_check)
    assert (status.used_metadata_blocks, status.total_data_blocks) == (10, 200)


@pytest.mark.parametrize("params", ["Fail", "Error"])
def test_a_failed_pool_has_no_percentages(params):
    status = parse_thin_pool_status(params, data_block_bytes=65536)
    assert status.mode == "Fail"
    assert math.isnan(status.data_percent) and math.isnan(status.metadata_percent)


@pytest.mark.parametrize("params", ["", "x 1/2 3/4", "1 1/2", "1 12 3/4 -"])
def test_a_garbled_status_line_raises(params):
    with pytest.raises(DeviceMapperError):
        parse_thin_pool_status(params, data_block_bytes=65536)


# ---------------------------------------------------------------------------
# lvm2's percent as lvs prints it

@pytest.mark.parametrize("used, total, printed", [
    (0, 100, 0.0), (100, 100, 100.0), (0, 0, 100.0),  # lvm2 calls an empty total full
    (1, 10 ** 9, 0.01), (10 ** 9 - 1, 10 ** 9, 99.99),  # never 0 or 100 unless exact
    (1, 3, 33.33), (2, 3, 66.67),
    (366514, 1353699, 27.08),  # single-precision steps: a plain round() says 27.07
    (4824771, 6143466, 78.54),  # and 78.53 here
])
def test_lvs_percent(used, total, printed):
    assert lvs_percent(used, total) == printed


def _libdevmapper():
    name = ctypes.util.find_library("devmapper") or "libdevmapper.so.1.02.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    lib.dm_make_percent.restype = ctypes.c_int32
    lib.dm_make_percent.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.dm_percent_to_round_float.restype = ctypes.c_float
    lib.dm_percent_to_round_float.argtypes = [ctypes.c_int32, ctypes.c_uint]
    return lib


def test_lvs_percent_matches_libdevmapper():
    lib = _libdevmapper()
    if lib is None:
        pytest.skip("libdevmapper is not installed")
    rng = random.Random(14)
    for _ in range(20000):
        total = rng.choice([rng.randint(1, 100), rng.randint(1, 10 ** 7), rng.randint(1, 2 ** 40)])
        used = rng.randint(0, total)
        printed = float("%.2f" % lib.dm_percent_to_round_float(lib.dm_make_percent(used, total), 2))
        assert lvs_percent(used, total) == printed, (used, total)
