"""Closed runs leave the engine's memory and are read from SQLite on demand.

In process, the engine's own count of runs in memory shows them leave; over the wire, a real SDK
Client and Worker read a closed Flow (its result, Attributes, history, a query RPC, search) from an
engine that keeps no closed run in memory (``--closed-run-cache 0``), before and after a restart.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import dex
import grpc
import pytest
from dex import (
    Attribute,
    Flow,
    FlowStatus,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    rpc,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_local_engine import errors
from dex_local_engine.dispatch import Dispatcher
from dex_local_engine.engine import Engine
from dex_local_engine.store import Durability, Store
from engine_kernel_harness import reachable, running_engine, sdk_client, sdk_worker

WAIT = timedelta(seconds=60)
_LARGE = 300 * 1024


def _no_dispatch(address: str | None) -> Dispatcher:
    raise AssertionError("these Flows have no Steps to dispatch")


def _start_request(flow_id: str, note: str) -> pb.StartFlowRequest:
    return pb.StartFlowRequest(
        flow_id=flow_id,
        flow_type="Ledger",
        request_id=str(uuid.uuid4()),
        flow_start_options=pb.FlowStartOptions(
            attributes=[pb.AttributeWrite(key="note", value=pb.Value(string_value=note))],
            id_reuse_policy=pb.ID_REUSE_POLICY_ALLOW_IF_NO_RUNNING,
        ),
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "engine.db", Durability.PROCESS_CRASH_SAFE)
    yield opened
    opened.close()


async def test_closed_runs_leave_memory_and_read_back_from_the_database(store: Store) -> None:
    engine = Engine(store, _no_dispatch, closed_run_cache=4)
    await engine.recover()
    notes = {f"ledger-{n}": f"note {n}" + ("x" * _LARGE if n % 3 == 0 else "") for n in range(40)}
    run_ids = {
        flow_id: engine.start_flow(_start_request(flow_id, note)) for flow_id, note in notes.items()
    }
    assert engine.runs.in_memory == 40
    for flow_id in notes:
        engine.stop_flow(pb.StopFlowRequest(flow_id=flow_id, stop_type=pb.STOP_TYPE_CANCEL))
    # Only the cache of recently closed runs stays.
    assert engine.runs.in_memory == 4
    for flow_id, note in notes.items():
        run = engine.get_run(flow_id)
        assert run.run_id == run_ids[flow_id]
        assert run.status == pb.FLOW_STATUS_CANCELED
        assert engine.blobs.resolve(run.attributes["note"]).string_value == note
        assert [e.WhichOneof("payload") for e in engine.history(run, 1, 10)] == [
            "flow_started_or_continued",
            "flow_closed",
        ]
    assert engine.runs.in_memory == 4
    records = {record.flow_id: record for record in engine.search_records()}
    assert set(records) == set(notes)
    assert {record.status for record in records.values()} == {pb.FLOW_STATUS_CANCELED}
    with pytest.raises(errors.EngineError, match="is not running"):
        engine.get_running("ledger-1")
    # A new run of a closed Flow ID (its ID reuse policy allows one) replaces it in memory.
    new_run = engine.start_flow(_start_request("ledger-1", "again"))
    assert engine.get_running("ledger-1").run_id == new_run != run_ids["ledger-1"]
    assert records["ledger-1"].run_id == run_ids["ledger-1"]
    await engine.shutdown()


class Record(Step[str]):
    def execute(self, context: dex.Context, input: str) -> StepDecision:
        Ledger.entry.set(context, input)
        return dex.force_complete(f"recorded {len(input)}")


class Ledger(Flow[str]):
    entry = Attribute("entry", str)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Record())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.entry)

    @rpc
    def read(self, context: dex.Context) -> RPCResult[str]:
        return RPCResult(self.entry.get(context) or "")


async def _read_closed(engine_address: str, client: dex.AsyncClient, flow: Ledger) -> None:
    entry = "e" * _LARGE
    result = await client.wait_for_flow("ledger", timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    assert result.completions[0].decode(str) == f"recorded {_LARGE}"
    # A query RPC on the closed Flow runs on a Worker with its state loaded from the database.
    assert await client.invoke_rpc(flow.read, "ledger") == entry
    page = await client.search_flows('ExecutionStatus = "Completed"', 10)
    assert [found.flow_id for found in page.flows] == ["ledger"]
    async with grpc.aio.insecure_channel(engine_address) as channel:
        stub = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        attributes = await stub.GetAttributes(
            pb.GetAttributesRequest(flow_id="ledger", all_keys=True)
        )
        history = await stub.GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id="ledger"))
    assert [kv.key for kv in attributes.attributes] == ["entry"]
    assert attributes.attributes[0].value.string_value == "e" * _LARGE
    kinds = [event.WhichOneof("payload") for event in history.events]
    assert kinds[0] == "flow_started_or_continued" and kinds[-1] == "flow_closed"


async def test_a_closed_flow_is_read_from_sqlite_by_an_engine_that_keeps_none() -> None:
    flow = Ledger()
    async with running_engine("--closed-run-cache", "0") as engine:
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await client.start_flow(flow, "ledger", "e" * _LARGE)
            await _read_closed(engine.address, client, flow)
        engine.kill()
        engine.start()
        async with sdk_client(engine, [flow]) as client, sdk_worker(engine, [flow]):
            await reachable(client)
            await _read_closed(engine.address, client, flow)
