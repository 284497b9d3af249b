"""Every engine error reaches the real SDK client as the right typed error, over real gRPC."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from dex import AsyncClient, BlobCacheConfig, ClientOptions, Registry, open_blob_cache
from dex import runtime_errors as sdk_errors
from dex._grpc_errors import translate_rpc_error
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_local_engine import errors
from google.protobuf import empty_pb2


class _FailingFlowService(dex_pb2_grpc.FlowServiceServicer):
    """Fails GetFlowSummary/StopFlow/GetServerInfo with whatever ``failure`` raises."""

    def __init__(self) -> None:
        self.failure: Callable[[], None] = lambda: None

    @errors.guard_servicer_method
    async def GetFlowSummary(
        self, request: pb.GetFlowSummaryRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.GetFlowSummaryResponse:
        self.failure()
        return pb.GetFlowSummaryResponse(
            flow_execution_id=pb.FlowExecutionID(flow_id=request.flow_id, run_id="r-1"),
            flow_type="Orders",
            flow_status=pb.FLOW_STATUS_RUNNING,
        )

    @errors.guard_servicer_method
    async def StopFlow(
        self, request: pb.StopFlowRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> empty_pb2.Empty:
        self.failure()
        return empty_pb2.Empty()


class _StreamingService(dex_pb2_grpc.WorkerTaskServiceServicer):
    """A server-streaming method that yields one frame, then fails."""

    def __init__(self) -> None:
        self.failure: Callable[[], None] = lambda: None

    @errors.guard_servicer_method
    async def PollWorkerTask(
        self, request_iterator: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.PollWorkerTaskResponse]:
        yield pb.PollWorkerTaskResponse()
        self.failure()


@pytest.fixture
async def served(
    tmp_path: Path,
) -> AsyncIterator[tuple[_FailingFlowService, _StreamingService, str]]:
    flow_service = _FailingFlowService()
    streaming = _StreamingService()
    server = grpc.aio.server()
    dex_pb2_grpc.add_FlowServiceServicer_to_server(flow_service, server)  # type: ignore[no-untyped-call]
    dex_pb2_grpc.add_WorkerTaskServiceServicer_to_server(streaming, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield flow_service, streaming, f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


@pytest.fixture
async def client(
    served: tuple[_FailingFlowService, _StreamingService, str], tmp_path: Path
) -> AsyncIterator[AsyncClient]:
    cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    async with AsyncClient(Registry([]), cache, ClientOptions(server_address=served[2])) as c:
        yield c


def _raising(error: Exception) -> Callable[[], None]:
    def fail() -> None:
        raise error

    return fail


async def test_flow_not_found_maps_to_flow_not_found_error(
    served: tuple[_FailingFlowService, _StreamingService, str], client: AsyncClient
) -> None:
    served[0].failure = _raising(errors.flow_not_found("f-1"))
    with pytest.raises(sdk_errors.FlowNotFoundError) as raised:
        await client.describe_flow("f-1")
    assert "f-1" in raised.value.detail
    assert raised.value.code is grpc.StatusCode.NOT_FOUND


async def test_closed_flow_maps_to_not_active_for_active_operations(
    served: tuple[_FailingFlowService, _StreamingService, str], client: AsyncClient
) -> None:
    served[0].failure = _raising(errors.flow_not_active("f-2"))
    with pytest.raises(sdk_errors.FlowNotActiveOrNotFoundError):
        await client.stop_flow("f-2")


async def test_unexpected_exception_becomes_internal_and_server_keeps_serving(
    served: tuple[_FailingFlowService, _StreamingService, str], client: AsyncClient
) -> None:
    served[0].failure = _raising(KeyError("boom"))
    with pytest.raises(sdk_errors.DexServiceError) as raised:
        await client.describe_flow("f-3")
    assert raised.value.code is grpc.StatusCode.INTERNAL
    assert "GetFlowSummary" in raised.value.detail and "KeyError" in raised.value.detail
    served[0].failure = lambda: None
    info = await client.describe_flow("f-3")
    assert (info.flow_id, info.flow_type) == ("f-3", "Orders")


@pytest.mark.parametrize(
    ("error", "expected_type", "requirement"),
    [
        (errors.flow_not_found("f"), sdk_errors.FlowNotFoundError, "existing"),
        (errors.flow_not_active("f"), sdk_errors.FlowNotActiveOrNotFoundError, "active"),
        (errors.flow_already_started("f"), sdk_errors.FlowAlreadyStartedError, "none"),
        (errors.flow_closing("f"), sdk_errors.FlowClosingError, "active"),
        (errors.long_poll_timeout("flow 'f' to close"), sdk_errors.LongPollTimeoutError, "none"),
        (errors.request_timeout("invoke_rpc"), sdk_errors.RequestTimeoutError, "none"),
        (errors.rpc_lock_conflict(["counter"]), sdk_errors.RpcLockConflictError, "active"),
        (
            errors.channel_message_not_found("pending", "m-1"),
            sdk_errors.ChannelMessageNotFoundError,
            "active",
        ),
        (errors.worker_unavailable("no worker"), sdk_errors.WorkerInvocationError, "active"),
        (errors.invalid_argument("bad page_size"), sdk_errors.DexServiceError, "none"),
        (errors.unimplemented("TimeTravel"), sdk_errors.DexServiceError, "none"),
    ],
)
async def test_each_constructor_maps_to_its_sdk_error(
    served: tuple[_FailingFlowService, _StreamingService, str],
    error: errors.EngineError,
    expected_type: type[sdk_errors.DexServiceError],
    requirement: Any,
) -> None:
    served[0].failure = _raising(error)
    async with grpc.aio.insecure_channel(served[2]) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as raised:
            await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="f"))
    translated = translate_rpc_error(raised.value, "op", "f", requirement)
    assert type(translated) is expected_type
    assert translated.code is error.code
    assert translated.detail == error.detail


async def test_worker_api_error_carries_the_worker_failure(
    served: tuple[_FailingFlowService, _StreamingService, str],
) -> None:
    worker_error = pb.WorkerErrorResponse(
        detail="card declined",
        error_type="shop.PaymentError",
        stack_trace="Traceback ...",
        grpc_status=grpc.StatusCode.UNKNOWN.value[0],
    )
    served[0].failure = _raising(errors.worker_api_error(worker_error))
    async with grpc.aio.insecure_channel(served[2]) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as raised:
            await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="f"))
    translated = translate_rpc_error(raised.value, "invoke_rpc", "f", "active")
    assert isinstance(translated, sdk_errors.WorkerInvocationError)
    assert translated.code is grpc.StatusCode.FAILED_PRECONDITION
    assert translated.worker_code is grpc.StatusCode.UNKNOWN
    assert translated.worker_error_type == "shop.PaymentError"
    assert translated.worker_error_detail == "card declined"


async def test_streaming_method_error_after_output_reaches_the_caller(
    served: tuple[_FailingFlowService, _StreamingService, str],
) -> None:
    served[1].failure = _raising(errors.invalid_argument("unknown queue 'q'"))
    async with grpc.aio.insecure_channel(served[2]) as channel:
        stub = dex_pb2_grpc.WorkerTaskServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.PollWorkerTask(iter([pb.PollWorkerTaskRequest()]))
        frames = []
        with pytest.raises(grpc.RpcError) as raised:
            async for frame in call:
                frames.append(frame)
    assert len(frames) == 1
    translated = translate_rpc_error(raised.value, "poll", None, "none")
    assert translated.code is grpc.StatusCode.INVALID_ARGUMENT
    assert translated.detail == "unknown queue 'q'"
