"""Building and running the engine's grpc.aio server.

One asyncio event loop serves FlowService and WorkerTaskService and runs the scheduler, so the
scheduler's state needs no locks.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

from dex_local_engine.database_lock import DatabaseLock
from dex_local_engine.dispatch import Dispatcher
from dex_local_engine.engine import DEFAULT_WORKER_ADDRESS, Engine
from dex_local_engine.event_loop import freeze_startup_objects
from dex_local_engine.exceptions import DexLocalEngineError
from dex_local_engine.flow_runs import DEFAULT_CLOSED_RUN_CACHE
from dex_local_engine.flow_service import FlowService
from dex_local_engine.flow_state import FlowRun
from dex_local_engine.listening_dispatch import ListeningDispatcher
from dex_local_engine.pull_dispatch import PullDispatcher
from dex_local_engine.request_checks import refuse_bad_request
from dex_local_engine.request_decoding import add_decoding_servicer
from dex_local_engine.step_dispatch_order import DEFAULT_MAX_OVERTAKE_SECONDS
from dex_local_engine.store import Durability, Store
from dex_local_engine.streams import StreamStore, StreamStoreBackend

__all__ = ["MAX_MESSAGE_BYTES", "AddressInUseError", "EngineServer", "ServerConfig", "serve"]

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest gRPC message the engine sends or accepts (gRPC's default is 4 MiB)."""

_NO_CAPACITY_RETRY_SECONDS = 0.25
"""The longest a task avoids a Worker stream that declined it for lack of capacity.

Retries start at 2 ms and double: an SDK pull stream declines a task that arrives between its
final frame and the end of its own bookkeeping, so the first retries come quickly and keep
back-to-back Steps from stalling. A Worker whose slots are all busy declines on every idle
stream until one of its busy streams finishes a task (that stream then takes the task at once);
each offer writes the attempt's in-flight marker and each decline removes it, so the retries of
such a Worker slow down to this interval instead of writing the database hundreds of times a
second."""

_log = logging.getLogger(__name__)


class AddressInUseError(DexLocalEngineError):
    """The listen address cannot be bound (busy port or bad host)."""


@dataclass(frozen=True)
class ServerConfig:
    """What ``dex-local-engine serve`` was asked for."""

    address: str
    database: Path
    durability: Durability = Durability.PROCESS_CRASH_SAFE
    default_worker_address: str = DEFAULT_WORKER_ADDRESS
    """The listening Worker of Flows started without a worker target."""
    closed_run_cache: int = DEFAULT_CLOSED_RUN_CACHE
    """Closed runs kept in memory after they closed or were read (0: none)."""
    stream_store: StreamStoreBackend = StreamStoreBackend.MEMORY
    """Where Stream messages live; ``DISABLED`` keeps none, like Dex's disabled Stream Store."""
    max_overtake_seconds: float = DEFAULT_MAX_OVERTAKE_SECONDS
    """Steps waiting for a free pull Worker slot go oldest work first, but never before a Step
    that started waiting more than this earlier (see :mod:`dex_local_engine.step_dispatch_order`)."""


class _DispatcherRouter:
    """Pull Workers through the PullDispatcher; listening Workers through E2's dispatcher."""

    def __init__(self, pull: PullDispatcher) -> None:
        self._pull = pull
        self._listening: ListeningDispatcher | None = None

    def __call__(self, listening_address: str | None) -> Dispatcher:
        if listening_address is None:
            return self._pull
        if self._listening is None:
            self._listening = ListeningDispatcher()
        return self._listening

    async def close(self) -> None:
        """Close the listening dispatcher's channels, if one was made."""
        if self._listening is not None:
            await self._listening.close()


class EngineServer:
    """A started engine: database, scheduler and gRPC server.

    Example::

        server = await EngineServer.start(ServerConfig("127.0.0.1:0", Path("e.db")))
        print(server.port)
        await server.stop()

    Raises:
        StoreError: the database is unusable.
        AddressInUseError: the address cannot be bound.
    """

    def __init__(
        self,
        server: grpc.aio.Server,
        engine: Engine,
        store: Store,
        pull: PullDispatcher,
        router: _DispatcherRouter,
        port: int,
        lock: DatabaseLock,
    ) -> None:
        self._lock = lock
        self._router = router
        self._server = server
        self.engine = engine
        self._store = store
        self._pull = pull
        self.port = port

    @classmethod
    async def start(cls, config: ServerConfig) -> EngineServer:
        """Lock and open the database, recover Flows, bind and start serving."""
        lock = DatabaseLock.acquire(config.database)
        try:
            return await cls._start_locked(config, lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    async def _start_locked(cls, config: ServerConfig, lock: DatabaseLock) -> EngineServer:
        store = Store.open(config.database, config.durability)
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        try:
            port = server.add_insecure_port(config.address)
        except RuntimeError as error:
            store.close()
            raise AddressInUseError(f"cannot listen on {config.address}: {error}") from error
        if port == 0:
            store.close()
            raise AddressInUseError(f"cannot listen on {config.address}: address in use or invalid")
        pull = PullDispatcher(
            no_capacity_retry_seconds=_NO_CAPACITY_RETRY_SECONDS,
            max_overtake_seconds=config.max_overtake_seconds,
        )
        streams = StreamStore(backend=config.stream_store)

        def write_stream(run: FlowRun, step_execution_id: str, frame: pb.StepStreamWrite) -> None:
            streams.write_from_step(run.flow_type, run.flow_id, step_execution_id, frame)

        router = _DispatcherRouter(pull)
        engine = Engine(
            store, router, write_stream, config.default_worker_address, config.closed_run_cache
        )
        await engine.recover()
        add_decoding_servicer(
            dex_pb2_grpc.add_FlowServiceServicer_to_server,
            FlowService(engine, streams),
            server,
            refuse_bad_request,
        )
        add_decoding_servicer(dex_pb2_grpc.add_WorkerTaskServiceServicer_to_server, pull, server)
        await server.start()
        return cls(server, engine, store, pull, router, port, lock)

    async def wait(self) -> None:
        """Serve until the server stops."""
        await self._server.wait_for_termination()

    async def stop(self, grace: float = 1.0) -> None:
        """Stop serving, stop the scheduler and close the database."""
        self._pull.reconnect_all("dex-local-engine is shutting down")
        await self.engine.shutdown()
        await self._server.stop(grace)
        await self._router.close()
        self._store.close()
        self._lock.release()


async def serve(config: ServerConfig, ready: asyncio.Event | None = None) -> None:
    """Run the engine until SIGTERM or SIGINT; prints the ready line when serving.

    Raises:
        StoreError: the database is unusable.
        AddressInUseError: the address cannot be bound.
    """
    server = await EngineServer.start(config)
    freeze_startup_objects()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before the ready line: a supervisor may signal the engine as soon as it reads it.
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    host = config.address.rsplit(":", 1)[0]
    print(f"dex-local-engine ready on {host}:{server.port}", flush=True)
    if ready is not None:
        ready.set()
    await stop.wait()
    await server.stop()
