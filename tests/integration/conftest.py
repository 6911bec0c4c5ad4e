# SPDX-License-Identifier: MIT
"""Fixtures for the integration tests (helpers live in xp.py)."""
import os
import shutil
import tempfile

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


@pytest.fixture(scope="module")
def public_xprobes():
    """The tool where uid 65534 can surely execute it."""
    d = tempfile.mkdtemp(prefix="xprobes-it-")
    try:
        os.chmod(d, 0o755)
        path = os.path.join(d, "xprobes")
        shutil.copy(XPROBES, path)
        os.chmod(path, 0o755)
        yield path
    finally:
        shutil.rmtree(d)


@pytest.fixture
def rundir():
    """A run directory of the test's own (XPROBES_RUNDIR), world-writable
    and sticky like /tmp, so that nothing a test does touches the real
    /tmp/.xprobes-* of other tests and users.  List it before `procs` in a
    test's arguments, so that its processes go first."""
    d = tempfile.mkdtemp(prefix="xp-run-")
    os.chmod(d, 0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d)
