"""Session-wide hooks of the test suite: the command recorder (tests/command_recorder.py)."""

from tests.command_recorder import (pytest_collection_modifyitems,  # noqa: F401
                                    pytest_configure, pytest_runtest_setup)
