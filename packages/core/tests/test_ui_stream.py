"""``dex_agents.ui_stream`` against the real engine: SSE frames, resume tokens, the snapshot JSON,
keep-alives and the synchronous variants, with a Stepwise agent whose model streams word by word."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from dex import (
    AsyncClient,
    BlobCacheConfig,
    Client,
    ClientOptions,
    DexServiceError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    Registry,
    StreamMessage,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import (
    AgentEvent,
    AgentSessionClient,
    AgentState,
    ConfigurationTypeError,
    DexAgentsError,
    SessionFlowTypeError,
    ToolEffect,
    agent_codec_registry,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelOutputWriter,
    ModelRequest,
    ModelResponse,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.testing import (
    EngineLogs,
    EngineProcess,
    has_pending_interrupts,
    in_process_worker,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.ui_stream import (
    AGENT_EVENT_STREAM_HEADERS,
    KEEP_ALIVE_FRAME,
    AgentEventStreamSnapshot,
    InvalidAgentEventResumeTokenError,
    read_agent_event_stream_snapshot,
    read_agent_event_stream_snapshot_sync,
    stream_agent_event_frames,
    stream_agent_event_frames_sync,
)
from dex_agents.ui_stream._agent_event_stream_positions import resume_token_before_open_turns

_ONE_SECOND = timedelta(seconds=1)
_FINISHED = frozenset({"turn_completed", "turn_failed", "turn_steered", "turn_cancelled"})
_CHATTY_WORDS = 450
"""More text deltas than one listing page holds, so the snapshot pages back to the turn start."""


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return {"order_id": order_id, "status": "delivered"}


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refunded order {order_id}"


def _reply(request: ModelRequest) -> ScriptedModelReply:
    text = ScriptedModelClient.user_texts(request)[-1]
    results = ScriptedModelClient.tool_results(request)
    if results:
        return ScriptedModelReply(text=f"Done: {results[-1].output}")
    if text.startswith("refund"):
        return ScriptedModelReply(
            text="I will refund order 7.",
            tool_calls=[ScriptedToolCall("refund_order", {"order_id": "7"})],
        )
    if text.startswith("chatty"):
        words = " ".join(f"w{number}" for number in range(_CHATTY_WORDS))
        return ScriptedModelReply(
            text=words, tool_calls=[ScriptedToolCall("refund_order", {"order_id": "7"})]
        )
    if text.startswith("order"):
        return ScriptedModelReply(
            text="Looking up order 7.",
            tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})],
        )
    return ScriptedModelReply(text=f"You said: {text}")


class _WordByWordModel:
    """The scripted model, its text streamed one word per ``text_delta``, as a provider does."""

    def __init__(self) -> None:
        self._inner = ScriptedModelClient(_reply)

    async def call_model(self, request: ModelRequest, output: ModelOutputWriter) -> ModelResponse:
        return await self._inner.call_model(request, _WordSplitter(output))

    def estimate_input_tokens(self, request: ModelRequest) -> int:
        return self._inner.estimate_input_tokens(request)


@dataclass(frozen=True)
class _WordSplitter:
    output: ModelOutputWriter

    def write_text_delta(self, text: str) -> None:
        for index, word in enumerate(text.split(" ")):
            self.output.write_text_delta(word if index == 0 else f" {word}")

    def write_reasoning_delta(self, text: str) -> None:
        self.output.write_reasoning_delta(text)


FLOW = stepwise_agent_session_flow(
    AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=_WordByWordModel(),
        tools=[lookup_order, refund_order],
    ),
    flow_type="UiStreamAgent",
)


@dataclass(frozen=True)
class _Stack:
    server_address: str
    client: AsyncClient
    sessions: AgentSessionClient
    tmp_path: Path
    session_prefix: str = ""

    def scoped(self, session_id: str) -> str:
        """``session_id`` as the engine sees it (under the test's prefix on the shared engine)."""
        return self.session_prefix + session_id


@pytest.fixture
async def stack(
    dex_in_process_worker: InProcessWorkerFactory, tmp_path: Path
) -> AsyncIterator[_Stack]:
    async with dex_in_process_worker([FLOW]) as dex:
        yield _Stack(
            dex.server_address, dex.client, dex.sessions(FLOW), tmp_path, dex.session_prefix
        )


@pytest.fixture
async def stack_without_streams(tmp_path: Path) -> AsyncIterator[_Stack]:
    """An engine like a Dex Server with ``streamStore.backend: disabled``."""
    engine = await EngineProcess.start_local(
        tmp_path / "engine.db", EngineLogs.in_directory(tmp_path), stream_store_disabled=True
    )
    try:
        async with in_process_worker([FLOW], engine.server_address, tmp_path / "cache") as dex:
            yield _Stack(engine.server_address, dex.client, dex.sessions(FLOW), tmp_path)
    finally:
        await engine.stop()


def _sync_client(stack: _Stack) -> tuple[Client, Callable[[], None]]:
    cache = open_blob_cache(BlobCacheConfig(str(stack.tmp_path / "sync-cache"), 1 << 24))
    client = Client(
        Registry([FLOW], agent_codec_registry(), allow_async_handlers=True),
        cache,
        ClientOptions(server_address=stack.server_address, worker_target=WorkerTarget(pull=True)),
    )

    def close() -> None:
        client.close()
        cache.close()

    return client, close


@dataclass(frozen=True)
class _Frame:
    id: str
    event: AgentEvent
    data: dict[str, object]


def _parse(frame: str) -> _Frame:
    """One event frame, checked to be exactly ``id: ...``, ``data: ...`` and a blank line."""
    assert frame.endswith("\n\n"), frame
    lines = frame[:-2].split("\n")
    assert [line.split(": ", 1)[0] for line in lines] == ["id", "data"], frame
    data = json.loads(lines[1].removeprefix("data: "))
    assert isinstance(data, dict)
    assert isinstance(data["payload"], str), "payload travels as JSON text"
    return _Frame(lines[0].removeprefix("id: "), AgentEvent.from_json(data), data)


async def _frames_through(
    frames: AsyncIterator[str], is_last: Callable[[_Frame], bool]
) -> list[_Frame]:
    """Event frames up to and including the first that ``is_last`` accepts; keep-alives skipped."""
    collected: list[_Frame] = []

    async def collect() -> None:
        async for frame in frames:
            if frame == KEEP_ALIVE_FRAME:
                continue
            collected.append(_parse(frame))
            if is_last(collected[-1]):
                return

    await asyncio.wait_for(collect(), 30)
    return collected


def _finishes(turn_id: str) -> Callable[[_Frame], bool]:
    return lambda frame: frame.event.turn_id == turn_id and frame.event.type in _FINISHED


async def _all_events(stack: _Stack, session_id: str) -> list[tuple[str, AgentEvent]]:
    page = await stack.client.list_stream_messages(
        stack.scoped(session_id), FLOW.agent_events, 1000
    )
    return [(message.resume_token, message.value) for message in reversed(page.messages)]


async def test_frames_carry_the_resume_token_and_the_event_wire_json(stack: _Stack) -> None:
    await stack.sessions.start_session("s", "order 7")
    frames = await stream_agent_event_frames(stack.client, FLOW, stack.scoped("s"))
    received = await _frames_through(frames, _finishes("turn-1"))
    await frames.aclose()

    types = [frame.event.type for frame in received]
    assert types[0] == "turn_started" and types[-1] == "turn_completed"
    assert {"tool_call_deferred", "tool_call_started", "tool_call_finished"} <= set(types)
    texts = [
        str(frame.event.payload_json()["text"])
        for frame in received
        if frame.event.type == "text_delta"
    ]
    assert (
        "".join(texts) == "Looking up order 7.Done: " + '{"order_id": "7", "status": "delivered"}'
    )
    assert len(texts) > 4, "the model streamed word by word"
    # The frames are the Stream, in order, each id the message's own resume token.
    stored = await _all_events(stack, "s")
    assert [(frame.id, frame.event) for frame in received] == stored
    first = received[0]
    assert set(first.data) == {"type", "turn_id", "step_execution_id", "attempt", "payload"}
    assert first.data["turn_id"] == "turn-1" and first.data["attempt"] == 1
    assert json.loads(str(first.data["payload"])) == {"sequence": 1}
    assert dict(AGENT_EVENT_STREAM_HEADERS)["Content-Type"].startswith("text/event-stream")


async def test_reconnecting_with_the_last_id_neither_repeats_nor_misses_an_event(
    stack: _Stack,
) -> None:
    await stack.sessions.start_session("s", "order 7")
    await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
    assert await stack.sessions.send_user_message("s", "hello again")
    await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(2))
    stored = await _all_events(stack, "s")
    assert len(stored) > 9

    # An EventSource whose connection drops after every third event and reconnects with
    # Last-Event-ID set to the last frame's id.
    received: list[tuple[str, AgentEvent]] = []
    while len(received) < len(stored):
        last_event_id = received[-1][0] if received else ""
        frames = await stream_agent_event_frames(
            stack.client, FLOW, stack.scoped("s"), resume_token=last_event_id
        )
        batch = await _frames_through(frames, _counting(min(3, len(stored) - len(received))))
        await frames.aclose()
        received.extend((frame.id, frame.event) for frame in batch)
    assert received == stored


def _counting(count: int) -> Callable[[_Frame], bool]:
    seen: list[_Frame] = []

    def is_last(frame: _Frame) -> bool:
        seen.append(frame)
        return len(seen) >= count

    return is_last


async def test_an_empty_long_poll_yields_a_keep_alive_comment(stack: _Stack) -> None:
    await stack.sessions.start_session("s", "")
    snapshot = await read_agent_event_stream_snapshot(stack.client, FLOW, stack.scoped("s"))
    frames = await stream_agent_event_frames(
        stack.client,
        FLOW,
        stack.scoped("s"),
        resume_token=snapshot.resume_token,
        poll_timeout=_ONE_SECOND,
    )
    assert await asyncio.wait_for(anext(frames), 30) == KEEP_ALIVE_FRAME
    assert KEEP_ALIVE_FRAME.startswith(":") and KEEP_ALIVE_FRAME.endswith("\n\n")
    # The stream goes on after it: the next message's events follow.
    assert await stack.sessions.send_user_message("s", "hi")
    received = await _frames_through(frames, _finishes("turn-1"))
    await frames.aclose()
    assert received[0].event.type == "turn_started"


async def test_a_refused_token_raises_before_anything_is_read(stack: _Stack) -> None:
    await stack.sessions.start_session("mine", "hello")
    await stack.sessions.start_session("theirs", "hello")
    await wait_for_agent_snapshot(stack.sessions, "theirs", turn_ended(1))
    theirs = (await _all_events(stack, "theirs"))[0][0]
    mine = (await _all_events(stack, "mine"))[0][0]
    payload = mine.split(".")[0]
    scope = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**scope, "i": "1-0"}).encode()).decode()
    for token in (theirs, forged, f"{forged}.{mine.split('.')[1]}", "%%garbled%%"):
        with pytest.raises(InvalidAgentEventResumeTokenError) as raised:
            await stream_agent_event_frames(
                stack.client, FLOW, stack.scoped("mine"), resume_token=token
            )
        error = raised.value
        assert isinstance(error, DexAgentsError) and isinstance(error, ValueError)
        assert error.session_id == stack.scoped("mine")
        assert f"'{stack.scoped('mine')}'" in str(error) and "snapshot" in str(error)
    # A valid token of the same session still reads on.
    frames = await stream_agent_event_frames(
        stack.client, FLOW, stack.scoped("mine"), resume_token=mine
    )
    assert _parse(await anext(frames)).event.turn_id == "turn-1"
    await frames.aclose()


async def test_the_snapshot_json_leaves_out_what_only_the_steps_use(stack: _Stack) -> None:
    await stack.sessions.start_session("s", "refund order 7", session_settings={"model": "m1"})
    await wait_for_agent_snapshot(stack.sessions, "s", has_pending_interrupts)
    value = await read_agent_event_stream_snapshot(stack.client, FLOW, stack.scoped("s"))
    assert isinstance(value, AgentEventStreamSnapshot)
    assert value.snapshot.messages[0].framework_item, "the server keeps the whole snapshot"

    data = value.to_json()
    assert set(data) == {"snapshot", "resume_token"}
    assert data["resume_token"] == value.resume_token
    snapshot = data["snapshot"]
    assert isinstance(snapshot, dict)
    full = value.snapshot.to_json()
    assert set(full) == set(snapshot)
    messages = snapshot["messages"]
    tool_calls = snapshot["tool_calls"]
    assert isinstance(messages, list) and isinstance(tool_calls, list) and tool_calls
    for message, full_message in zip(messages, full["messages"], strict=True):  # type: ignore[arg-type]
        assert isinstance(message, dict) and isinstance(full_message, dict)
        assert set(full_message) - set(message) == {"framework_item"}
    private = {
        "tool_source_reference",
        "trace_context",
        "input_continuation",
        "input_answers",
        "task_answer_pending",
    }
    for call, full_call in zip(tool_calls, full["tool_calls"], strict=True):  # type: ignore[arg-type]
        assert isinstance(call, dict) and isinstance(full_call, dict)
        assert set(full_call) - set(call) == private
        assert call["status"] == "awaiting_approval" and call["tool_name"] == "refund_order"
    assert snapshot["session_settings"] == {"model": "m1"}
    assert snapshot["pending_interrupts"] == full["pending_interrupts"]
    json.dumps(data)  # plain JSON, ready for any web framework


async def test_the_snapshot_token_replays_the_active_turn(stack: _Stack) -> None:
    await stack.sessions.start_session("s", "order 7")
    await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
    assert await stack.sessions.send_user_message("s", "chatty refund")
    await wait_for_agent_snapshot(stack.sessions, "s", has_pending_interrupts)

    value = await read_agent_event_stream_snapshot(stack.client, FLOW, stack.scoped("s"))
    assert value.snapshot.state is not None and value.snapshot.state.active_turn_id == "turn-2"
    frames = await stream_agent_event_frames(
        stack.client, FLOW, stack.scoped("s"), resume_token=value.resume_token
    )
    replayed = await _frames_through(frames, lambda frame: frame.event.type == "interrupt_raised")
    await frames.aclose()
    # The whole of turn-2, more events than one listing page, and nothing of turn-1.
    assert replayed[0].event.type == "turn_started"
    assert {frame.event.turn_id for frame in replayed} == {"turn-2"}
    deltas = [frame for frame in replayed if frame.event.type == "text_delta"]
    assert len(deltas) == _CHATTY_WORDS
    turn_2 = [
        (token, event)
        for token, event in await _all_events(stack, "s")
        if event.turn_id == "turn-2"
    ]
    assert [(frame.id, frame.event) for frame in replayed] == turn_2


async def test_the_snapshot_token_of_an_idle_session_continues_with_the_next_event(
    stack: _Stack,
) -> None:
    await stack.sessions.start_session("s", "order 7")
    await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
    value = await read_agent_event_stream_snapshot(stack.client, FLOW, stack.scoped("s"))
    assert value.resume_token == (await _all_events(stack, "s"))[-1][0]
    frames = await stream_agent_event_frames(
        stack.client, FLOW, stack.scoped("s"), resume_token=value.resume_token
    )
    assert await stack.sessions.send_user_message("s", "hello again")
    received = await _frames_through(frames, _finishes("turn-2"))
    await frames.aclose()
    assert {frame.event.turn_id for frame in received} == {"turn-2"}
    assert received[0].event.type == "turn_started"


async def test_a_session_without_events_opens_from_the_head(stack: _Stack) -> None:
    await stack.sessions.start_session("s", "")
    await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(0))
    value = await read_agent_event_stream_snapshot(stack.client, FLOW, stack.scoped("s"))
    assert value.resume_token == ""
    assert value.snapshot.state is not None and value.snapshot.state.turn_count == 0


async def test_the_sync_variants_read_the_same_snapshot_and_frames(stack: _Stack) -> None:
    await stack.sessions.start_session("s", "refund order 7")
    await wait_for_agent_snapshot(stack.sessions, "s", has_pending_interrupts)
    expected = await read_agent_event_stream_snapshot(stack.client, FLOW, stack.scoped("s"))
    stored = await _all_events(stack, "s")
    sync_client, close = _sync_client(stack)

    def read_synchronously() -> tuple[AgentEventStreamSnapshot, list[str], list[str]]:
        value = read_agent_event_stream_snapshot_sync(sync_client, FLOW, stack.scoped("s"))
        frames = stream_agent_event_frames_sync(
            sync_client,
            FLOW,
            stack.scoped("s"),
            resume_token=stored[0][0],
            poll_timeout=_ONE_SECOND,
        )
        # Every event after the first, then a keep-alive once the Stream has no more.
        after_first = [next(frames) for _ in range(len(stored))]
        frames.close()
        with pytest.raises(InvalidAgentEventResumeTokenError):
            stream_agent_event_frames_sync(
                sync_client, FLOW, stack.scoped("s"), resume_token="garbled"
            )
        with pytest.raises(ConfigurationTypeError):
            read_agent_event_stream_snapshot_sync(sync_client, object(), "s")  # type: ignore[arg-type]
        return value, after_first[:-1], after_first[-1:]

    try:
        value, frames, tail = await asyncio.to_thread(read_synchronously)
    finally:
        close()
    assert value.to_json() == expected.to_json()
    assert [(frame.id, frame.event) for frame in map(_parse, frames)] == stored[1:]
    assert tail == [KEEP_ALIVE_FRAME]


async def _turn_completes_without_events(stack: _Stack) -> None:
    await stack.sessions.start_session("s", "order 7")
    snapshot = await wait_for_agent_snapshot(stack.sessions, "s", turn_ended(1))
    assert snapshot.messages[0].role == "user"
    assert snapshot.messages[-1].text == 'Done: {"order_id": "7", "status": "delivered"}'
    # The session's Steps wrote their events; the engine kept none of them.
    with pytest.raises(DexServiceError) as raised:
        await stack.client.list_stream_messages(stack.scoped("s"), FLOW.agent_events, 10)
    assert raised.value.code is grpc.StatusCode.FAILED_PRECONDITION


async def test_without_a_stream_store_the_snapshot_has_an_empty_token_and_frames_keep_alive(
    stack_without_streams: _Stack,
) -> None:
    stack = stack_without_streams
    await _turn_completes_without_events(stack)
    value = await read_agent_event_stream_snapshot(stack.client, FLOW, stack.scoped("s"))
    assert value.resume_token == ""
    assert value.snapshot.state is not None and value.snapshot.state.turn_count == 1
    assert value.to_json()["resume_token"] == ""
    snapshot_json = value.to_json()["snapshot"]
    assert isinstance(snapshot_json, dict) and isinstance(snapshot_json["messages"], list)
    assert len(snapshot_json["messages"]) == len(value.snapshot.messages) > 2

    frames = await stream_agent_event_frames(
        stack.client,
        FLOW,
        stack.scoped("s"),
        resume_token=value.resume_token,
        poll_timeout=_ONE_SECOND,
    )
    two = [await asyncio.wait_for(anext(frames), 30) for _ in range(2)]
    await frames.aclose()
    assert two == [KEEP_ALIVE_FRAME, KEEP_ALIVE_FRAME]
    # No token can be valid: the browser is sent back to the snapshot, whose token is empty.
    with pytest.raises(InvalidAgentEventResumeTokenError, match="Stream Store is disabled"):
        await stream_agent_event_frames(
            stack.client, FLOW, stack.scoped("s"), resume_token="token-1"
        )


async def test_without_a_stream_store_the_sync_variants_do_the_same(
    stack_without_streams: _Stack,
) -> None:
    stack = stack_without_streams
    await _turn_completes_without_events(stack)
    sync_client, close = _sync_client(stack)

    def read_synchronously() -> tuple[AgentEventStreamSnapshot, list[str]]:
        value = read_agent_event_stream_snapshot_sync(sync_client, FLOW, stack.scoped("s"))
        frames = stream_agent_event_frames_sync(
            sync_client,
            FLOW,
            stack.scoped("s"),
            resume_token=value.resume_token,
            poll_timeout=_ONE_SECOND,
        )
        two = [next(frames) for _ in range(2)]
        frames.close()
        with pytest.raises(InvalidAgentEventResumeTokenError, match="Stream Store is disabled"):
            stream_agent_event_frames_sync(
                sync_client, FLOW, stack.scoped("s"), resume_token="token-1"
            )
        return value, two

    try:
        value, two = await asyncio.wait_for(asyncio.to_thread(read_synchronously), 30)
    finally:
        close()
    assert value.resume_token == ""
    assert (
        value.to_json()
        == (await read_agent_event_stream_snapshot(stack.client, FLOW, stack.scoped("s"))).to_json()
    )
    assert two == [KEEP_ALIVE_FRAME, KEEP_ALIVE_FRAME]


async def test_arguments_are_checked(stack: _Stack) -> None:
    with pytest.raises(ConfigurationTypeError, match="AgentSessionFlow"):
        await read_agent_event_stream_snapshot(stack.client, object(), "s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="whole number of seconds"):
        await stream_agent_event_frames(
            stack.client, FLOW, stack.scoped("s"), poll_timeout=timedelta(milliseconds=500)
        )


def test_the_token_skips_every_turn_the_snapshot_does_not_show_finished() -> None:
    """A Step writes its events before it commits: a listed event can belong to a turn that the
    snapshot, read just after, does not show yet, and that turn is replayed too."""

    def listed(*turn_ids: str | None) -> list[StreamMessage[AgentEvent]]:
        created = datetime(2026, 1, 1, tzinfo=UTC)
        messages = [
            StreamMessage(
                AgentEvent("text_delta", turn_id, "RunModel-1", 1), f"t{index}", created, ""
            )
            for index, turn_id in enumerate(turn_ids)
        ]
        return messages[::-1]  # newest first, as ListStreamMessages pages

    idle_after_1 = AgentState(turn_count=1)
    active_2 = AgentState(active_turn_id="turn-2", turn_count=2)
    assert resume_token_before_open_turns(listed("turn-1", "turn-1"), idle_after_1) == "t1"
    # turn-2 started in a Step that had not committed when the snapshot was read.
    assert resume_token_before_open_turns(listed("turn-1", "turn-2"), idle_after_1) == "t0"
    assert resume_token_before_open_turns(listed("turn-1", "turn-2", "turn-2"), active_2) == "t0"
    assert resume_token_before_open_turns(listed(None, "turn-2"), active_2) == "t0"
    # Every listed event is of an open turn: the caller looks further back.
    assert resume_token_before_open_turns(listed("turn-2", "turn-2"), active_2) is None
    assert resume_token_before_open_turns(listed("turn-1"), None) is None
    assert resume_token_before_open_turns([], idle_after_1) is None


OTHER_FLOW = stepwise_agent_session_flow(
    AgentDefinition(name="other", instructions="Another team's agent.", model=_WordByWordModel()),
    flow_type="OtherUiStreamAgent",
)


async def test_the_helpers_serve_only_sessions_of_their_flow_type(tmp_path: Path) -> None:
    engine = await EngineProcess.start_local(
        tmp_path / "engine.db", EngineLogs.in_directory(tmp_path)
    )
    try:
        flows = [FLOW, OTHER_FLOW]
        async with in_process_worker(flows, engine.server_address, tmp_path / "cache") as dex:
            await dex.sessions(OTHER_FLOW).start_session("theirs", "secret plans")
            await wait_for_agent_snapshot(dex.sessions(OTHER_FLOW), "theirs", turn_ended(1))
            client = dex.client
            # Read through this Flow's helpers, another type's session is refused, even with
            # the empty token that would stream its events from the oldest one.
            with pytest.raises(SessionFlowTypeError) as refused:
                await read_agent_event_stream_snapshot(client, FLOW, "theirs")
            assert isinstance(refused.value, FlowNotActiveOrNotFoundError)
            assert "'OtherUiStreamAgent'" in str(refused.value)
            with pytest.raises(SessionFlowTypeError):
                await stream_agent_event_frames(client, FLOW, "theirs")
            # An unknown ID is refused at once instead of keeping alive forever.
            with pytest.raises(FlowNotFoundError):
                await read_agent_event_stream_snapshot(client, FLOW, "nobody")
            with pytest.raises(FlowNotFoundError):
                await stream_agent_event_frames(client, FLOW, "nobody")
            # The session's own Flow reads it.
            value = await read_agent_event_stream_snapshot(client, OTHER_FLOW, "theirs")
            assert value.snapshot.messages[0].text == "secret plans"
            frames = await stream_agent_event_frames(client, OTHER_FLOW, "theirs")
            assert _parse(await anext(frames)).event.type == "turn_started"
            await frames.aclose()
            await _sync_variants_refuse_the_same(tmp_path, engine.server_address)
    finally:
        await engine.stop()


async def _sync_variants_refuse_the_same(tmp_path: Path, server_address: str) -> None:
    cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "sync-scope-cache"), 1 << 24))
    client = Client(
        Registry([FLOW, OTHER_FLOW], agent_codec_registry(), allow_async_handlers=True),
        cache,
        ClientOptions(server_address=server_address, worker_target=WorkerTarget(pull=True)),
    )

    def refused() -> list[type[Exception]]:
        errors: list[type[Exception]] = []
        for call in (
            lambda: read_agent_event_stream_snapshot_sync(client, FLOW, "theirs"),
            lambda: stream_agent_event_frames_sync(client, FLOW, "theirs"),
            lambda: read_agent_event_stream_snapshot_sync(client, FLOW, "nobody"),
            lambda: stream_agent_event_frames_sync(client, FLOW, "nobody"),
        ):
            try:
                call()
            except (SessionFlowTypeError, FlowNotFoundError) as error:
                errors.append(type(error))
        return errors

    try:
        errors = await asyncio.to_thread(refused)
    finally:
        client.close()
        cache.close()
    assert errors == [SessionFlowTypeError] * 2 + [FlowNotFoundError] * 2
