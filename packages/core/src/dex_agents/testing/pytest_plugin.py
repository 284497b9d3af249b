"""The pytest plugin of ``dex_agents.testing``: one engine and shared Worker children per session.

Installing ``dex-agents`` registers this module with pytest (entry point ``pytest11``), so any
test suite can ask for its fixtures:

- ``dex_engines`` (session): ``SharedEngines``, running local engines by name (``dexcli dev``
  when ``DEXCLI`` is set), each started on first use and stopped when the test session ends,
  each with a ``WorkerPool``: one Worker child per Worker module, directory and environment,
  started once and kept for every later test. Workers of one engine must not serve the same
  Flow type differently (the engine hands a session's Steps to any of them), so suites whose
  Workers differ under one Flow type (the shared scenarios, one per runner) use an engine each.
- ``dex_engine_address`` and ``dex_worker_pool`` (session): the engine named ``default``.
- ``dex_in_process_worker``: serves Flows with an in-process Worker (``InProcessWorker``) for
  this test, on the shared engine named ``in-process`` (started once per session; no Worker
  child serves there, so a test's own Flow objects never meet a pooled child's); every session
  ID it is given carries the test's ``dex_session_prefix``, and the test's sessions are
  terminated when it ends (not when a block ends: a test may serve them again with another
  Worker), so no Step of theirs reaches a later test's Worker of the same Flow type. A test marked ``dex_own_stack`` gets a private engine.
- ``dex_session_prefix``: a prefix of this test's own (``t<12 hex>-``) for its session IDs.
- ``dex_agent_stack``: builds ``AgentTestStack``\\ s for this test, attached to the session engine
  and pool (``stack.shared_worker()``); a test marked ``dex_own_stack`` gets a private engine
  instead, for a test that SIGKILLs a Worker or the engine, or whose assertions need an engine
  no other test touched.

Tests that share the engine are isolated by their session IDs, not by processes: start every
session under ``dex_session_prefix``.

Example:
    >>> async def test_chat(dex_agent_stack, dex_session_prefix):  # doctest: +SKIP
    ...     async with dex_agent_stack([flow], "tests.my_worker") as stack:
    ...         await stack.shared_worker()
    ...         await stack.sessions(flow).start_session(dex_session_prefix + "chat", "hello")
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dex import (
    AsyncClient,
    BlobCacheConfig,
    ClientOptions,
    CodecRegistry,
    Flow,
    FlowNotActiveOrNotFoundError,
    Registry,
    StopFlowOptions,
    StopType,
    open_blob_cache,
)

from dex_agents.testing._agent_test_stack import AgentTestStack, start_test_engine
from dex_agents.testing._engine_process import EngineProcess
from dex_agents.testing._in_process_worker import InProcessWorker, in_process_worker
from dex_agents.testing._pull_worker import BLOB_CACHE_BYTES
from dex_agents.testing._session_prefix import new_session_prefix
from dex_agents.testing._worker_pool import WorkerPool

__all__ = [
    "DEFAULT_ENGINE",
    "IN_PROCESS_ENGINE",
    "OWN_STACK_MARKER",
    "AgentStackFactory",
    "InProcessWorkerFactory",
    "SharedEngines",
]

OWN_STACK_MARKER = "dex_own_stack"
"""The marker of a test that needs an engine and Workers of its own (see the module docstring)."""
DEFAULT_ENGINE = "default"
"""The name of the shared engine a test gets unless it names another."""
IN_PROCESS_ENGINE = "in-process"
"""The name of the shared engine of ``dex_in_process_worker``: only in-process Workers serve it."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{OWN_STACK_MARKER}: dex_agent_stack starts a private engine and Workers for this test "
        "(it kills a Worker or the engine, or needs an engine no other test touched)",
    )


class SharedEngines:
    """Engines shared by the tests of one pytest session (per xdist worker), by name.

    Example:
        >>> address = dex_engines.address("default")  # doctest: +SKIP
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._engines: dict[str, EngineProcess] = {}
        self._pools: dict[str, WorkerPool] = {}

    def address(self, name: str = DEFAULT_ENGINE) -> str:
        """The address of the engine ``name``, started now if it is not running; call it where
        no event loop runs (a synchronous fixture), else ``await started(name)``.

        Raises:
            EngineStartError: The engine did not start.
        """
        if name not in self._engines:
            # Not in a thread of its own: the engine dies with the thread that started it.
            self._engines[name] = asyncio.run(start_test_engine(self._directory / name))
        return self._engines[name].server_address

    async def started(self, name: str = DEFAULT_ENGINE) -> str:
        """The address of the engine ``name``, started now on this event loop if need be.

        Raises:
            EngineStartError: The engine did not start.
        """
        if name not in self._engines:
            self._engines[name] = await start_test_engine(self._directory / name)
        return self._engines[name].server_address

    def pool(self, name: str = DEFAULT_ENGINE) -> WorkerPool:
        """The Worker children on the engine ``name`` (which must have been started).

        Raises:
            KeyError: The engine ``name`` has not been started.
        """
        pool = self._pools.get(name)
        if pool is None:
            address = self._engines[name].server_address
            pool = WorkerPool(address, self._directory / name / "workers")
            self._pools[name] = pool
        return pool

    def close(self) -> None:
        """Kill every pooled Worker and stop every engine."""
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        for engine in self._engines.values():
            asyncio.run(engine.stop())
        self._engines.clear()


@pytest.fixture(scope="session")
def dex_engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedEngines]:
    """The engines shared by this test session (per xdist worker), by name."""
    engines = SharedEngines(tmp_path_factory.mktemp("dex-engines"))
    try:
        yield engines
    finally:
        engines.close()


@pytest.fixture(scope="session")
def dex_engine_address(dex_engines: SharedEngines) -> str:
    """The address of the shared engine named ``default``."""
    return dex_engines.address()


@pytest.fixture(scope="session")
def dex_worker_pool(dex_engines: SharedEngines) -> WorkerPool:
    """Worker children on the ``default`` engine, one per module, directory and environment."""
    return dex_engines.pool()


@pytest.fixture
def dex_session_prefix() -> str:
    """A session-ID prefix of this test's own."""
    return new_session_prefix()


@dataclass(frozen=True)
class _TestStacks:
    # What both factories know: the test's directory, and the shared engines (None: the test
    # is marked dex_own_stack and gets private ones).
    tmp_path: Path
    engines: SharedEngines | None

    @property
    def own_stack(self) -> bool:
        """Whether this test runs on a private engine."""
        return self.engines is None


@dataclass(frozen=True)
class AgentStackFactory(_TestStacks):
    """Builds this test's ``AgentTestStack``\\ s: on the shared engine and Worker pool, or, for a
    test marked ``dex_own_stack``, on an engine of their own (``engine_address`` is ``None``).
    """

    @asynccontextmanager
    async def __call__(
        self,
        flows: Sequence[Flow[Any]],
        worker_module: str,
        *,
        worker_cwd: Path | None = None,
        worker_env: Mapping[str, str] | None = None,
        worker_preload_env: Mapping[str, str] | None = None,
        engine: str = DEFAULT_ENGINE,
        name: str = "stack",
    ) -> AsyncIterator[AgentTestStack]:
        """An entered ``AgentTestStack`` of ``flows`` on the shared engine named ``engine``
        (see ``SharedEngines``), or on a private one for a test marked ``dex_own_stack``;
        ``worker_preload_env`` forks its started Workers from a warm parent (see
        ``AgentTestStack``).

        Raises:
            ConfigurationError: ``flows`` is empty.
            EngineStartError: The engine did not start.
        """
        shared: dict[str, Any] = {}
        if self.engines is not None:
            shared["engine_address"] = await self.engines.started(engine)
            shared["worker_pool"] = self.engines.pool(engine)
        stack = AgentTestStack(
            self.tmp_path / name,
            flows,
            worker_module,
            worker_cwd=worker_cwd,
            worker_env=worker_env,
            worker_preload_env=worker_preload_env,
            **shared,
        )
        async with stack:
            yield stack


@pytest.fixture
def dex_agent_stack(request: pytest.FixtureRequest, tmp_path: Path) -> AgentStackFactory:
    """Builds this test's ``AgentTestStack``\\ s (see ``AgentStackFactory``)."""
    if request.node.get_closest_marker(OWN_STACK_MARKER) is not None:
        return AgentStackFactory(tmp_path, None)
    engines: SharedEngines = request.getfixturevalue("dex_engines")
    return AgentStackFactory(tmp_path, engines)


@dataclass(frozen=True)
class InProcessWorkerFactory(_TestStacks):
    """Starts this test's in-process Workers: on a shared engine, or, for a test marked
    ``dex_own_stack``, on an engine of its own per block (``engines`` is ``None``).

    Every ``InProcessWorker`` it yields prefixes session IDs with ``session_prefix``. The sessions
    a test named on a shared engine are terminated when the test ends (``terminate_sessions``),
    not when a block ends, so a test may serve its sessions again with another Worker.
    """

    session_prefix: str
    _named: dict[str, set[str]] = field(default_factory=dict)

    @asynccontextmanager
    async def __call__(
        self,
        flows: Sequence[Flow[Any]],
        *,
        codecs: CodecRegistry | None = None,
        client_codecs: CodecRegistry | None = None,
        max_concurrent_tasks: int = 8,
        engine: str = IN_PROCESS_ENGINE,
        name: str = "in-process",
    ) -> AsyncIterator[InProcessWorker]:
        """An ``InProcessWorker`` serving ``flows`` (see ``in_process_worker`` for the options)
        on the shared engine named ``engine``, or on a private one for a ``dex_own_stack`` test.

        Raises:
            ConfigurationError: ``flows`` is empty.
            EngineStartError: The engine did not start.
        """
        directory = self.tmp_path / name
        private: EngineProcess | None = None
        if self.engines is None:
            private = await start_test_engine(directory)
            address = private.server_address
        else:
            address = await self.engines.started(engine)
        try:
            async with in_process_worker(
                flows,
                address,
                directory / "cache",
                codecs=codecs,
                client_codecs=client_codecs,
                max_concurrent_tasks=max_concurrent_tasks,
                session_prefix=self.session_prefix,
            ) as dex:
                try:
                    yield dex
                finally:
                    if private is None:
                        self._named.setdefault(address, set()).update(dex.session_ids)
        finally:
            if private is not None:
                await private.stop()

    async def terminate_sessions(self) -> None:
        """Terminate every session this test named on a shared engine: a session left mid-turn
        would otherwise be handed to the next test's Worker of its Flow type."""
        stop = StopFlowOptions(type=StopType.TERMINATE, reason="the test ended")
        for address, session_ids in self._named.items():
            cache = open_blob_cache(
                BlobCacheConfig(str(self.tmp_path / "terminate-cache"), BLOB_CACHE_BYTES)
            )
            # Stopping a Flow needs no registration: a Client of no Flows will do.
            client = AsyncClient(
                Registry([], CodecRegistry(), allow_async_handlers=True),
                cache,
                ClientOptions(server_address=address),
            )
            try:
                for session_id in sorted(session_ids):
                    try:
                        await client.stop_flow(session_id, stop)
                    except FlowNotActiveOrNotFoundError:
                        continue  # already closed, or never started
            finally:
                await client.close()
                cache.close()
        self._named.clear()


@pytest.fixture
def dex_in_process_worker(
    request: pytest.FixtureRequest, tmp_path: Path, dex_session_prefix: str
) -> Iterator[InProcessWorkerFactory]:
    """Starts this test's in-process Workers (see ``InProcessWorkerFactory``)."""
    if request.node.get_closest_marker(OWN_STACK_MARKER) is not None:
        yield InProcessWorkerFactory(tmp_path, None, dex_session_prefix)
        return
    engines: SharedEngines = request.getfixturevalue("dex_engines")
    factory = InProcessWorkerFactory(tmp_path, engines, dex_session_prefix)
    yield factory
    # The test's event loop is closed by now; a synchronous fixture may run one of its own.
    asyncio.run(factory.terminate_sessions())
