"""Child-process entry point: run a Registry with the SDK's pull Worker until SIGTERM.

Started by :class:`~engine_test_support.worker_process.WorkerProcess`::

    python -m engine_test_support.worker_main --registry PKG.MODULE:NAME --server HOST:PORT \
        --blob-cache-dir DIR --app-worker-id ID [--async] [--max-concurrent-tasks N]
        [--reserved-rpc-tasks N]

``NAME`` is a ``dex.Registry`` or a function without arguments returning one (for ``--async`` it
must allow async handlers). Once every pull queue registered, it prints one line
``worker ready <app_worker_id>``. SIGTERM stops the Worker gracefully (drains running handlers).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from types import FrameType

import dex

READY_PREFIX = "worker ready "


def load_registry(spec: str) -> dex.Registry:
    """Import ``PKG.MODULE:NAME`` and return the Registry it names (or builds)."""
    module_name, separator, attribute = spec.partition(":")
    if not separator or not module_name or not attribute:
        raise ValueError(f"registry spec {spec!r} must look like package.module:name")
    target = getattr(importlib.import_module(module_name), attribute)
    registry = target if isinstance(target, dex.Registry) else target()
    if not isinstance(registry, dex.Registry):
        raise TypeError(f"{spec} is neither a dex.Registry nor a function returning one")
    return registry


def _options(arguments: argparse.Namespace) -> dex.WorkerOptions:
    return dex.WorkerOptions(
        server_address=arguments.server,
        pull=dex.PullWorkerOptions(
            max_concurrent_tasks=arguments.max_concurrent_tasks,
            app_worker_id=arguments.app_worker_id,
            reserved_rpc_tasks=arguments.reserved_rpc_tasks,
        ),
    )


def worker_arguments(prog: str) -> argparse.ArgumentParser:
    """The options every Worker child takes: ``--registry --server --blob-cache-dir [--async]``."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--blob-cache-dir", required=True)
    parser.add_argument("--async", dest="use_async", action="store_true")
    return parser


def serve_until_sigterm(
    arguments: argparse.Namespace,
    options: dex.WorkerOptions,
    ready: Callable[[dex.Worker], None],
    ready_async: Callable[[dex.AsyncWorker], Awaitable[None]],
) -> None:
    """Serve the ``--registry`` with a ``dex.Worker`` (``dex.AsyncWorker`` for ``--async``).

    ``ready`` (``ready_async``) waits until the Worker can take tasks and announces it on stdout.
    SIGTERM stops the Worker gracefully (drains running handlers).
    """
    registry = load_registry(arguments.registry)
    cache = dex.open_blob_cache(dex.BlobCacheConfig(arguments.blob_cache_dir, 64 * 1024 * 1024))
    try:
        if arguments.use_async:
            asyncio.run(
                _serve_async(lambda: dex.AsyncWorker(registry, cache, options), ready_async)
            )
        else:
            _serve_sync(dex.Worker(registry, cache, options), ready)
    finally:
        cache.close()


def _serve_sync(worker: dex.Worker, ready: Callable[[dex.Worker], None]) -> None:
    stop_requested = threading.Event()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    runner = threading.Thread(target=worker.start, name="dex-worker-start")
    runner.start()
    ready(worker)
    while not stop_requested.wait(0.2) and runner.is_alive():
        pass
    worker.stop()
    runner.join()


async def _serve_async(
    new_worker: Callable[[], dex.AsyncWorker],
    ready: Callable[[dex.AsyncWorker], Awaitable[None]],
) -> None:
    worker = new_worker()  # inside the loop that runs it
    stop_requested = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop_requested.set)
    runner = asyncio.create_task(worker.start())
    await ready(worker)
    stopper = asyncio.create_task(stop_requested.wait())
    await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
    await worker.stop()
    await runner


def main(argv: list[str] | None = None) -> None:
    parser = worker_arguments("engine_test_support.worker_main")
    parser.add_argument("--app-worker-id", required=True)
    parser.add_argument("--max-concurrent-tasks", type=int, default=1)
    parser.add_argument("--reserved-rpc-tasks", type=int, default=None)
    arguments = parser.parse_args(argv)
    announce = f"{READY_PREFIX}{arguments.app_worker_id}"

    def ready(worker: dex.Worker) -> None:
        worker.wait_pull_registered(timeout=60)
        print(announce, flush=True)

    async def ready_async(worker: dex.AsyncWorker) -> None:
        await worker.wait_pull_registered(timeout=60)
        print(announce, flush=True)

    serve_until_sigterm(arguments, _options(arguments), ready, ready_async)


if __name__ == "__main__":
    main(sys.argv[1:])
