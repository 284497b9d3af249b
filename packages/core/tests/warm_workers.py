"""Test children forked from a warm parent (``dex_agents.testing``'s fork servers)."""

from __future__ import annotations

import os

from dex_agents.testing import WorkerProcess
from dex_agents.testing._fork_server import FORK_SERVER_ENV, ForkedProcess


def fork_servers_off() -> bool:
    """Whether fork servers are off (``DEX_AGENTS_TEST_FORK_SERVER=0``): nothing forks then."""
    return os.environ.get(FORK_SERVER_ENV, "1") == "0"


def forked_from_a_warm_parent(worker: WorkerProcess) -> bool:
    """Whether ``worker`` was forked from its module's fork server, as asked; true as well when
    fork servers are off, since nothing forks then."""
    return fork_servers_off() or isinstance(worker.process, ForkedProcess)
