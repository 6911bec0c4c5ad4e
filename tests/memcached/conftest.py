# SPDX-License-Identifier: MIT
"""This suite's fixtures: the real memcached of tests/memcached/mcserver.py,
which the other suites (mctop, mcsnoop, mclat, mcload) import by name."""
from mcserver import memcached, memcached_bin  # noqa: F401  (fixtures)
