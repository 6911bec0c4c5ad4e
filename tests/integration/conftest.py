"""Fixtures for the integration tests (helpers live in xp.py)."""
import os

import pytest

from .xp import XPROBES, Procs


def pytest_sessionstart(session):
    if not os.access(XPROBES, os.X_OK):
        raise pytest.UsageError(f"{XPROBES} is missing: run `make integration`")


@pytest.fixture
def procs():
    """Starts processes; kills and reaps every one of them afterwards."""
    ps = Procs()
    try:
        yield ps
    finally:
        ps.cleanup()
