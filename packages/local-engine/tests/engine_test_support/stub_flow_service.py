"""TEST STUB of the Dex FlowService: only what a pull Worker needs before it starts.

A real SDK ``Worker`` calls ``GetServerInfo`` and ``SyncAttributeIndexes`` before it opens its pull
streams. Tests of pull dispatch alone run a gRPC server with the real
:class:`~dex_local_engine.pull_dispatch.PullDispatcher` and this stub instead of the whole engine.
Every other FlowService RPC answers UNIMPLEMENTED (the generated base class).
"""

from __future__ import annotations

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from google.protobuf import empty_pb2

STUB_SERVER_VERSION = "engine-test-support-stub"


class StubFlowService(dex_pb2_grpc.FlowServiceServicer):  # type: ignore[misc]
    """Answers GetServerInfo (protocol 1..3) and accepts any Attribute index sync."""

    def __init__(self) -> None:
        self.synced_indexes: list[dict[str, int]] = []

    async def GetServerInfo(
        self, request: empty_pb2.Empty, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.ServerInfo:
        del request, context
        return pb.ServerInfo(
            server_version=STUB_SERVER_VERSION,
            minimum_supported_protocol_version=1,
            current_protocol_version=3,
        )

    async def SyncAttributeIndexes(
        self,
        request: pb.SyncAttributeIndexRequest,
        context: grpc.aio.ServicerContext[object, object],
    ) -> pb.SyncAttributeIndexResponse:
        del context
        self.synced_indexes.append(dict(request.attribute_indexes))
        return pb.SyncAttributeIndexResponse()
