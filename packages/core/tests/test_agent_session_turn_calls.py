"""Turn-level client calls against the real engine: run_turn, wait_for_turn, stream_events.

A Stepwise support agent with a scripted model looks an order up (a read tool), refunds it (a
write that needs approval) when asked, fails when asked to crash, and waits on a gate when asked
to hang. Every test runs a real engine and a pull Worker in this process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from agent_session_test_support import record_rpc_outputs
from dex import (
    AsyncClient,
    BlobCacheConfig,
    Client,
    ClientOptions,
    FlowAlreadyStartedError,
    Registry,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import (
    AgentEventType,
    AgentMessage,
    AgentSessionClient,
    AgentSessionFlow,
    AgentToolCallStatus,
    BuiltInTool,
    ConfigurationError,
    InterruptKind,
    RunModelLimit,
    SyncAgentSessionClient,
    ToolEffect,
    TurnResult,
    TurnStatus,
    TurnTimeoutError,
    agent_codec_registry,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    function_tool,
    stepwise_agent_session_flow,
    stepwise_agent_session_options,
)
from dex_agents.testing import InProcessWorker
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

# Set anew by the ``stack`` fixture: an Event binds to the first loop that waits on it, and each
# test has its own loop, so a shared one made every later slow_lookup attempt fail and retry.
_GATE = asyncio.Event()
_SLOW_STARTED = asyncio.Event()


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id} was delivered"


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refunded order {order_id}"


@function_tool(effect=ToolEffect.READ)
async def slow_lookup(order_id: str) -> str:
    """Look up an order slowly: waits until the test opens the gate."""
    _SLOW_STARTED.set()
    await _GATE.wait()
    return f"order {order_id} found late"


def _reply(request: ModelRequest) -> ScriptedModelReply:
    text = ScriptedModelClient.user_texts(request)[-1]
    results = ScriptedModelClient.tool_results(request)
    if "crash" in text:
        raise RuntimeError("the model provider is down")
    if "ask" in text and not results:
        return ScriptedModelReply(
            tool_calls=[ScriptedToolCall("ask_user", {"question": "Which order?"})]
        )
    if not results:
        tool = "slow_lookup" if "hang" in text else "lookup_order"
        return ScriptedModelReply(
            text="Looking it up.", tool_calls=[ScriptedToolCall(tool, {"order_id": "7"})]
        )
    if "refund" in text and len(results) == 1:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("refund_order", {"order_id": "7"})])
    return ScriptedModelReply(text=f"Done: {results[-1].output}")


def _flow() -> AgentSessionFlow:
    agent = AgentDefinition(
        name="support",
        instructions="You help with orders.",
        model=ScriptedModelClient(_reply),
        tools=[lookup_order, refund_order, slow_lookup],
        built_in_tools=frozenset({BuiltInTool.ASK_USER}),
    )
    options = replace(
        stepwise_agent_session_options(agent), run_model_limit=RunModelLimit(maximum_attempts=1)
    )
    return stepwise_agent_session_flow(agent, flow_type="TurnCallsAgent", options=options)


@dataclass(frozen=True)
class _Stack:
    sessions: AgentSessionClient
    client: AsyncClient
    calls: dict[str, int]
    dex: InProcessWorker


@pytest.fixture
async def stack(dex_in_process_worker: InProcessWorkerFactory) -> AsyncIterator[_Stack]:
    global _GATE, _SLOW_STARTED
    _GATE, _SLOW_STARTED = asyncio.Event(), asyncio.Event()
    flow = _flow()
    async with dex_in_process_worker([flow]) as dex:
        calls: dict[str, int] = {}
        _count_calls(dex.client, calls)
        yield _Stack(dex.sessions(flow), dex.client, calls, dex)
        _GATE.set()


def _count_calls(client: AsyncClient, calls: dict[str, int]) -> None:
    """Count the client's calls by method name (wrapping the instance's bound methods)."""
    for name in ("read_stream", "list_stream_messages", "invoke_rpc", "start_flow"):
        original: Callable[..., Any] = getattr(client, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            calls[_name] = calls.get(_name, 0) + 1
            return _original(*args, **kw)

        setattr(client, name, counted)


async def test_run_turn_starts_a_session_and_returns_the_completed_turn(stack: _Stack) -> None:
    result = await stack.sessions.run_turn("s1", "Where is order 7?", timeout=60)
    assert (result.session_id, result.turn_id, result.status) == (
        stack.dex.scoped("s1"),
        "turn-1",
        "completed",
    )
    assert result.completed
    assert result.text == "Done: order 7 was delivered"
    (call,) = result.tool_calls
    assert (call.tool_name, call.status, call.effect, call.requires_approval) == (
        "lookup_order",
        AgentToolCallStatus.SUCCEEDED,
        ToolEffect.READ,
        False,
    )
    assert call.output == "order 7 was delivered"
    assert result.pending_interrupts == () and result.error is None

    second = await stack.sessions.run_turn("s1", "And order 7 again?", timeout=60)
    assert (second.turn_id, second.status) == ("turn-2", TurnStatus.COMPLETED)
    assert [c.tool_call_id for c in second.tool_calls] != [
        c.tool_call_id for c in result.tool_calls
    ]


async def test_run_turn_follows_events_not_snapshot_polls(stack: _Stack) -> None:
    await stack.sessions.run_turn("s1", "Where is order 7?", timeout=60)
    stack.calls.clear()
    await stack.sessions.run_turn("s1", "And now?", timeout=60)
    # One send, one token listing, one snapshot at the end, and one read per event. A long poll
    # that saw nothing for 10 s (a very busy machine) costs one read and one snapshot more.
    idle_polls = stack.calls["invoke_rpc"] - 2
    assert 0 <= idle_polls <= 1
    assert stack.calls.get("list_stream_messages") == 1
    assert "start_flow" not in stack.calls
    reads = stack.calls["read_stream"]
    events = [m async for m in _take(stack.sessions, "s1", 500)]
    turn_two = [m for m in events if m.value.turn_id == "turn-2"]
    assert reads == len(turn_two) + idle_polls


async def test_a_completed_turn_reads_its_own_messages_not_the_transcript(stack: _Stack) -> None:
    for _ in range(4):  # a history of earlier turns, each with a tool call
        assert (await stack.sessions.run_turn("s1", "Where is order 7?", timeout=60)).completed
    outputs = record_rpc_outputs(stack.client)
    result = await stack.sessions.run_turn("s1", "And order 7 now?", timeout=60)
    assert (result.turn_id, result.text) == ("turn-5", "Done: order 7 was delivered")
    assert [c.output for c in result.tool_calls] == ["order 7 was delivered"]
    # No snapshot: the end is read from the turn's own messages, whatever came before it, and
    # from the window alone (the internal list_recent_agent_messages), not the kept transcript.
    assert [name for name, _ in outputs] in (
        ["send_user_message", _WINDOW_READ],
        # The end's commit not visible yet at the first read: read on after its newest message.
        ["send_user_message", _WINDOW_READ, _WINDOW_READ],
    )
    read = _pages_read(outputs)
    assert read and {message.turn_id for message in read} == {"turn-5"}

    # Followed on from a result (after an approval): the newest messages up to the end, no
    # snapshot at the end, and far fewer messages than the session holds.
    waiting = await stack.sessions.run_turn("s1", "Please refund order 7", timeout=60)
    (interrupt,) = waiting.pending_interrupts
    assert await stack.sessions.resolve_interrupt("s1", interrupt.interrupt_id, approved=True)
    outputs.clear()
    final = await stack.sessions.wait_for_turn("s1", waiting, timeout=60)
    assert (final.status, final.text) == (TurnStatus.COMPLETED, "Done: refunded order 7")
    assert {name for name, _ in outputs} == {_WINDOW_READ}
    read = _pages_read(outputs)
    assert "turn-6" in {message.turn_id for message in read}
    assert len(read) < (await stack.sessions.get_agent_state("s1")).last_message_sequence


_WINDOW_READ = "list_recent_agent_messages"


def _pages_read(outputs: list[tuple[str, Any]]) -> list[AgentMessage]:
    """The messages of every window read's page among ``outputs``."""
    return [
        message
        for name, output in outputs
        if name == _WINDOW_READ
        for message in output.page.messages
    ]


async def _take(sessions: AgentSessionClient, session_id: str, limit: int) -> AsyncIterator[Any]:
    """Every retained event so far (the iterator itself never ends: stop at the last turn end)."""
    count = 0
    async for message in sessions.stream_events(session_id):
        yield message
        count += 1
        if message.value.turn_id == "turn-2" and message.value.type == "turn_completed":
            return
        if count >= limit:
            return


async def test_run_turn_stops_on_an_approval_and_wait_for_turn_follows_it_on(
    stack: _Stack,
) -> None:
    result = await stack.sessions.run_turn("s1", "Please refund order 7", timeout=60)
    assert result.status is TurnStatus.WAITING_FOR_PERSON
    (interrupt,) = result.pending_interrupts
    assert (interrupt.kind, interrupt.tool_name) == (InterruptKind.APPROVAL, "refund_order")
    statuses = {c.tool_name: c.status for c in result.tool_calls}
    assert statuses == {
        "lookup_order": AgentToolCallStatus.SUCCEEDED,
        "refund_order": AgentToolCallStatus.AWAITING_APPROVAL,
    }

    assert await stack.sessions.resolve_interrupt("s1", interrupt.interrupt_id, approved=True)
    final = await stack.sessions.wait_for_turn("s1", result, timeout=60)
    assert (final.turn_id, final.status) == ("turn-1", TurnStatus.COMPLETED)
    assert final.text == "Done: refunded order 7"
    assert {c.tool_name: c.status for c in final.tool_calls} == {
        "lookup_order": AgentToolCallStatus.SUCCEEDED,
        "refund_order": AgentToolCallStatus.SUCCEEDED,
    }
    assert final.pending_interrupts == ()


async def test_run_turn_stops_on_a_question_and_goes_on_after_the_answer(stack: _Stack) -> None:
    result = await stack.sessions.run_turn("s1", "ask me something", timeout=60)
    assert result.status is TurnStatus.WAITING_FOR_PERSON
    (question,) = result.pending_interrupts
    assert (question.kind, question.question) == (InterruptKind.QUESTION, "Which order?")
    assert [(c.tool_name, c.status) for c in result.tool_calls] == [
        ("ask_user", AgentToolCallStatus.AWAITING_ANSWER)
    ]
    assert await stack.sessions.answer_question("s1", question.interrupt_id, "order 7")
    final = await stack.sessions.wait_for_turn("s1", result, timeout=60)
    assert final.completed and final.text is not None and "order 7" in final.text
    assert [(c.tool_name, c.status) for c in final.tool_calls] == [
        ("ask_user", AgentToolCallStatus.SUCCEEDED)
    ]


async def test_a_rejected_approval_ends_the_turn_with_the_call_rejected(stack: _Stack) -> None:
    result = await stack.sessions.run_turn("s1", "Please refund order 7", timeout=60)
    (interrupt,) = result.pending_interrupts
    await stack.sessions.resolve_interrupt(
        "s1", interrupt.interrupt_id, approved=False, rejection_message="no refunds today"
    )
    final = await stack.sessions.wait_for_turn("s1", result, timeout=60)
    assert final.completed
    assert {c.tool_name: c.status for c in final.tool_calls}["refund_order"] == (
        AgentToolCallStatus.REJECTED
    )


async def test_run_turn_reports_a_failed_turn_with_its_error(stack: _Stack) -> None:
    result = await stack.sessions.run_turn("s1", "crash now", timeout=60)
    assert result.status is TurnStatus.FAILED
    assert result.error is not None and "the model provider is down" in result.error
    assert result.text is None and result.tool_calls == ()
    # The session lives on: the next turn runs.
    assert (await stack.sessions.run_turn("s1", "Where is order 7?", timeout=60)).completed


async def test_a_failed_turn_reads_the_state_and_its_own_messages_not_the_snapshot(
    stack: _Stack,
) -> None:
    for _ in range(3):  # a history of earlier turns
        assert (await stack.sessions.run_turn("s1", "Where is order 7?", timeout=60)).completed
    outputs = record_rpc_outputs(stack.client)
    result = await stack.sessions.run_turn("s1", "crash now", timeout=60)
    assert (result.turn_id, result.status) == ("turn-4", TurnStatus.FAILED)
    assert result.error is not None and "the model provider is down" in result.error
    assert result.text is None and result.tool_calls == ()
    names = [name for name, _ in outputs]
    assert names[0] == "send_user_message" and names[-1] == _WINDOW_READ
    assert set(names[1:-1]) == {"get_agent_state"}
    read = _pages_read(outputs)
    assert read and {message.turn_id for message in read} == {"turn-4"}


async def test_run_turn_times_out_and_the_wait_can_go_on(stack: _Stack) -> None:
    with pytest.raises(TurnTimeoutError) as raised:
        await stack.sessions.run_turn("s1", "hang on order 7", timeout=1.5)
    error = raised.value
    assert isinstance(error, TimeoutError)
    assert (error.session_id, error.turn_id) == (stack.dex.scoped("s1"), "turn-1")
    assert "keeps running" in str(error)
    _GATE.set()
    final = await stack.sessions.wait_for_turn(
        "s1", error.resume_token, turn_id=error.turn_id, timeout=60
    )
    assert final.completed and final.text == "Done: order 7 found late"


async def test_a_message_sent_during_a_turn_waits_for_its_own_turn(stack: _Stack) -> None:
    first = asyncio.create_task(stack.sessions.run_turn("s1", "hang on order 7", timeout=60))
    await asyncio.wait_for(_SLOW_STARTED.wait(), 60)
    second = asyncio.create_task(stack.sessions.run_turn("s1", "Where is order 7?", timeout=60))
    while not (await stack.sessions.get_agent_snapshot("s1")).queued_messages:
        await asyncio.sleep(0.05)
    _GATE.set()
    results: list[TurnResult] = list(await asyncio.gather(first, second))
    assert [(r.turn_id, r.status) for r in results] == [
        ("turn-1", TurnStatus.COMPLETED),
        ("turn-2", TurnStatus.COMPLETED),
    ]
    assert results[1].text == "Done: order 7 was delivered"


async def test_stream_events_resumes_after_a_token(stack: _Stack) -> None:
    await stack.sessions.run_turn("s1", "Where is order 7?", timeout=60)
    seen: list[str] = []
    token = ""
    async for message in stack.sessions.stream_events("s1"):
        seen.append(message.value.type)
        if message.value.type == AgentEventType.TOOL_CALL_FINISHED:
            token = message.resume_token
            break
    rest: list[str] = []
    async for message in stack.sessions.stream_events("s1", token):
        rest.append(message.value.type)
        if message.value.type == AgentEventType.TURN_COMPLETED:
            break
    assert seen[0] == AgentEventType.TURN_STARTED
    assert AgentEventType.TOOL_CALL_FINISHED not in rest
    assert rest[-1] == AgentEventType.TURN_COMPLETED
    assert await stack.sessions.latest_event_token("s1") != ""


async def test_bad_arguments_fail_before_any_call(stack: _Stack) -> None:
    with pytest.raises(ConfigurationError, match="blank"):
        await stack.sessions.run_turn("s1", "  ")
    with pytest.raises(ConfigurationError, match="positive"):
        await stack.sessions.run_turn("s1", "hi", timeout=0)
    assert stack.calls == {}
    other = TurnResult("s2", "turn-1", TurnStatus.COMPLETED, None, (), (), None, "")
    with pytest.raises(ConfigurationError, match="session s2"):
        await stack.sessions.wait_for_turn("s1", other)


async def test_the_sync_client_runs_turns_and_answers_approvals(
    stack: _Stack, tmp_path: Path
) -> None:
    flow = stack.sessions.flow
    registry = Registry([flow], agent_codec_registry(), allow_async_handlers=True)
    cache = open_blob_cache(BlobCacheConfig(str(tmp_path / "sync-cache"), 16 * 1024 * 1024))
    options = ClientOptions(
        server_address=stack.dex.server_address, worker_target=WorkerTarget(pull=True)
    )
    client = Client(registry, cache, options)
    try:
        sessions = SyncAgentSessionClient(client, flow)
        s1 = stack.dex.scoped("s1")  # the sync client takes the ID as the engine sees it
        result = await asyncio.to_thread(sessions.run_turn, s1, "Please refund order 7", timeout=60)
        assert result.status is TurnStatus.WAITING_FOR_PERSON
        (interrupt,) = result.pending_interrupts
        assert await asyncio.to_thread(
            lambda: sessions.resolve_interrupt(s1, interrupt.interrupt_id, approved=True)
        )
        final = await asyncio.to_thread(sessions.wait_for_turn, s1, result, timeout=60)
        assert (final.status, final.text) == (TurnStatus.COMPLETED, "Done: refunded order 7")
        with pytest.raises(TurnTimeoutError) as raised:
            await asyncio.to_thread(sessions.run_turn, s1, "hang on order 7", timeout=1)
        _GATE.set()
        late = await asyncio.to_thread(
            lambda: sessions.wait_for_turn(
                s1, raised.value.resume_token, turn_id=raised.value.turn_id, timeout=60
            )
        )
        assert (late.turn_id, late.text) == ("turn-2", "Done: order 7 found late")
    finally:
        client.close()
        cache.close()


async def test_a_message_the_session_cannot_store_is_refused_before_sending(
    stack: _Stack,
) -> None:
    with pytest.raises(ConfigurationError, match="cannot send the message"):
        await stack.sessions.run_turn("s1", "a lone surrogate \ud800 here")
    with pytest.raises(ConfigurationError, match="blank"):
        await stack.sessions.run_turn("s1", "\u200b\n")
    assert stack.calls == {}


async def test_run_turn_on_a_stopped_session_refuses_to_reuse_its_id(stack: _Stack) -> None:
    assert (await stack.sessions.run_turn("s1", "Where is order 7?", timeout=60)).completed
    await stack.client.stop_flow(stack.dex.scoped("s1"))
    with pytest.raises(FlowAlreadyStartedError):
        await stack.sessions.run_turn("s1", "Are you there?", timeout=60)
