"""SearchFlows queries: parsing, matching, ordering, paging, and the SDK's view of the result."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from dex import (
    AsyncClient,
    BlobCacheConfig,
    ClientOptions,
    DexServiceError,
    FlowStatus,
    Registry,
    open_blob_cache,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_local_engine.errors import EngineError, guard_servicer_method
from dex_local_engine.search_query import (
    MAX_QUERY_DEPTH,
    FlowSearchRecord,
    IndexedValue,
    indexed_value_from_write,
    parse_search_query,
    search_flows,
)
from engine_test_support import EngineProcess, WorkerLauncher, pull_client
from search_sample_flows import TICKET_REGISTRY, ticket_registry

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _record(
    flow_id: str,
    *,
    flow_type: str = "AgentSession",
    status: pb.FlowStatus = pb.FLOW_STATUS_RUNNING,
    minutes: int = 0,
    active: tuple[str, ...] = (),
    attributes: dict[str, IndexedValue] | None = None,
) -> FlowSearchRecord:
    closed = status != pb.FLOW_STATUS_RUNNING
    return FlowSearchRecord(
        flow_id=flow_id,
        run_id=f"run-{flow_id}",
        flow_type=flow_type,
        status=status,
        start_time=T0 + timedelta(minutes=minutes),
        close_time=T0 + timedelta(minutes=minutes + 1) if closed else None,
        active_step_types=active,
        indexed_attributes=attributes or {},
    )


RECORDS = [
    _record("s1", active=("AwaitToolApproval", "CallTool"), minutes=1),
    _record("s2", active=("AwaitUserMessage",), minutes=2),
    _record("s3", status=pb.FLOW_STATUS_COMPLETED, minutes=3),
    _record(
        "o1",
        flow_type="Orders",
        minutes=4,
        attributes={
            "OrderStatus": IndexedValue(pb.INDEX_TYPE_KEYWORD, "paid"),
            "Attempts": IndexedValue(pb.INDEX_TYPE_INT, 3),
            "Notes": IndexedValue(pb.INDEX_TYPE_TEXT, "Customer asked for a refund"),
        },
    ),
    _record(
        "o2",
        flow_type="Orders",
        status=pb.FLOW_STATUS_FAILED,
        minutes=5,
        attributes={"OrderStatus": IndexedValue(pb.INDEX_TYPE_KEYWORD, "shipped")},
    ),
]


def _ids(query: str) -> list[str]:
    parsed = parse_search_query(query)
    return [record.flow_id for record in parsed.sorted(r for r in RECORDS if parsed(r))]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('ActiveStepTypes = "AwaitToolApproval"', ["s1"]),
        ("ActiveStepTypes = 'CallTool' OR ActiveStepTypes = 'AwaitUserMessage'", ["s2", "s1"]),
        ("FlowType = 'Orders' AND ExecutionStatus = 'Running'", ["o1"]),
        ("flowtype = 'x'", []),
        ("ExecutionStatus != 'Running'", ["o2", "s3"]),
        ("OrderStatus IN ('paid', 'shipped')", ["o2", "o1"]),
        ("OrderStatus NOT IN ('paid') AND FlowType = 'Orders'", ["o2"]),
        ("Attempts >= 3", ["o1"]),
        ("Attempts BETWEEN 1 AND 2", []),
        ("FlowId STARTS_WITH 's'", ["s3", "s2", "s1"]),
        ("OrderStatus IS NULL AND FlowType = 'Orders'", []),
        ("OrderStatus IS NOT NULL", ["o2", "o1"]),
        ("Notes = 'refund customer'", ["o1"]),
        (
            "(FlowType = 'Orders' OR ActiveStepTypes = 'CallTool') AND StartTime > '2026-11-01T00:03:30Z'",
            ["o2", "o1"],
        ),
        ("CloseTime IS NOT NULL ORDER BY StartTime ASC", ["s3", "o2"]),
        ("", ["o2", "o1", "s3", "s2", "s1"]),
        ("order by FlowId", ["o1", "o2", "s1", "s2", "s3"]),
    ],
)
def test_queries_select_the_right_runs(query: str, expected: list[str]) -> None:
    assert _ids(query) == expected


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("ActiveStepTypes = ", "end of query"),
        ("FlowType == 'x'", "'='"),
        ("FlowType = 'x' AND", "end of query"),
        ("FlowType = 'x' XOR FlowType = 'y'", "'XOR'"),
        ("FlowType 'x'", "'x'"),
        ("ExecutionStatus = 'Runing'", "unknown ExecutionStatus 'Runing'"),
        ("(FlowType = 'x'", "end of query"),
        ("FlowType = 'x' ; drop", "';'"),
        ("StartTime > 'yesterday'", "not a DATETIME value"),
    ],
)
def test_malformed_queries_name_the_bad_token(query: str, named: str) -> None:
    with pytest.raises(EngineError) as raised:
        parse_search_query(query)
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert named in raised.value.detail


def test_known_keys_reject_unknown_attributes_and_mistyped_values() -> None:
    known = {"OrderStatus": pb.INDEX_TYPE_KEYWORD, "Attempts": pb.INDEX_TYPE_INT}
    with pytest.raises(EngineError, match="unknown search attribute 'OrderStatu'"):
        parse_search_query("OrderStatu = 'paid'", known)
    with pytest.raises(EngineError, match="not a INT value"):
        parse_search_query("Attempts = 'many'", known)
    assert parse_search_query("Attempts < 5", known).matches(RECORDS[3])


def test_attribute_writes_become_search_values() -> None:
    def write(
        value: pb.Value, index_type: pb.IndexType = pb.INDEX_TYPE_UNSPECIFIED, index_key: str = ""
    ) -> pb.AttributeWrite:
        return pb.AttributeWrite(
            key="status",
            value=value,
            index_config=pb.IndexConfig(enable=True, type=index_type, index_key=index_key),
        )

    assert indexed_value_from_write(pb.AttributeWrite(key="x", value=pb.Value(int_value=1))) is None
    assert indexed_value_from_write(
        write(pb.Value(string_value="paid"), index_key="OrderStatus")
    ) == (
        "OrderStatus",
        IndexedValue(pb.INDEX_TYPE_KEYWORD, "paid"),
    )
    tags = pb.Value(obj_value=pb.EncodedObject(encoding="json", payload=b'["a","b"]'))
    assert indexed_value_from_write(write(tags, pb.INDEX_TYPE_KEYWORD_ARRAY)) == (
        "status",
        IndexedValue(pb.INDEX_TYPE_KEYWORD_ARRAY, ("a", "b")),
    )
    assert indexed_value_from_write(write(pb.Value(null_value="NULL_VALUE"))) == (
        "status",
        None,
    )


class _SearchService(dex_pb2_grpc.FlowServiceServicer):
    @guard_servicer_method
    async def SearchFlows(
        self, request: pb.SearchFlowsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.SearchFlowsResponse:
        return search_flows(RECORDS, request)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[AsyncClient]:
    server = grpc.aio.server()
    dex_pb2_grpc.add_FlowServiceServicer_to_server(_SearchService(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    options = ClientOptions(server_address=f"127.0.0.1:{port}")
    try:
        async with AsyncClient(Registry([]), cache, options) as sdk_client:
            yield sdk_client
    finally:
        await server.stop(None)


async def test_sdk_search_flows_pages_and_maps_entries(client: AsyncClient) -> None:
    first = await client.search_flows("FlowType = 'AgentSession'", 2)
    assert [entry.flow_id for entry in first.flows] == ["s3", "s2"]
    assert first.next_page_token
    second = await client.search_flows("FlowType = 'AgentSession'", 2, first.next_page_token)
    assert [entry.flow_id for entry in second.flows] == ["s1"]
    assert second.next_page_token == ""
    entry = second.flows[0]
    assert entry.status is FlowStatus.RUNNING
    assert entry.started_at == T0 + timedelta(minutes=1)
    assert entry.closed_at is None
    assert set(entry.indexed_attributes) == {"ActiveStepTypes", "FlowType"}
    assert entry.indexed_attributes["FlowType"].data == "AgentSession"
    waiting = await client.search_flows('ActiveStepTypes = "AwaitToolApproval"', 50)
    assert [entry.flow_id for entry in waiting.flows] == ["s1"]


async def test_sdk_sees_invalid_query_as_invalid_argument(client: AsyncClient) -> None:
    with pytest.raises(DexServiceError) as raised:
        await client.search_flows("ActiveStepTypes = ", 10)
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(DexServiceError) as raised:
        await client.search_flows("FlowType = 'Orders'", 10, "bogus")
    assert "next_page_token" in raised.value.detail


def test_nesting_is_bounded_so_a_deep_query_is_invalid_not_a_recursion_error() -> None:
    deepest = "(" * MAX_QUERY_DEPTH + "FlowType = 'Orders'" + ")" * MAX_QUERY_DEPTH
    assert _ids(deepest) == ["o2", "o1"]
    with pytest.raises(EngineError) as raised:
        parse_search_query("(" * 1000 + "FlowType = 'Orders'" + ")" * 1000)
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert f"nest deeper than {MAX_QUERY_DEPTH} levels" in raised.value.detail


async def test_a_huge_bad_query_gets_a_clipped_invalid_argument(client: AsyncClient) -> None:
    # The error names the bad token at the end of a 100 KB query; echoed in full it would pass
    # gRPC's metadata limit and the caller would see a transport error instead.
    query = "FlowType = '" + "x" * 100_000 + "' ;"
    with pytest.raises(DexServiceError) as raised:
        await client.search_flows(query, 10)
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "of 100,015 characters" in raised.value.detail
    assert "unexpected character ';'" in raised.value.detail
    assert len(raised.value.detail.encode()) <= 1024
    with pytest.raises(DexServiceError) as raised:
        await client.search_flows("(" * 1000 + "FlowType = 'Orders'" + ")" * 1000, 10)
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT


# --- Through the real engine -------------------------------------------------------------------


async def _search_ids(client: AsyncClient, query: str) -> list[str]:
    page = await client.search_flows(query, 100)
    return sorted(entry.flow_id for entry in page.flows)


async def _eventually_ids(client: AsyncClient, query: str, expected: list[str]) -> list[str]:
    """Search until the result is ``expected`` (Steps run asynchronously) or 30 s pass."""
    found: list[str] = []
    for _ in range(300):
        found = await _search_ids(client, query)
        if found == expected:
            break
        await asyncio.sleep(0.1)
    return found


async def test_sessions_waiting_for_a_person_are_found_by_active_step_type(
    engine: EngineProcess, workers: WorkerLauncher, tmp_path: Path
) -> None:
    await workers.start(TICKET_REGISTRY, engine.address)
    async with pull_client(ticket_registry(), engine.address, tmp_path) as client:
        flow = client.registry.flows[0]
        for flow_id in ("t1", "t2"):
            await client.start_flow(flow, flow_id, f"title {flow_id}")
        waiting = 'ActiveStepTypes = "AwaitApproval"'
        assert await _eventually_ids(client, waiting, ["t1", "t2"]) == ["t1", "t2"]
        assert await _search_ids(client, "TicketStatus = 'open'") == ["t1", "t2"]

        await client.invoke_rpc(flow.approve, "t1", "alice")  # type: ignore[attr-defined]
        result = await client.wait_for_flow("t1", timedelta(seconds=30))
        assert result.status is FlowStatus.COMPLETED
        assert await _search_ids(client, waiting) == ["t2"]
        assert await _search_ids(client, "TicketStatus = 'approved'") == ["t1"]
        assert await _search_ids(
            client, "ExecutionStatus = 'Completed' AND FlowType = 'TicketFlow'"
        ) == ["t1"]
        with pytest.raises(DexServiceError) as raised:
            await client.search_flows("TicketStatu = 'open'", 10)
        assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert "TicketStatu" in raised.value.detail
