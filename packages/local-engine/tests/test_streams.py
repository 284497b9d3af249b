"""Stream semantics seen through the real SDK client, against StreamStore served over gRPC."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from dex import (
    AsyncClient,
    BlobCacheConfig,
    ClientOptions,
    DexServiceError,
    Flow,
    LongPollTimeoutError,
    PersistenceSchema,
    Registry,
    Stream,
    open_blob_cache,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_local_engine.errors import guard_servicer_method
from dex_local_engine.streams import StreamStore, StreamStoreBackend
from engine_test_support import EngineProcess, GateBoard, WorkerLauncher, pull_client
from google.protobuf import empty_pb2
from stream_sample_flows import CHATTER, CHATTER_REGISTRY, chatter_registry

PROGRESS = Stream("Progress", str, 1 << 20)
TINY = Stream("Tiny", str, 2_000)


class ChatFlow(Flow[None]):
    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(PROGRESS, TINY)


class _StreamService(dex_pb2_grpc.FlowServiceServicer):
    def __init__(self, store: StreamStore) -> None:
        self.store = store

    @guard_servicer_method
    async def WriteStream(
        self, request: pb.WriteStreamRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> empty_pb2.Empty:
        self.store.write(request)
        return empty_pb2.Empty()

    @guard_servicer_method
    async def ReadStream(
        self, request: pb.ReadStreamRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ReadStreamResponse:
        return await self.store.read(request, time_remaining=context.time_remaining())

    @guard_servicer_method
    async def ListStreamMessages(
        self, request: pb.ListStreamMessagesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListStreamMessagesResponse:
        return self.store.list(request)


@pytest.fixture
async def store_and_client(tmp_path: Path) -> AsyncIterator[tuple[StreamStore, AsyncClient]]:
    async with _serving(StreamStore(default_read_wait_seconds=1.0), tmp_path) as served:
        yield served


@contextlib.asynccontextmanager
async def _serving(
    store: StreamStore, tmp_path: Path
) -> AsyncIterator[tuple[StreamStore, AsyncClient]]:
    server = grpc.aio.server()
    dex_pb2_grpc.add_FlowServiceServicer_to_server(_StreamService(store), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "blobs"), 1 << 20))
    options = ClientOptions(server_address=f"127.0.0.1:{port}")
    try:
        async with AsyncClient(Registry([ChatFlow()]), cache, options) as client:
            yield store, client
    finally:
        await server.stop(None)


async def test_resume_tokens_read_each_message_once_in_order(
    store_and_client: tuple[StreamStore, AsyncClient],
) -> None:
    _, client = store_and_client
    for text in ("a", "b", "c"):
        await client.write_stream("f1", PROGRESS, "ui", text)
    token = ""
    seen = []
    for _ in range(3):
        message = await client.read_stream("f1", PROGRESS, token)
        seen.append((message.value, message.source))
        token = message.resume_token
    assert seen == [("a", "ui"), ("b", "ui"), ("c", "ui")]
    with pytest.raises(LongPollTimeoutError):
        await client.read_stream("f1", PROGRESS, token, timedelta(seconds=1))


async def test_read_long_polls_until_a_later_write(
    store_and_client: tuple[StreamStore, AsyncClient],
) -> None:
    _, client = store_and_client
    await client.write_stream("f2", PROGRESS, "ui", "first")
    first = await client.read_stream("f2", PROGRESS)
    reader = asyncio.create_task(
        client.read_stream("f2", PROGRESS, first.resume_token, timedelta(seconds=10))
    )
    await asyncio.sleep(0.2)
    assert not reader.done()
    await client.write_stream("f2", PROGRESS, "ui", "second")
    second = await reader
    assert second.value == "second"
    assert second.created_time >= first.created_time


async def test_a_step_write_has_the_step_execution_as_source(
    store_and_client: tuple[StreamStore, AsyncClient],
) -> None:
    store, client = store_and_client
    frame = pb.StepStreamWrite(
        stream_name="Progress",
        stream_capacity_bytes=1 << 20,
        value=pb.Value(string_value="thinking"),
    )
    assert store.write_from_step("ChatFlow", "f3", "RunModel-1", frame)
    message = await client.read_stream("f3", PROGRESS)
    assert (message.value, message.source) == ("thinking", "#RunModel-1")


async def test_token_of_another_flow_or_garbage_is_rejected(
    store_and_client: tuple[StreamStore, AsyncClient],
) -> None:
    _, client = store_and_client
    await client.write_stream("f4", PROGRESS, "ui", "x")
    await client.write_stream("f5", PROGRESS, "ui", "y")
    token_of_f4 = (await client.read_stream("f4", PROGRESS)).resume_token
    for flow_id, token in (("f5", token_of_f4), ("f4", "not-a-token"), ("f4", "e30")):
        with pytest.raises(DexServiceError) as raised:
            await client.read_stream(flow_id, PROGRESS, token)
        assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert "invalid Stream resume token" in raised.value.detail
    with pytest.raises(DexServiceError) as raised:
        await client.read_stream("f4", TINY, token_of_f4)
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT


async def test_a_hand_made_token_is_rejected_even_for_the_right_stream(
    store_and_client: tuple[StreamStore, AsyncClient],
) -> None:
    _, client = store_and_client
    for value in ("a", "b", "c"):
        await client.write_stream("f7", PROGRESS, "ui", value)
    issued = (await client.read_stream("f7", PROGRESS)).resume_token
    payload, mac = issued.split(".")
    scope = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert scope["f"] == "f7"
    # The same scope at a position nobody was given: without the engine's MAC it is refused.
    forged_scope = {**scope, "i": "1-0"}
    forged_payload = base64.urlsafe_b64encode(json.dumps(forged_scope).encode()).decode()
    restarted = StreamStore()
    for token in (
        payload,
        f"{forged_payload.rstrip('=')}.{mac}",
        f"{payload}.{mac[:-2]}AA",
        restarted._encode_token(("ChatFlow", "f7", "Progress"), (1, 0)),
    ):
        with pytest.raises(DexServiceError) as raised:
            await client.read_stream("f7", PROGRESS, token)
        assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert "not a token this engine issued" in raised.value.detail
    second = await client.read_stream("f7", PROGRESS, issued)
    assert second.value == "b"


async def test_list_pages_newest_first_and_ends_with_empty_token(
    store_and_client: tuple[StreamStore, AsyncClient],
) -> None:
    _, client = store_and_client
    for number in range(5):
        await client.write_stream("f6", PROGRESS, "ui", f"m{number}")
    pages = []
    token = ""
    while True:
        page = await client.list_stream_messages("f6", PROGRESS, 2, token)
        pages.append([message.value for message in page.messages])
        token = page.next_page_token
        if not token:
            break
    assert pages == [["m4", "m3"], ["m2", "m1"], ["m0"]]
    empty = await client.list_stream_messages("never-written", PROGRESS, 10)
    assert (list(empty.messages), empty.next_page_token) == ([], "")


async def test_capacity_trims_oldest_messages_across_instances(
    store_and_client: tuple[StreamStore, AsyncClient],
) -> None:
    _, client = store_and_client
    for number in range(20):
        await client.write_stream(f"t{number % 2}", TINY, "ui", f"{number:03d}" + "x" * 40)
    retained = []
    for flow_id in ("t0", "t1"):
        page = await client.list_stream_messages(flow_id, TINY, 100)
        retained += [message.value[:3] for message in page.messages]
    assert 0 < len(retained) < 20
    assert sorted(retained)[-1] == "019"
    numbers = sorted(int(value) for value in retained)
    assert numbers == list(range(numbers[0], 20)), "trimming removes the oldest first"
    head = await client.read_stream("t0", TINY)
    assert int(head.value[:3]) == min(n for n in numbers if n % 2 == 0)


async def test_bad_requests_name_the_problem(
    store_and_client: tuple[StreamStore, AsyncClient],
) -> None:
    _, client = store_and_client
    with pytest.raises(DexServiceError) as raised:
        await client.write_stream("f7", PROGRESS, "ui", "x" * (101 * 1024))
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "limit is 102400" in raised.value.detail
    with pytest.raises(DexServiceError) as raised:
        await client.list_stream_messages("f7", PROGRESS, 5000)
    assert "page_size" in raised.value.detail


# --- Through the real engine: a Step writes, a Client long-polls with resume tokens -----------


@pytest.fixture
async def engine_client(engine: EngineProcess, tmp_path: Path) -> AsyncIterator[AsyncClient]:
    async with pull_client(chatter_registry(), engine.address, tmp_path) as client:
        yield client


async def test_step_writes_reach_a_long_polling_client_in_order(
    engine: EngineProcess,
    engine_client: AsyncClient,
    workers: WorkerLauncher,
    gates: GateBoard,
) -> None:
    await workers.start(CHATTER_REGISTRY, engine.address)
    gates.hold("one.after-first")
    flow = engine_client.registry.flows[0]
    await engine_client.start_flow(flow, "chat-1", "one")
    first = await engine_client.read_stream("chat-1", CHATTER, "", timedelta(seconds=30))
    assert (first.value, first.source) == ("one:0", "#Chatter-1")
    waiting = asyncio.create_task(
        engine_client.read_stream("chat-1", CHATTER, first.resume_token, timedelta(seconds=30))
    )
    await asyncio.sleep(0.2)
    assert not waiting.done(), "the read long-polls while the Step is held after its first write"
    gates.release("one.after-first")
    second = await waiting
    third = await engine_client.read_stream("chat-1", CHATTER, second.resume_token)
    assert [second.value, third.value] == ["one:1", "one:2"]
    result = await engine_client.wait_for_flow("chat-1", timedelta(seconds=30))
    assert result.single_output(str) == "one:done"
    page = await engine_client.list_stream_messages("chat-1", CHATTER, 10)
    assert [message.value for message in page.messages] == ["one:2", "one:1", "one:0"]

    await engine_client.start_flow(flow, "chat-2", "two")
    await engine_client.wait_for_flow("chat-2", timedelta(seconds=30))
    with pytest.raises(DexServiceError) as raised:
        await engine_client.read_stream("chat-2", CHATTER, first.resume_token)
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "another Stream" in raised.value.detail


async def test_a_disabled_stream_store_keeps_nothing_and_refuses_client_calls(
    tmp_path: Path,
) -> None:
    """Like Dex's ``streamStore.backend: disabled``: Step writes are dropped without failing the
    Step; Client writes, reads (whatever the token) and listings answer FAILED_PRECONDITION."""
    store = StreamStore(backend=StreamStoreBackend.DISABLED)
    async with _serving(store, tmp_path) as (_, client):
        frame = pb.StepStreamWrite(
            stream_name="Progress", stream_capacity_bytes=1 << 20, value=pb.Value(string_value="x")
        )
        assert not store.write_from_step("ChatFlow", "f1", "RunModel-1", frame)
        assert not store.write_from_step("ChatFlow", "f1", "RunModel-1", frame)
        calls = (
            client.write_stream("f1", PROGRESS, "ui", "x"),
            client.read_stream("f1", PROGRESS),
            client.read_stream("f1", PROGRESS, "not-a-token"),
            client.list_stream_messages("f1", PROGRESS, 10),
        )
        for call in calls:
            with pytest.raises(DexServiceError) as raised:
                await call
            assert raised.value.code is grpc.StatusCode.FAILED_PRECONDITION
            assert "Stream Store is disabled" in raised.value.detail
            assert "--stream-store memory" in raised.value.detail
