"""Private harness of the kernel tests: an engine process on a temp database, SDK clients/Workers.

The engine runs as a real ``dex-local-engine serve`` child process so tests can SIGKILL and
restart it; Workers run in the test's event loop as real SDK ``AsyncWorker`` pull Workers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dex
import grpc
from dex.blob_cache import BlobCacheConfig, open_blob_cache
from dex.dexpb import dex_pb2_grpc
from dex.worker_options import PullWorkerOptions, WorkerOptions, WorkerTarget
from google.protobuf import empty_pb2

__all__ = [
    "EngineProcess",
    "reachable",
    "running_engine",
    "sdk_client",
    "sdk_worker",
    "serve_once",
    "serving",
    "serving_client",
]


@dataclass
class EngineProcess:
    """A ``dex-local-engine serve`` child process bound to a free port."""

    database: Path
    extra_args: tuple[str, ...] = ()
    process: subprocess.Popen[str] | None = None
    address: str = ""
    port: int = 0
    log: list[str] = field(default_factory=list)

    def start(self) -> None:
        """Start (or restart on the same database and, when known, the same port)."""
        port = self.port
        log = open(self.database.with_suffix(".log"), "a")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(
            _serve_command(f"127.0.0.1:{port}", self.database, *self.extra_args),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        log.close()
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("dex-local-engine ready on "):
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"engine did not start: {line!r} {self.stderr()}")
        self.address = line.rsplit(" ", 1)[1]
        self.port = int(self.address.rsplit(":", 1)[1])

    def stderr(self) -> str:
        """What the engine wrote to stderr so far."""
        path = self.database.with_suffix(".log")
        return path.read_text() if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the engine (no shutdown work runs)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Signal the engine to stop (SIGTERM by default) and return its exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def serve_once(
    database: Path, address: str = "127.0.0.1:0", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``dex-local-engine serve`` where it is expected to refuse to start; its outcome.

    Example::

        refused = serve_once(tmp_path / "engine.db", "127.0.0.1:99999")
        assert refused.returncode == 1
    """
    return subprocess.run(
        _serve_command(address, database),
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def _serve_command(address: str, database: Path, *extra_args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "dex_local_engine.cli",
        "serve",
        "--address",
        address,
        "--database",
        str(database),
        *extra_args,
    ]


@asynccontextmanager
async def running_engine(*extra_args: str) -> AsyncIterator[EngineProcess]:
    """An engine process on a fresh temp database (``extra_args`` go to ``serve``)."""
    with tempfile.TemporaryDirectory() as directory:
        engine = EngineProcess(Path(directory) / "engine.db", tuple(extra_args))
        engine.start()
        try:
            yield engine
        finally:
            engine.stop()


@contextmanager
def _cache() -> Iterator[dex.BlobCache]:
    """A blob cache in a temp directory, removed afterwards (each test's client and Worker made
    one; left behind, a suite run left about 180 of them)."""
    with tempfile.TemporaryDirectory(prefix="dex-cache-") as directory:
        cache = open_blob_cache(BlobCacheConfig(directory, 64 * 1024 * 1024))
        try:
            yield cache
        finally:
            cache.close()


@asynccontextmanager
async def sdk_client(
    engine: EngineProcess, flows: list[dex.Flow]
) -> AsyncIterator[dex.AsyncClient]:  # type: ignore[type-arg]
    """A real SDK AsyncClient targeting pull Workers."""
    registry = dex.Registry(flows, allow_async_handlers=True)
    with _cache() as cache:
        client = dex.AsyncClient(
            registry,
            cache,
            dex.ClientOptions(server_address=engine.address, worker_target=WorkerTarget(pull=True)),
        )
        try:
            yield client
        finally:
            await client.close()


@asynccontextmanager
async def sdk_worker(
    engine: EngineProcess, flows: list[dex.Flow], task_slots: int = 8
) -> AsyncIterator[dex.AsyncWorker]:  # type: ignore[type-arg]
    """A real SDK AsyncWorker polling the engine (pull mode) with ``task_slots`` task slots."""
    # The Worker's start fails at once if its first call meets the connection a killed engine
    # left in gRPC's per-process pool, still in reconnect backoff; wait until it is serving.
    await _serving(engine.address)
    registry = dex.Registry(flows, allow_async_handlers=True)
    with _cache() as cache:
        worker = dex.AsyncWorker(
            registry,
            cache,
            WorkerOptions(
                server_address=engine.address,
                pull=PullWorkerOptions(
                    max_concurrent_tasks=task_slots, stop_drain_timeout=_seconds(2)
                ),
            ),
        )
        serving = asyncio.create_task(worker.start())
        try:
            await worker.wait_pull_registered(timeout=30)
            yield worker
        finally:
            await worker.stop()
            await asyncio.gather(serving, return_exceptions=True)


@asynccontextmanager
async def serving(
    flows: Sequence[dex.Flow[Any]],
    *engine_args: str,
) -> AsyncIterator[tuple[EngineProcess, dex.AsyncClient]]:
    """A fresh engine with one SDK Worker and one AsyncClient for ``flows``: ``(engine, client)``.

    ``engine_args`` go to ``serve``. Example::

        async with serving([flow]) as (engine, client):
            await client.start_flow(flow, "id", "input")
    """
    async with (
        running_engine(*engine_args) as engine,
        sdk_worker(engine, list(flows)),
        sdk_client(engine, list(flows)) as client,
    ):
        yield engine, client


@asynccontextmanager
async def serving_client(
    flows: Sequence[dex.Flow[Any]],
    *engine_args: str,
) -> AsyncIterator[dex.AsyncClient]:
    """The client of :func:`serving`, for tests that never touch the engine process itself."""
    async with serving(flows, *engine_args) as (_, client):
        yield client


def _seconds(value: float):  # type: ignore[no-untyped-def]
    from datetime import timedelta

    return timedelta(seconds=value)


_ = os


async def _serving(address: str, timeout: float = 20.0) -> None:
    """Return once the engine at ``address`` answers (``wait_for_ready`` rides out the backoff)."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        await stub.HealthCheck(empty_pb2.Empty(), wait_for_ready=True, timeout=timeout)


async def reachable(client: dex.AsyncClient, timeout: float = 20.0) -> dex.AsyncClient:
    """Wait until ``client`` reaches a (re)started engine.

    gRPC shares connections per address within a process, so right after an engine restart a new
    channel may first report the old connection's failure until its reconnect backoff ends.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await client.health_check()
            return client
        except dex.DexServiceError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)
