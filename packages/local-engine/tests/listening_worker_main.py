"""Child-process entry point: serve a Registry with an SDK Worker in listening mode until SIGTERM.

Started by :func:`start_listening_worker`::

    python -m listening_worker_main --registry PKG.MODULE:NAME --server HOST:PORT \
        --bind 127.0.0.1:PORT --blob-cache-dir DIR [--async]

Once the WorkerService listener accepts connections it prints one line
``listening worker ready <host:port>`` (the address to put in ``WorkerTarget``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import dex
from engine_test_support.child_process import ChildProcess
from engine_test_support.worker_main import load_registry

READY_PREFIX = "listening worker ready "


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def start_listening_worker(
    registry: str,
    server_address: str,
    directory: Path,
    *,
    use_async: bool = False,
    port: int | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> tuple[ChildProcess, str]:
    """Start a listening Worker child; return it and its advertised ``host:port`` once ready."""
    bind = f"127.0.0.1:{port or free_port()}"
    command = [
        sys.executable,
        "-m",
        "listening_worker_main",
        "--registry",
        registry,
        "--server",
        server_address,
        "--bind",
        bind,
        "--blob-cache-dir",
        str(directory / f"blobs-{bind.replace(':', '-')}"),
    ]
    if use_async:
        command.append("--async")
    child = ChildProcess(
        command, directory / f"listening-{bind.replace(':', '-')}.stderr", env or {}
    )
    line = await child.await_line(lambda text: text.startswith(READY_PREFIX), timeout)
    return child, line.removeprefix(READY_PREFIX)


def _wait_listening(address: str) -> None:
    host, _, port = address.rpartition(":")
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return
        except OSError:
            time.sleep(0.02)


def _options(arguments: argparse.Namespace) -> dex.WorkerOptions:
    return dex.WorkerOptions(bind_address=arguments.bind, server_address=arguments.server)


def _run_sync(registry: dex.Registry, cache: dex.BlobCache, arguments: argparse.Namespace) -> None:
    worker = dex.Worker(registry, cache, _options(arguments))
    stop_requested = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.set())
    runner = threading.Thread(target=worker.start, name="dex-listening-worker")
    runner.start()
    _wait_listening(arguments.bind)
    print(f"{READY_PREFIX}{arguments.bind}", flush=True)
    while not stop_requested.wait(0.2) and runner.is_alive():
        pass
    worker.stop()
    runner.join()


async def _run_async(
    registry: dex.Registry, cache: dex.BlobCache, arguments: argparse.Namespace
) -> None:
    worker = dex.AsyncWorker(registry, cache, _options(arguments))
    stop_requested = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop_requested.set)
    runner = asyncio.create_task(worker.start())
    await asyncio.to_thread(_wait_listening, arguments.bind)
    print(f"{READY_PREFIX}{arguments.bind}", flush=True)
    stopper = asyncio.create_task(stop_requested.wait())
    await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
    await worker.stop()
    await runner


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="listening_worker_main")
    parser.add_argument("--registry", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--bind", required=True)
    parser.add_argument("--blob-cache-dir", required=True)
    parser.add_argument("--async", dest="use_async", action="store_true")
    arguments = parser.parse_args(argv)
    registry = load_registry(arguments.registry)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(arguments.blob_cache_dir, 64 * 1024 * 1024))
    try:
        if arguments.use_async:
            asyncio.run(_run_async(registry, cache, arguments))
        else:
            _run_sync(registry, cache, arguments)
    finally:
        cache.close()


if __name__ == "__main__":
    main(sys.argv[1:])
