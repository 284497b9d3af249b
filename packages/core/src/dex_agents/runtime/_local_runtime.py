"""``LocalRuntime``: an engine, an in-process Worker and session clients for scripts and notebooks.

Without an engine address the runtime serves the embedded engine on ``<directory>/engine.db``:
it reuses the engine another runtime already runs there (the address file it left, checked
against the database lock the engine holds), or starts one. The runtime that started the engine
stops it when it closes, and the engine dies with that process in any case, so nothing is left
behind after Ctrl+C or a kill. Sessions live on in the database: the next runtime on the
directory continues them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from dex import AsyncClient, CodecRegistry, Flow

from dex_agents._owned_directories import process_alive
from dex_agents._session.client import AgentSessionClient
from dex_agents._session.flow import AgentSessionFlow
from dex_agents._worker_gc import freeze_worker_startup_objects
from dex_agents.exceptions import ConfigurationError, DexAgentsError
from dex_agents.testing._engine_process import EngineLogs, EngineProcess, EngineStartError
from dex_agents.testing._in_process_worker import InProcessWorker, in_process_worker

__all__ = [
    "DEFAULT_RUNTIME_DIRECTORY",
    "ENGINE_ADDRESS_FILE",
    "LocalRuntime",
    "LocalRuntimeError",
]

DEFAULT_RUNTIME_DIRECTORY: Final = Path(".dex-agents")
"""Where a runtime keeps the engine database, its logs and the blob cache by default."""

ENGINE_ADDRESS_FILE: Final = "engine.address.json"
"""The file in the directory that names the running engine's address and process."""

_DATABASE_NAME: Final = "engine.db"
_STARTUP_LOCK_NAME: Final = "runtime.lock"


class LocalRuntimeError(DexAgentsError, RuntimeError):
    """The runtime could not start: the engine or the Worker did not come up."""


@dataclass(frozen=True)
class _RunningEngine:
    address: str
    process: EngineProcess | None  # None when another process runs it


class LocalRuntime:
    """Serve ``flows`` in this process and hand out their session clients.

    Use it as an async context manager, or call :meth:`start` and :meth:`close` (in a notebook,
    where one cell starts it and a later one closes it). Without ``server_address`` it runs the
    embedded engine on ``directory`` (reusing one already running there); with it, it connects to
    that engine (a local engine or Dex Server) and starts none. A pull Worker serves the flows in
    this process; leaving the block (Ctrl+C included) stops it, letting running Steps finish for
    ``stop_drain_timeout``, then stops the engine it started.

    Args:
        flows: The Flows to serve; at least one.
        server_address: An engine's ``host:port``; ``None`` runs the embedded one.
        directory: The engine database, its logs and the blob cache.
        max_concurrent_tasks: The Worker's task slots.
        stop_drain_timeout: How long closing lets running Steps finish.
        codecs: The Worker's and the Client's codecs; ``None`` uses ``agent_codec_registry()``.

    Raises:
        ConfigurationError: ``flows`` is empty or ``max_concurrent_tasks`` is below 1.

    Example:
        >>> import asyncio
        >>> async def ask() -> str | None:
        ...     async with LocalRuntime([flow], directory=tmp_path / "runtime") as runtime:
        ...         result = await runtime.sessions().run_turn("runtime-example", "Hi")
        ...         return result.text
        >>> asyncio.run(ask())
        'Hello'
    """

    def __init__(
        self,
        flows: Sequence[Flow[Any]],
        *,
        server_address: str | None = None,
        directory: Path | str = DEFAULT_RUNTIME_DIRECTORY,
        max_concurrent_tasks: int = 8,
        stop_drain_timeout: timedelta = timedelta(seconds=5),
        codecs: CodecRegistry | None = None,
    ) -> None:
        if not flows:
            raise ConfigurationError("LocalRuntime needs at least one Flow to serve")
        if max_concurrent_tasks < 1:
            raise ConfigurationError(
                f"max_concurrent_tasks must be at least 1, got {max_concurrent_tasks}"
            )
        self._flows = tuple(flows)
        self._server_address = server_address
        self._directory = Path(directory)
        self._max_concurrent_tasks = max_concurrent_tasks
        self._stop_drain_timeout = stop_drain_timeout
        self._codecs = codecs
        self._exit_stack: AsyncExitStack | None = None
        self._dex: InProcessWorker | None = None
        self._engine: _RunningEngine | None = None

    @property
    def server_address(self) -> str:
        """The engine's address.

        Raises:
            LocalRuntimeError: The runtime is not running.
        """
        return self._running()[1].address

    @property
    def started_engine(self) -> bool:
        """Whether this runtime started the engine (and stops it when it closes).

        Raises:
            LocalRuntimeError: The runtime is not running.
        """
        return self._running()[1].process is not None

    @property
    def client(self) -> AsyncClient:
        """The ``AsyncClient`` of the served Flows, for the SDK's own calls.

        Raises:
            LocalRuntimeError: The runtime is not running.
        """
        return self._running()[0].client

    def sessions(self, flow: AgentSessionFlow | None = None) -> AgentSessionClient:
        """A session client of ``flow``, or of the only session Flow served.

        Raises:
            LocalRuntimeError: The runtime is not running.
            ConfigurationError: ``flow`` is not served, or it is ``None`` and the runtime does not
                serve exactly one session Flow.
        """
        dex, _ = self._running()
        if flow is None:
            session_flows = [f for f in self._flows if isinstance(f, AgentSessionFlow)]
            if len(session_flows) != 1:
                raise ConfigurationError(
                    f"the runtime serves {len(session_flows)} session Flows; name one: "
                    "runtime.sessions(flow)"
                )
            flow = session_flows[0]
        elif not any(f is flow for f in self._flows):
            raise ConfigurationError(
                f"the runtime does not serve Flow type {flow.get_flow_type()}; pass it in flows"
            )
        return dex.sessions(flow)

    async def start(self) -> LocalRuntime:
        """Start (or reuse) the engine and the Worker; returns this runtime.

        Raises:
            LocalRuntimeError: The engine did not start, another engine holds the directory's
                database without an address to reuse, or the Worker did not register.
        """
        if self._exit_stack is not None:
            raise LocalRuntimeError("the runtime is already running")
        stack = AsyncExitStack()
        try:
            engine = await self._open_engine(stack)
            try:
                dex = await stack.enter_async_context(
                    in_process_worker(
                        self._flows,
                        engine.address,
                        self._directory / "blob-cache",
                        max_concurrent_tasks=self._max_concurrent_tasks,
                        stop_drain_timeout=self._stop_drain_timeout,
                        codecs=self._codecs,
                    )
                )
            except Exception as failure:  # the SDK reports an unreachable server as RuntimeError
                raise LocalRuntimeError(
                    f"the Worker did not register with the engine at {engine.address}: {failure}"
                ) from failure
        except BaseException:
            await stack.aclose()
            raise
        self._exit_stack, self._dex, self._engine = stack, dex, engine
        freeze_worker_startup_objects()
        return self

    async def close(self) -> None:
        """Stop the Worker (running Steps get ``stop_drain_timeout``), then the engine it started.

        Closing a runtime that is not running does nothing.
        """
        stack, self._exit_stack, self._dex, self._engine = self._exit_stack, None, None, None
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> LocalRuntime:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def _running(self) -> tuple[InProcessWorker, _RunningEngine]:
        if self._dex is None or self._engine is None:
            raise LocalRuntimeError("the runtime is not running: use async with, or start()")
        return self._dex, self._engine

    async def _open_engine(self, stack: AsyncExitStack) -> _RunningEngine:
        if self._server_address is not None:
            return _RunningEngine(self._server_address, None)
        self._directory.mkdir(parents=True, exist_ok=True)
        with _startup_lock(self._directory):
            address = _reusable_engine_address(self._directory)
            if address is not None:
                return _RunningEngine(address, None)
            process = await _start_engine(self._directory)
        address_file = self._directory / ENGINE_ADDRESS_FILE
        stack.push_async_callback(process.stop)
        stack.callback(_remove_address_file, address_file, process.process.pid)
        _write_address_file(address_file, process.server_address, process.process.pid)
        return _RunningEngine(process.server_address, process)


@contextlib.contextmanager
def _startup_lock(directory: Path) -> Iterator[None]:
    """Two runtimes starting on one directory at once: the second waits, then reuses."""
    with (directory / _STARTUP_LOCK_NAME).open("a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        yield


def _reusable_engine_address(directory: Path) -> str | None:
    """The address an engine running on the directory's database left, or ``None``."""
    try:
        recorded = json.loads((directory / ENGINE_ADDRESS_FILE).read_text())
        address, pid = str(recorded["address"]), int(recorded["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not process_alive(pid) or not _database_locked(directory / _DATABASE_NAME):
        return None
    return address


def _database_locked(database: Path) -> bool:
    """Whether an engine holds the database's lock file (``<database>.lock``)."""
    lock = database.with_name(database.name + ".lock")
    try:
        descriptor = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(descriptor)  # closing also releases a lock this probe took
    return False


async def _start_engine(directory: Path) -> EngineProcess:
    logs = EngineLogs.in_directory(directory, "engine")
    try:
        return await EngineProcess.start_local(directory / _DATABASE_NAME, logs)
    except EngineStartError as failure:
        hint = (
            " Another engine serves this database without an address this runtime can reuse: "
            "stop it, pass its address as server_address, or use another directory."
            if "holds the lock file" in str(failure)
            else ""
        )
        raise LocalRuntimeError(
            f"could not start the local engine on {directory / _DATABASE_NAME}: {failure}.{hint} "
            f"The engine log is {logs.stderr}."
        ) from failure


def _write_address_file(path: Path, address: str, pid: int) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"address": address, "pid": pid}))
    temporary.replace(path)


def _remove_address_file(path: Path, pid: int) -> None:
    """Remove the file unless a later engine (another pid) wrote it since."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        if int(json.loads(path.read_text())["pid"]) == pid:
            path.unlink()
