"""Child-process entry point: serve a Registry with an SDK Worker in listening mode until SIGTERM.

Started by :func:`start_listening_worker`::

    python -m listening_worker_main --registry PKG.MODULE:NAME --server HOST:PORT \
        --bind 127.0.0.1:PORT --blob-cache-dir DIR [--async]

Once the WorkerService listener accepts connections it prints one line
``listening worker ready <host:port>`` (the address to put in ``WorkerTarget``).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path

import dex
from engine_test_support.child_process import ChildProcess
from engine_test_support.worker_main import serve_until_sigterm, worker_arguments

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


def main(argv: list[str]) -> None:
    parser = worker_arguments("listening_worker_main")
    parser.add_argument("--bind", required=True)
    arguments = parser.parse_args(argv)
    announce = f"{READY_PREFIX}{arguments.bind}"

    def ready(worker: dex.Worker) -> None:
        _wait_listening(arguments.bind)
        print(announce, flush=True)

    async def ready_async(worker: dex.AsyncWorker) -> None:
        await asyncio.to_thread(_wait_listening, arguments.bind)
        print(announce, flush=True)

    options = dex.WorkerOptions(bind_address=arguments.bind, server_address=arguments.server)
    serve_until_sigterm(arguments, options, ready, ready_async)


if __name__ == "__main__":
    main(sys.argv[1:])
