"""Undo what the deliberately broken drivers leave behind, after every test."""

import threading

import pytest

from tests.compliance import drivers


@pytest.fixture(autouse=True)
def _reap_broken_drivers():
    drivers.RELEASE.clear()
    yield
    drivers.RELEASE.set()  # let hung checks finish (they raise once released)
    for thread in threading.enumerate():
        if thread.name.startswith("driver-kit-"):
            thread.join(10)
    while drivers.LEAKED_FILES:
        drivers.LEAKED_FILES.pop().close()
    while drivers.LEAKED_CHILDREN:
        child = drivers.LEAKED_CHILDREN.pop()
        child.kill()
        child.wait()
