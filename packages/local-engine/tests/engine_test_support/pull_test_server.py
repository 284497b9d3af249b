"""An in-process gRPC server with the real pull dispatcher and the TEST STUB FlowService.

Use it to test pull dispatch without the rest of the engine: SDK Workers in child processes
connect to :attr:`PullTestServer.address`, and the test drives
:meth:`~dex_local_engine.pull_dispatch.PullDispatcher.dispatch` directly. The server runs on the
test's event loop, so wait for child processes with ``await`` (never block the loop).

Example::

    async with PullTestServer() as server:
        worker = await workers.start(PROBE_REGISTRY, server.address)
        frames = [frame async for frame in server.dispatcher.dispatch(task)]
"""

from __future__ import annotations

from types import TracebackType

import grpc
from dex.dexpb import dex_pb2_grpc
from dex_local_engine.pull_dispatch import PullDispatcher

from engine_test_support.stub_flow_service import StubFlowService


class PullTestServer:
    """gRPC server on ``127.0.0.1`` (a free port) serving WorkerTaskService and the stub."""

    def __init__(self, dispatcher: PullDispatcher | None = None) -> None:
        self.dispatcher = dispatcher or PullDispatcher()
        self.flow_service = StubFlowService()
        self._server: grpc.aio.Server | None = None
        self._port = 0

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``; valid once started."""
        if self._server is None:
            raise RuntimeError("PullTestServer is not started")
        return f"127.0.0.1:{self._port}"

    async def start(self) -> None:
        server = grpc.aio.server()
        dex_pb2_grpc.add_WorkerTaskServiceServicer_to_server(self.dispatcher, server)  # type: ignore[no-untyped-call]
        dex_pb2_grpc.add_FlowServiceServicer_to_server(self.flow_service, server)  # type: ignore[no-untyped-call]
        self._port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None

    async def __aenter__(self) -> PullTestServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
