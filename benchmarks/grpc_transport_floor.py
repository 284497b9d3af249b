"""Benchmark: what gRPC in Python costs the engine per message, with no engine code at all.

A bare ``grpc.aio`` server in a child process (the engine's server, options and event loop,
with no handler work; ``--sync``: a sync ``grpc.server`` with a thread pool) answers a
``grpc.aio`` client in this process, one call at a time:

* unary: ``FlowService.InvokeRPC`` with an empty request and response, as the engine's RPCs,
  queries and ``ReadStream`` calls are;
* stream: one ``WorkerTaskService.PollWorkerTask`` stream on which the server answers each
  request frame with one response frame, as the engine answers a pull Worker.

It prints the server process's CPU time (user + system, from ``/proc``) and the round-trip
latency per call or per frame pair. Multiplied by the messages of one session turn (about 30:
7 Step methods each sent and answered, 9 Step output frames, 2 RPCs, 8 ``ReadStream`` calls and
the query) it is the part of the engine's CPU per turn that the Python gRPC stack costs, whatever
the engine does. ``--poll-strategy`` sets ``GRPC_POLL_STRATEGY`` in the server.

``--compiled benchmarks/compiled_transport/build/server`` measures a gRPC C++ server instead (the
same two methods, the SDK's own messages, no engine code; ``build.sh`` there builds it from the
system's gRPC C++): what a compiled engine's transport would cost per message on this machine.
``--unix`` serves on a Unix domain socket instead of TCP loopback; ``--grpclib`` serves with
grpclib (pure-Python HTTP/2 on the event loop, no poller thread; not a workspace dependency, so
run it with ``uv run --with grpclib``).

Usage (from the repository root)::

    uv run python benchmarks/grpc_transport_floor.py [--calls 3000] [--poll-strategy poll]
        [--unix] [--sync | --grpclib | --compiled benchmarks/compiled_transport/build/server]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from pathlib import Path
from typing import Final

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

_SERVE_FLAG: Final = "--serve"
_SYNC_FLAG: Final = "--sync"
_GRPCLIB_FLAG: Final = "--grpclib"
_BIND_ENV: Final = "GRPC_TRANSPORT_FLOOR_BIND"
"""Where the server child listens: ``127.0.0.1:0`` (the default) or ``unix:PATH``."""
_READY: Final = "ready "
_OPTIONS: Final = [
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.so_reuseport", 0),
]


class _Flows(dex_pb2_grpc.FlowServiceServicer):  # type: ignore[misc]
    async def InvokeRPC(
        self, request: pb.InvokeRPCRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.InvokeRPCResponse:
        return pb.InvokeRPCResponse()


class _Tasks(dex_pb2_grpc.WorkerTaskServiceServicer):  # type: ignore[misc]
    async def PollWorkerTask(
        self,
        requests: AsyncIterator[pb.PollWorkerTaskRequest],
        context: grpc.aio.ServicerContext[object, object],
    ) -> AsyncIterator[pb.PollWorkerTaskResponse]:
        async for _ in requests:
            yield pb.PollWorkerTaskResponse(ping=pb.PollWorkerTaskPing())


class _SyncFlows(dex_pb2_grpc.FlowServiceServicer):  # type: ignore[misc]
    def InvokeRPC(
        self, request: pb.InvokeRPCRequest, context: grpc.ServicerContext
    ) -> pb.InvokeRPCResponse:
        return pb.InvokeRPCResponse()


class _SyncTasks(dex_pb2_grpc.WorkerTaskServiceServicer):  # type: ignore[misc]
    def PollWorkerTask(
        self, requests: Iterator[pb.PollWorkerTaskRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.PollWorkerTaskResponse]:
        for _ in requests:
            yield pb.PollWorkerTaskResponse(ping=pb.PollWorkerTaskPing())


def _serve_sync(extra: list[tuple[str, str | int]]) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=[*_OPTIONS, *extra])
    dex_pb2_grpc.add_FlowServiceServicer_to_server(_SyncFlows(), server)  # type: ignore[no-untyped-call]
    dex_pb2_grpc.add_WorkerTaskServiceServicer_to_server(_SyncTasks(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port(_bind_address())
    server.start()
    print(f"{_READY}{_bound_address(port)}", flush=True)
    server.wait_for_termination()


async def _serve(extra: list[tuple[str, str | int]]) -> None:
    server = grpc.aio.server(options=[*_OPTIONS, *extra])
    dex_pb2_grpc.add_FlowServiceServicer_to_server(_Flows(), server)  # type: ignore[no-untyped-call]
    dex_pb2_grpc.add_WorkerTaskServiceServicer_to_server(_Tasks(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port(_bind_address())
    await server.start()
    print(f"{_READY}{_bound_address(port)}", flush=True)
    await server.wait_for_termination()


async def _serve_grpclib() -> None:
    """The same two methods on grpclib's server (its handlers take a stream, not a request)."""
    from grpclib.const import Cardinality, Handler  # type: ignore[import-not-found]
    from grpclib.server import Server, Stream  # type: ignore[import-not-found]

    async def invoke_rpc(stream: Stream[pb.InvokeRPCRequest, pb.InvokeRPCResponse]) -> None:
        await stream.recv_message()
        await stream.send_message(pb.InvokeRPCResponse())

    async def poll_worker_task(
        stream: Stream[pb.PollWorkerTaskRequest, pb.PollWorkerTaskResponse],
    ) -> None:
        async for _ in stream:
            await stream.send_message(pb.PollWorkerTaskResponse(ping=pb.PollWorkerTaskPing()))

    class _Handlers:
        def __mapping__(self) -> dict[str, Handler]:
            return {
                "/dex.FlowService/InvokeRPC": Handler(
                    invoke_rpc,
                    Cardinality.UNARY_UNARY,
                    pb.InvokeRPCRequest,
                    pb.InvokeRPCResponse,
                ),
                "/dex.WorkerTaskService/PollWorkerTask": Handler(
                    poll_worker_task,
                    Cardinality.STREAM_STREAM,
                    pb.PollWorkerTaskRequest,
                    pb.PollWorkerTaskResponse,
                ),
            }

    server = Server([_Handlers()])
    bind = _bind_address()
    port = 0
    if bind.startswith("unix:"):
        await server.start(path=bind.removeprefix("unix:"))
    else:
        # A free port picked first: grpclib's server has no public way to tell the port it got.
        with socket.create_server(("127.0.0.1", 0)) as probe:
            port = probe.getsockname()[1]
        await server.start("127.0.0.1", port)
    print(f"{_READY}{_bound_address(port)}", flush=True)
    await server.wait_closed()


def _bind_address() -> str:
    return os.environ.get(_BIND_ENV, "127.0.0.1:0")


def _bound_address(port: int) -> str:
    bind = _bind_address()
    return bind if bind.startswith("unix:") else f"127.0.0.1:{port}"


def _server_option(spec: str) -> tuple[str, str | int]:
    name, _, value = spec.partition("=")
    return (name, int(value)) if value.lstrip("-").isdigit() else (name, value)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _unary(address: str, calls: int) -> list[float]:
    async with grpc.aio.insecure_channel(address, options=_OPTIONS) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        latencies = []
        for _ in range(calls):
            started = time.perf_counter()
            await stub.InvokeRPC(pb.InvokeRPCRequest())
            latencies.append(time.perf_counter() - started)
        return latencies


async def _stream(address: str, frames: int) -> list[float]:
    async with grpc.aio.insecure_channel(address, options=_OPTIONS) as channel:
        stub = dex_pb2_grpc.WorkerTaskServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.PollWorkerTask()
        latencies = []
        for _ in range(frames):
            started = time.perf_counter()
            await call.write(pb.PollWorkerTaskRequest(pong=pb.PollWorkerTaskPong()))
            await call.read()
            latencies.append(time.perf_counter() - started)
        await call.done_writing()
        return latencies


async def _measure(arguments: argparse.Namespace) -> None:
    if arguments.compiled and not os.access(arguments.compiled, os.X_OK):
        raise SystemExit(
            f"grpc_transport_floor: {arguments.compiled} is not an executable; build it with: "
            "bash benchmarks/compiled_transport/build.sh"
        )
    if arguments.compiled and arguments.unix:
        raise SystemExit(
            "grpc_transport_floor: the compiled server listens on TCP only; drop --unix"
        )
    env = dict(os.environ)
    if arguments.grpclib and importlib.util.find_spec("grpclib") is None:
        raise SystemExit(
            "grpc_transport_floor: --grpclib needs grpclib, which the workspace does not install; "
            "run: uv run --with grpclib python benchmarks/grpc_transport_floor.py --grpclib"
        )
    socket_directory = tempfile.TemporaryDirectory(prefix="grpc-floor-")
    if arguments.unix:
        env[_BIND_ENV] = f"unix:{socket_directory.name}/server.sock"
    if arguments.poll_strategy:
        env["GRPC_POLL_STRATEGY"] = arguments.poll_strategy
    command = (
        [str(arguments.compiled)]
        if arguments.compiled
        else [
            sys.executable,
            __file__,
            _SERVE_FLAG,
            *([_SYNC_FLAG] if arguments.sync else []),
            *([_GRPCLIB_FLAG] if arguments.grpclib else []),
            *arguments.server_option,
        ]
    )
    server = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith(_READY):
            raise RuntimeError(f"the server did not start: {line!r}")
        bound = line.split()[1]
        # The compiled server prints its port alone.
        address = f"127.0.0.1:{bound}" if bound.isdigit() else bound
        await _unary(address, 200)  # warm-up: connection, first calls
        print(
            f"grpc_transport_floor: {arguments.calls} calls each, one at a time; "
            f"{_server_kind(arguments)} on {'a Unix socket' if arguments.unix else 'TCP loopback'}, "
            f"server GRPC_POLL_STRATEGY={arguments.poll_strategy or '(default)'}, "
            f"extra options {arguments.server_option or 'none'}; "
            f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
        )
        for kind, run in (("unary InvokeRPC", _unary), ("stream frame pair", _stream)):
            cpu_before = _cpu_seconds(server.pid)
            latencies = await run(address, arguments.calls)
            cpu = (_cpu_seconds(server.pid) - cpu_before) / arguments.calls
            print(
                f"  {kind:<18} server CPU {1e6 * cpu:7.0f} us per call, round trip median "
                f"{1e6 * statistics.median(latencies):7.0f} us"
            )
    finally:
        server.terminate()
        server.wait(10)
        socket_directory.cleanup()
    print(f"cores: {os.cpu_count()}")


def _server_kind(arguments: argparse.Namespace) -> str:
    if arguments.compiled:
        return f"compiled gRPC C++ server {arguments.compiled.name} (grpcpp {_grpcpp_version()})"
    if arguments.grpclib:
        return "grpclib server"
    return "sync grpc.server (thread pool)" if arguments.sync else "grpc.aio server"


def _grpcpp_version() -> str:
    try:
        return subprocess.run(
            ["pkg-config", "--modversion", "grpc++"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "version unknown"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--poll-strategy", default="", help="GRPC_POLL_STRATEGY of the server")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument(
        "--sync", action="store_true", help="a sync grpc.server with a thread pool instead"
    )
    kind.add_argument(
        "--grpclib", action="store_true", help="grpclib's server instead (uv run --with grpclib)"
    )
    parser.add_argument(
        "--unix", action="store_true", help="serve on a Unix domain socket, not TCP loopback"
    )
    kind.add_argument(
        "--compiled",
        type=Path,
        default=None,
        help="the C++ server built by benchmarks/compiled_transport/build.sh instead",
    )
    parser.add_argument(
        "--server-option",
        action="append",
        default=[],
        help="NAME=VALUE: one more grpc.aio.server option (repeatable)",
    )
    asyncio.run(_measure(parser.parse_args(argv)))


if __name__ == "__main__":
    if sys.argv[1:3] == [_SERVE_FLAG, _SYNC_FLAG]:
        _serve_sync([_server_option(spec) for spec in sys.argv[3:]])
    elif sys.argv[1:3] == [_SERVE_FLAG, _GRPCLIB_FLAG]:
        asyncio.run(_serve_grpclib())
    elif sys.argv[1:2] == [_SERVE_FLAG]:
        asyncio.run(_serve([_server_option(spec) for spec in sys.argv[2:]]))
    else:
        main(sys.argv[1:])
