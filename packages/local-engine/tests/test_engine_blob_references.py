"""Issue case 5: a blob reference that names nothing stored never enters the engine.

Before, ``SetAttributes`` or ``StartFlow`` stored an Attribute value naming a blob ID nothing held;
with an index on that Attribute every ``SearchFlows`` then failed INTERNAL, and so did
``GetAttributes`` and ``StopFlow`` on that Flow, across restarts. Now a Client's blob reference
is refused (the engine gives Clients values, never blob IDs), and a Worker's must name a blob the
engine holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import dex
import grpc
import pytest
from dex import Flow, FlowStatus, Step, StepList
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from engine_kernel_harness import EngineProcess, reachable, running_engine, sdk_client
from raw_pull_worker import complete, execute_result, raw_pull_worker

WAIT = timedelta(seconds=60)
_DANGLING = pb.Value(internal_blob_id_for_string_value="sha256-" + "0" * 64)
_KEYWORD = pb.IndexConfig(type=pb.INDEX_TYPE_KEYWORD)


class Hold(Step[str]):
    async def execute(self, context: dex.AsyncContext, input: str) -> dex.StepDecision:
        return dex.dead_end()


class BlobFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Hold())


@pytest.fixture
async def engine() -> AsyncIterator[EngineProcess]:
    async with running_engine() as started:
        yield started


async def _index_status(engine: EngineProcess) -> None:
    async with grpc.aio.insecure_channel(engine.address) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        await stub.SyncAttributeIndexes(
            pb.SyncAttributeIndexRequest(attribute_indexes={"Status": pb.INDEX_TYPE_KEYWORD})
        )


async def _search_and_read(stub: dex_pb2_grpc.FlowServiceStub, flow_id: str) -> None:
    """SearchFlows and GetAttributes work: what a dangling reference used to break."""
    page = await stub.SearchFlows(pb.SearchFlowsRequest(query="Status = 'x'", page_size=10))
    assert all(entry.flow_id for entry in page.flow_runs)
    await stub.GetAttributes(pb.GetAttributesRequest(flow_id=flow_id, all_keys=True))


async def test_client_blob_references_are_refused_and_search_keeps_working(
    engine: EngineProcess,
) -> None:
    flow = BlobFlow()
    async with sdk_client(engine, [flow]) as client:
        await client.start_flow(flow, "held", "go")
        await _index_status(engine)
        async with grpc.aio.insecure_channel(engine.address) as channel:
            stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
            write = pb.AttributeWrite(key="Status", value=_DANGLING, index_config=_KEYWORD)
            refused = [
                stub.SetAttributes(pb.SetAttributesRequest(flow_id="held", attributes=[write])),
                stub.StartFlow(
                    pb.StartFlowRequest(
                        flow_id="other",
                        flow_type="BlobFlow",
                        start_step_type="Hold",
                        flow_start_options=pb.FlowStartOptions(attributes=[write]),
                    )
                ),
                stub.StartFlow(
                    pb.StartFlowRequest(
                        flow_id="other",
                        flow_type="BlobFlow",
                        start_step_type="Hold",
                        step_input=_DANGLING,
                    )
                ),
                stub.PublishToChannel(
                    pb.PublishToChannelRequest(
                        flow_id="held",
                        messages=[pb.ChannelMessage(channel_name="inbox", value=_DANGLING)],
                    )
                ),
            ]
            for call in refused:
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await call
                assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT, raised.value
                assert "is a blob reference" in (raised.value.details() or "")
            await _search_and_read(stub, "held")
            await stub.StopFlow(pb.StopFlowRequest(flow_id="held"))
    engine.kill()
    engine.start()
    async with sdk_client(engine, [flow]) as client:
        await reachable(client)
        async with grpc.aio.insecure_channel(engine.address) as channel:
            stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
            await _search_and_read(stub, "held")


def _echo_input_as_attribute(task: pb.PollWorkerTask) -> list[pb.PollWorkerTaskFrame] | None:
    """Write the task's Step input back as Attribute ``Status`` (a reference stays a reference);
    a Flow whose ID starts with ``dangling`` writes a reference to no blob instead."""
    if task.WhichOneof("request") != "execute":
        return None
    execute = task.execute
    value = _DANGLING if execute.context.flow_id.startswith("dangling") else execute.step_input
    write = pb.AttributeWrite(key="Status", value=value, index_config=_KEYWORD)
    result = pb.InvokeExecuteMethodResponse(step_decision=complete(), upsert_attributes=[write])
    return execute_result(task, result)


async def test_worker_blob_references_must_name_a_blob_the_engine_holds(
    engine: EngineProcess,
) -> None:
    flow = BlobFlow()
    large = "y" * (300 * 1024)  # over the blob threshold: the task carries it as a reference
    await _index_status(engine)
    async with (
        sdk_client(engine, [flow]) as client,
        raw_pull_worker(engine.address, "BlobFlow", _echo_input_as_attribute) as worker,
    ):
        await client.start_flow(flow, "known", large)
        await client.start_flow(flow, "dangling", "small")
        known = await client.wait_for_flow("known", timeout=WAIT)
        dangling = await client.wait_for_flow("dangling", timeout=WAIT)
        sent = [task.execute.step_input for task in worker.tasks if task.HasField("execute")]
        assert any(value.HasField("internal_blob_id_for_string_value") for value in sent)
        async with grpc.aio.insecure_channel(engine.address) as channel:
            stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
            read = await stub.GetAttributes(
                pb.GetAttributesRequest(flow_id="known", keys=["Status"])
            )
            await _search_and_read(stub, "dangling")
            found = await stub.SearchFlows(
                pb.SearchFlowsRequest(query=f"Status = '{large}'", page_size=10)
            )
    assert known.status is FlowStatus.COMPLETED, known
    assert [kv.value.string_value for kv in read.attributes] == [large]
    assert [entry.flow_id for entry in found.flow_runs] == ["known"]
    assert dangling.status is FlowStatus.FAILED, dangling
    assert "which the engine does not hold" in (dangling.error_message or ""), dangling
