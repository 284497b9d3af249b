"""Issue case 7: what enters the engine's gRPC surface gets a clear status, never a traceback.

Undecodable bodies answer INVALID_ARGUMENT; an error that names a 10 KB ID still fits gRPC's
metadata; a bad frame right behind a ``PollWorkerTask`` register ends that stream with a status;
a raw ``InvokeRPC`` for an unknown Flow or RPC name answers NOT_FOUND at once instead of waiting
out its timeout. The engine is a real ``dex-local-engine serve`` process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import dex
import grpc
import pytest
from dex import Flow, Step, StepList
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from engine_kernel_harness import EngineProcess, running_engine, sdk_client, sdk_worker
from grpc_status import rpc_status

_CALL_SECONDS = 30.0
"""A call's own deadline: far above an answer given at once, far below an RPC timeout."""


class Idle(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        return dex.dead_end()


class EntryFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Idle())

    @dex.rpc
    def ping(self, context: dex.Context, value: str) -> dex.RPCResult[str]:
        return dex.RPCResult(output=f"pong {value}")


@pytest.fixture
async def engine() -> AsyncIterator[EngineProcess]:
    async with running_engine() as started:
        yield started


async def _raw_unary(engine: EngineProcess, method: str, body: bytes) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(engine.address) as channel:
        call = channel.unary_unary(method)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call(body, timeout=_CALL_SECONDS)
    return raised.value


def _bad_utf8_start_flow() -> bytes:
    body = bytearray(pb.StartFlowRequest(flow_id="abc", flow_type="EntryFlow").SerializeToString())
    index = body.index(b"abc")
    body[index] = 0xFF  # a string field that is not UTF-8
    return bytes(body)


async def test_undecodable_bodies_are_invalid_argument_without_a_traceback(
    engine: EngineProcess,
) -> None:
    for method, body in [
        ("/dex.FlowService/StartFlow", _bad_utf8_start_flow()),
        ("/dex.FlowService/SetAttributes", b"\xff\xff\xff\xff"),
        ("/dex.FlowService/SearchFlows", b"\x0a\x05ab"),  # a field longer than the body
    ]:
        error = await _raw_unary(engine, method, body)
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, (method, error)
        assert "the request is not a valid dex." in (error.details() or ""), error
    # The engine still serves, and logged no traceback for any of them.
    async with sdk_client(engine, [EntryFlow()]) as client:
        await client.health_check()
    assert "Traceback" not in engine.stderr()


async def test_an_error_naming_a_10_kb_id_still_reaches_the_caller(engine: EngineProcess) -> None:
    huge = "f" * 10_000
    async with grpc.aio.insecure_channel(engine.address) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id=huge), timeout=_CALL_SECONDS)
    error = raised.value
    assert error.code() is grpc.StatusCode.NOT_FOUND, error
    detail = error.details() or ""
    assert detail.startswith("flow 'ffff") and "more bytes)" in detail
    assert len(detail.encode()) <= 1024
    status = rpc_status.from_call(error)
    assert status is not None and status.details  # the rich status the SDK reads came too


async def _poll_stream(
    engine: EngineProcess, frames: list[bytes]
) -> tuple[list[pb.PollWorkerTaskResponse], grpc.aio.AioRpcError | None]:
    """Open a raw PollWorkerTask stream, send ``frames``, read until the stream ends."""
    async with grpc.aio.insecure_channel(engine.address) as channel:
        call = channel.stream_stream(
            "/dex.WorkerTaskService/PollWorkerTask",
            response_deserializer=pb.PollWorkerTaskResponse.FromString,
        )(timeout=_CALL_SECONDS)
        for frame in frames:
            await call.write(frame)
        received: list[pb.PollWorkerTaskResponse] = []
        try:
            while (response := await call.read()) is not grpc.aio.EOF:
                received.append(response)
        except grpc.aio.AioRpcError as error:
            return received, error
        return received, None


def _register() -> bytes:
    return pb.PollWorkerTaskRequest(
        register=pb.PollWorkerTaskRegister(
            queue="EntryFlow", app_worker_id="raw-worker", flow_types=["EntryFlow"]
        )
    ).SerializeToString()


@pytest.mark.parametrize(
    ("bad_frame", "named"),
    [
        (_register(), "register is only valid as the first frame"),
        (b"\xff\xff\xff", "the request is not a valid dex.PollWorkerTaskRequest"),
        (
            pb.PollWorkerTaskRequest(
                reject=pb.PollWorkerTaskReject(task_id="t", reason=99)  # type: ignore[arg-type]
            ).SerializeToString(),
            "unknown reason 99",
        ),
    ],
)
async def test_a_bad_frame_right_behind_register_ends_the_stream_with_a_status(
    engine: EngineProcess, bad_frame: bytes, named: str
) -> None:
    received, error = await _poll_stream(engine, [_register(), bad_frame])
    assert error is not None, received
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error
    assert named in (error.details() or "")
    # Before the status: at most the answer to the register and the ping that flushed it.
    assert {response.WhichOneof("frame") for response in received} <= {"registered", "ping"}


async def test_an_undecodable_first_frame_is_refused(engine: EngineProcess) -> None:
    received, error = await _poll_stream(engine, [b"\x0a\xff"])
    assert received == []
    assert error is not None and error.code() is grpc.StatusCode.INVALID_ARGUMENT, error
    assert "Traceback" not in engine.stderr()


async def test_raw_invoke_rpc_for_an_unknown_flow_or_rpc_answers_not_found_at_once(
    engine: EngineProcess,
) -> None:
    flow = EntryFlow()
    async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
        await client.start_flow(flow, "entry", "go")
        assert (await client.invoke_rpc(flow.ping, "entry", "a")) == "pong a"
        async with grpc.aio.insecure_channel(engine.address) as channel:
            stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
            for request in [
                pb.InvokeRPCRequest(flow_id="nobody", rpc_name="ping", timeout_seconds=3600),
                pb.InvokeRPCRequest(flow_id="entry", rpc_name="no_such_rpc", timeout_seconds=3600),
            ]:
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await stub.InvokeRPC(request, timeout=_CALL_SECONDS)
                assert raised.value.code() is grpc.StatusCode.NOT_FOUND, raised.value
        # The Worker that declined the unknown name still serves the Flow's known RPC.
        assert (await client.invoke_rpc(flow.ping, "entry", "b")) == "pong b"
