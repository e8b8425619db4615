"""Session-wide hooks of the test suite: the rootwrap recorder (tests/rootwrap_recorder.py)."""

from tests.rootwrap_recorder import (pytest_collection_modifyitems,  # noqa: F401
                                     pytest_configure, pytest_runtest_setup)
