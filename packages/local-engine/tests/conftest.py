"""Fixtures every local-engine test can use (helpers live in ``engine_test_support``).

- ``gates``: a :class:`GateBoard` for this test (Workers started by ``workers`` see it).
- ``invocation_log``: an :class:`InvocationLog` for this test (same).
- ``workers``: a :class:`WorkerLauncher`; ``await workers.start(registry_spec, address)`` starts an
  SDK pull Worker process. Leftover Workers are SIGKILLed after the test.
- ``pull_server``: a started :class:`PullTestServer` (real pull dispatcher + TEST STUB
  FlowService) on the test's event loop.
- ``engine``: an :class:`EngineProcess` on a fresh database, started; SIGKILLed after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from engine_test_support import (
    EngineProcess,
    GateBoard,
    InvocationLog,
    PullTestServer,
    WorkerLauncher,
)


@pytest.fixture
def gates(tmp_path: Path) -> GateBoard:
    return GateBoard(tmp_path / "gates")


@pytest.fixture
def invocation_log(tmp_path: Path) -> InvocationLog:
    return InvocationLog(tmp_path / "invocations.jsonl")


@pytest.fixture
def workers(
    tmp_path: Path, gates: GateBoard, invocation_log: InvocationLog
) -> Iterator[WorkerLauncher]:
    launcher = WorkerLauncher(tmp_path / "workers", {**gates.env(), **invocation_log.env()})
    try:
        yield launcher
    finally:
        launcher.close()


@pytest.fixture
async def pull_server() -> AsyncIterator[PullTestServer]:
    async with PullTestServer() as server:
        yield server


@pytest.fixture
def engine(
    tmp_path: Path, gates: GateBoard, invocation_log: InvocationLog
) -> Iterator[EngineProcess]:
    process = EngineProcess(
        tmp_path / "engine.db",
        tmp_path / "engine-logs",
        env={**gates.env(), **invocation_log.env()},
    )
    process.start()
    try:
        yield process
    finally:
        process.kill()
