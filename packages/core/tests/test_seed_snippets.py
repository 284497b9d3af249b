"""The documentation's snippets, run as written against a private local engine.

Each test copies a snippet of the dex-agents 0.3.0 documentation line for line. Only these change:
the engine address replaces ``localhost:8801``; ``ScriptedModelClient`` replaces
``LiteLLMModelClient``; the application objects a snippet assumes (``MyFrameworkRunner``,
``agent``, ``orders``, ``payments``) are defined minimally here; the Worker is started and
stopped around the snippet, which the documentation leaves to the application; and the Worker
pulls its tasks (``PullWorkerOptions``, ``WorkerTarget(pull=True)``) instead of listening on the
fixed port ``:8803``, so tests use free ports only. (The local engine does send Flows started
without a worker target to the SDK's default listener, ``--default-worker-address``; the engine's
``test_listening_engine.py`` covers that path with a real listening Worker.)
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

import pytest
from dex import (
    AsyncClient,
    AsyncWorker,
    BlobCacheConfig,
    ClientOptions,
    PullWorkerOptions,
    Registry,
    WorkerOptions,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import (
    TURN_CANCELLED_NOTE,
    AgentEvent,
    AgentEventType,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    BuiltInTool,
    CompactionPolicy,
    ConfigurationTypeError,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    InterruptKind,
    JsonValue,
    MessageRole,
    PlanStatus,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedRespond,
    ScriptedToolCall,
    ToolCallContext,
    function_tool,
    stepwise_agent_session_flow,
    stepwise_agent_session_options,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EngineLogs,
    EngineProcess,
    pending_interrupt,
    read_step_history,
    turn_ended,
    wait_for_agent_snapshot,
)
from seed_documentation import SEED_EVENT_PAYLOAD_KEYS
from turn_control_test_support import Gate


@contextmanager
def _inside(directory: Path) -> Iterator[None]:
    """Run with ``directory`` as the working directory, as an application's cwd."""
    previous = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(previous)


@asynccontextmanager
async def _private_engine(tmp_path: Path) -> AsyncIterator[str]:
    """A private ``dex-local-engine serve --address 127.0.0.1:0``; yields its address."""
    engine = await EngineProcess.start_local(
        tmp_path / "engine.db", EngineLogs.in_directory(tmp_path)
    )
    try:
        yield engine.server_address
    finally:
        await engine.stop()


#: Pull tasks, and stop without waiting long for a cancelled call to drain.
_PULL = PullWorkerOptions(stop_drain_timeout=timedelta(seconds=2))


def _worker_options(address: str) -> WorkerOptions:
    """``WorkerOptions(server_address="localhost:8801")`` for the private engine.

    The snippet's default Worker listens on the fixed port ``:8803``, the engine's default Worker
    address; tests use free ports only, so this Worker pulls its tasks instead.
    """
    return WorkerOptions(server_address=address, pull=_PULL)


def _client_options(address: str) -> ClientOptions:
    """``ClientOptions(server_address="localhost:8801")`` for the pulling Worker."""
    return ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True))


@asynccontextmanager
async def _serving(worker: AsyncWorker, client: AsyncClient) -> AsyncIterator[None]:
    """Serve with the snippet's Worker until the block ends, then close both."""
    serving = asyncio.create_task(worker.start())
    try:
        await worker.wait_pull_registered(30)
        yield
    finally:
        await worker.stop()
        await asyncio.gather(serving, return_exceptions=True)
        await client.close()


def _payload_key_drift(events: list[AgentEvent]) -> dict[str, tuple[list[str], list[str]]]:
    """Per event type seen: (documented keys missing, undocumented keys present)."""
    drift: dict[str, tuple[list[str], list[str]]] = {}
    for event in events:
        keys = set(event.payload_json())
        expected = SEED_EVENT_PAYLOAD_KEYS[event.type]
        if keys != expected:
            drift[event.type] = (sorted(expected - keys), sorted(keys - expected))
    return drift


async def _read_events_until(
    client: AsyncClient, flow: AgentSessionFlow, session_id: str, turn_id: str, event_type: str
) -> list[AgentEvent]:
    """The session's AgentEvents from the start through ``event_type`` of ``turn_id``."""
    events: list[AgentEvent] = []
    token = ""
    while not events or (events[-1].turn_id, events[-1].type) != (turn_id, event_type):
        message = await client.read_stream(session_id, flow.agent_events, token)
        events.append(message.value)
        token = message.resume_token
    return events


# --- "Running an agent" -------------------------------------------------------------------------


@dataclass
class MyFrameworkRunner:
    """The smallest framework runner: it searches tickets once per turn, then answers."""

    agent: str
    searches: list[str] = field(default_factory=list)

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(
            role=MessageRole.USER, framework_item=json.dumps({"user": text}), text=text
        )

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if not turn.is_resuming:
            return ToolCallsRequested(
                framework_run_state=json.dumps({"searched": True}),
                # A list, as the documentation writes it; the field is typed as a tuple.
                tool_calls=[
                    DeferredToolCall(
                        "search-1",
                        "search_tickets",
                        json.dumps({"status": "open"}),
                        turn.resolve_tool_policy("search_tickets"),
                    )
                ],
                usage=AgentUsage(input_tokens=11, output_tokens=3),
            )
        record = turn.recorded_tool_call("search-1")
        assert record is not None
        text = f"{self.agent} found: {describe_tool_call_outcome(record)}"
        return TurnCompleted(
            new_messages=[
                FrameworkMessage(
                    role=MessageRole.ASSISTANT,
                    framework_item=json.dumps({"assistant": text}),
                    text=text,
                )
            ],
            usage=AgentUsage(input_tokens=13, output_tokens=5),
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self.searches.append(call.idempotency_key)
        return ToolExecutionResult("ticket 7 is open")


async def test_running_an_agent_snippet_completes_a_turn(tmp_path: Path) -> None:
    agent = "triage"
    runner = MyFrameworkRunner(agent)
    async with _private_engine(tmp_path) as address:
        with _inside(tmp_path):
            # ---- the snippet, as written ----
            from dex import (
                AsyncClient,
                AsyncWorker,
                BlobCacheConfig,
                ClientOptions,
                Registry,
                WorkerOptions,
                open_blob_cache,
            )
            from dex_agents import (
                AgentSessionClient,
                AgentSessionFlow,
                AgentSessionOptions,
                ToolEffect,
                ToolPolicy,
            )

            flow = AgentSessionFlow(
                runner,  # MyFrameworkRunner(agent)
                flow_type="TriageAgent",
                options=AgentSessionOptions(
                    tool_policies={"search_tickets": ToolPolicy(ToolEffect.READ)},
                ),
            )
            registry = Registry([flow], allow_async_handlers=True)
            cache = open_blob_cache(BlobCacheConfig(".dex-cache", 64 * 1024 * 1024))
            # Pull mode: see _worker_options.
            worker = AsyncWorker(registry, cache, WorkerOptions(server_address=address, pull=_PULL))
            client = AsyncClient(
                registry,
                cache,
                ClientOptions(server_address=address, worker_target=WorkerTarget(pull=True)),
            )
            sessions = AgentSessionClient(client, flow)
            # ---- end of the snippet's setup ----
            async with _serving(worker, client):
                await sessions.start_session("session-42", "Find my open tickets")
                snapshot = await sessions.get_agent_snapshot("session-42")
                # state is None until StartAgentSession commits, so wait for the turn.
                snapshot = await wait_for_agent_snapshot(sessions, "session-42", turn_ended(1))
                history = await read_step_history(address, "session-42")
                # "Stop it with AsyncClient.stop_flow"; the closed session's snapshot is served.
                await client.stop_flow("session-42")
                closed = await sessions.get_agent_snapshot("session-42")
                assert closed.messages == snapshot.messages
        assert (tmp_path / ".dex-cache").is_dir()
    assert [(m.role, m.text) for m in snapshot.messages] == [
        (MessageRole.USER, "Find my open tickets"),
        (MessageRole.ASSISTANT, "triage found: ticket 7 is open"),
    ]
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert snapshot.tool_calls == () and snapshot.pending_interrupts == ()
    assert (snapshot.usage.input_tokens, snapshot.usage.output_tokens) == (24, 8)
    assert snapshot.usage.model_calls == 2
    # The READ policy ran the search once, in CallTool, without an approval.
    assert runner.searches == ["session-42/turn-1/search-1"]
    executed = [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]
    assert "CallTool" in executed and "AwaitToolApproval" not in executed


# --- "Stepwise mode" ------------------------------------------------------------------------------


class _Orders:
    async def get(self, order_id: str) -> dict[str, str]:
        return {"order_id": order_id, "status": "shipped"}


@dataclass
class _Payments:
    refunds: list[tuple[str, int, str]] = field(default_factory=list)

    async def refund(self, order_id: str, amount_cents: int, *, idempotency_key: str) -> str:
        self.refunds.append((order_id, amount_cents, idempotency_key))
        return f"refunded {amount_cents} cents of order {order_id}"


orders = _Orders()
payments = _Payments()

# ---- the snippet's tools, as written (its imports are at the top of this module) ----


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return await orders.get(order_id)


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str, amount_cents: int, context: ToolCallContext) -> str:
    """Refund part of an order."""
    return await payments.refund(order_id, amount_cents, idempotency_key=context.idempotency_key)


# ---- end of the snippet's tools ----


def _support_script(request: ModelRequest) -> ScriptedModelReply:
    """Turn 1 looks up order 7 and refunds 500 cents; turn 2 asks the user a question."""
    results = ScriptedModelClient.tool_results(request)
    done = {result.tool_name: result.output for result in results}
    if ScriptedModelClient.user_texts(request)[-1] == "Which color should it be?":
        if "ask_user" not in done:
            question: dict[str, JsonValue] = {
                "question": "Red or blue?",
                "choices": ["red", "blue"],
                "allows_free_text": False,
            }
            return ScriptedModelReply(tool_calls=[ScriptedToolCall("ask_user", question)])
        return ScriptedModelReply(text=f"You said {done['ask_user']}")
    if "lookup_order" not in done:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})])
    if "refund_order" not in done:
        arguments: dict[str, JsonValue] = {"order_id": "7", "amount_cents": 500}
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("refund_order", arguments)])
    return ScriptedModelReply(text="; ".join(result.output for result in results))


async def test_stepwise_mode_snippet_runs_tools_approvals_and_questions(tmp_path: Path) -> None:
    payments.refunds.clear()
    # ---- the snippet, as written, with ScriptedModelClient for LiteLLMModelClient ----
    from dex import Registry

    support_agent = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=ScriptedModelClient(_support_script),
        tools=[lookup_order, refund_order],
        built_in_tools=frozenset({BuiltInTool.ASK_USER, BuiltInTool.DURABLE_WAIT}),
    )
    flow = stepwise_agent_session_flow(support_agent, flow_type="SupportAgent")
    registry = Registry([flow], allow_async_handlers=True)
    # ---- end of the snippet ----
    async with _private_engine(tmp_path) as address:
        cache = open_blob_cache(BlobCacheConfig(str(tmp_path / ".dex-cache"), 64 * 1024 * 1024))
        worker = AsyncWorker(registry, cache, _worker_options(address))
        client = AsyncClient(registry, cache, _client_options(address))
        sessions = AgentSessionClient(client, flow)
        async with _serving(worker, client):
            await sessions.start_session("session-1", "Refund 5 dollars of order 7")
            approval = await wait_for_agent_snapshot(sessions, "session-1", pending_interrupt)
            assert (approval.kind, approval.tool_name) == (InterruptKind.APPROVAL, "refund_order")
            assert payments.refunds == []
            # "Finding sessions that need a person", as written.
            waiting = await client.search_flows('ActiveStepTypes = "AwaitToolApproval"', 50)
            assert [entry.flow_id for entry in waiting.flows] == ["session-1"]
            assert await sessions.resolve_interrupt(
                "session-1", approval.interrupt_id, approved=True
            )
            first = await wait_for_agent_snapshot(sessions, "session-1", turn_ended(1))
            # The session left the search when it moved on.
            waiting = await client.search_flows('ActiveStepTypes = "AwaitToolApproval"', 50)
            assert waiting.flows == []
            assert await sessions.send_user_message("session-1", "Which color should it be?")
            question = await wait_for_agent_snapshot(sessions, "session-1", pending_interrupt)
            assert (question.kind, question.question) == (InterruptKind.QUESTION, "Red or blue?")
            asking = await client.search_flows('ActiveStepTypes = "AwaitQuestionAnswer"', 50)
            assert [entry.flow_id for entry in asking.flows] == ["session-1"]
            assert not await sessions.answer_question("session-1", question.interrupt_id, "green")
            assert not await sessions.answer_question("session-1", question.interrupt_id, " ")
            assert not await sessions.resolve_interrupt(
                "session-1", question.interrupt_id, approved=True
            )
            assert await sessions.answer_question("session-1", question.interrupt_id, "blue")
            assert not await sessions.answer_question("session-1", question.interrupt_id, "red")
            second = await wait_for_agent_snapshot(sessions, "session-1", turn_ended(2))
            events = await _read_events_until(client, flow, "session-1", "turn-2", "turn_completed")
    refund_call_id = approval.tool_call_id
    assert payments.refunds == [("7", 500, f"session-1/turn-1/{refund_call_id}")]
    looked_up, refunded = (first.messages[-1].text or "").split("; ")
    assert json.loads(looked_up) == {"order_id": "7", "status": "shipped"}
    assert refunded == "refunded 500 cents of order 7"
    assert second.messages[-1].text == 'You said {"status":"answered","answer":"blue"}'
    seen = {event.type for event in events}
    assert {
        "tool_call_deferred",
        "interrupt_raised",
        "interrupt_resolved",
        "usage_recorded",
    } <= seen
    assert _payload_key_drift(events) == {}


# --- "Steering and turn cancellation" -------------------------------------------------------------


def _echo_script(gate: Gate) -> ScriptedRespond:
    """A model that holds the first turn's call at ``gate`` and echoes later user texts."""

    async def respond(request: ModelRequest) -> ScriptedModelReply:
        texts = ScriptedModelClient.user_texts(request)
        if texts[-1] == "Find my open tickets":
            await gate.pass_through()
            return ScriptedModelReply(text="reply of the cancelled turn")
        return ScriptedModelReply(text=f"echo {texts[-1]}")

    return respond


@asynccontextmanager
async def _stepwise_sessions(
    tmp_path: Path, definition: AgentDefinition, options: AgentSessionOptions | None = None
) -> AsyncIterator[tuple[AgentSessionClient, AsyncClient, AgentSessionFlow]]:
    """A private engine, a Worker, and the sessions of one Stepwise agent."""
    flow = stepwise_agent_session_flow(definition, flow_type="SupportAgent", options=options)
    registry = Registry([flow], allow_async_handlers=True)
    async with _private_engine(tmp_path) as address:
        cache = open_blob_cache(BlobCacheConfig(str(tmp_path / ".dex-cache"), 64 * 1024 * 1024))
        worker = AsyncWorker(registry, cache, _worker_options(address))
        client = AsyncClient(registry, cache, _client_options(address))
        async with _serving(worker, client):
            yield AgentSessionClient(client, flow), client, flow


async def test_steering_and_cancellation_snippet(tmp_path: Path) -> None:
    gate = Gate()
    definition = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=ScriptedModelClient(_echo_script(gate)),
    )
    async with _stepwise_sessions(tmp_path, definition) as (sessions, client, flow):
        await sessions.start_session("session-42", "Find my open tickets")
        await gate.wait_reached()
        assert not await sessions.send_user_message("session-42", "   ")
        # ---- the snippet, as written ----
        await sessions.send_user_message("session-42", "Also check order 8")
        await sessions.send_user_message("session-42", "And order 9")  # queued_messages[1]
        snapshot = await sessions.get_agent_snapshot("session-42")
        queued = snapshot.queued_messages[0]
        assert await sessions.steer_user_message("session-42", message_id=queued.message_id)
        assert await sessions.steer_user_message(
            "session-42", text="Use the staging account instead"
        )
        assert await sessions.delete_queued_message(
            "session-42", snapshot.queued_messages[1].message_id
        )
        assert snapshot.state is not None and snapshot.state.active_turn_id == "turn-1"
        assert await sessions.cancel_turn("session-42", snapshot.state.active_turn_id)
        # ---- end of the snippet ----
        assert [m.text for m in snapshot.queued_messages] == ["Also check order 8", "And order 9"]
        # Edge cases the RPC table gives.
        assert not await sessions.steer_user_message("session-42", message_id=queued.message_id)
        assert not await sessions.delete_queued_message(
            "session-42", snapshot.queued_messages[1].message_id
        )
        assert not await sessions.cancel_turn("session-42", "turn-9")
        assert not await sessions.steer_user_message("session-42")  # neither
        assert not await sessions.steer_user_message("session-42", "  ")  # blank
        assert not await sessions.steer_user_message(  # both
            "session-42", "text", message_id=snapshot.queued_messages[1].message_id
        )
        gate.opened.set()
        final = await wait_for_agent_snapshot(sessions, "session-42", turn_ended(2))
        events = await _read_events_until(client, flow, "session-42", "turn-2", "turn_completed")
        # Nothing is active now: cancel_turn refuses, and a steer with text starts the next turn.
        assert not await sessions.cancel_turn("session-42", "turn-2")
        assert await sessions.steer_user_message("session-42", text="Hi again")
        last = await wait_for_agent_snapshot(sessions, "session-42", turn_ended(3))
        # Plan mode is off for this agent.
        assert not await sessions.send_user_message("session-42", "Plan it", plan_mode=True)
    # The cancelled turn's answer was dropped and its note says so; the steered messages started
    # turn-2, in order.
    assert [(m.role, m.text, m.turn_id) for m in final.messages] == [
        (MessageRole.USER, "Find my open tickets", "turn-1"),
        (MessageRole.USER, TURN_CANCELLED_NOTE, "turn-1"),
        (MessageRole.USER, "Also check order 8", "turn-2"),
        (MessageRole.USER, "Use the staging account instead", "turn-2"),
        (MessageRole.ASSISTANT, "echo Use the staging account instead", "turn-2"),
    ]
    cancelled = [e for e in events if e.type == AgentEventType.TURN_CANCELLED]
    assert [(e.turn_id, set(e.payload_json())) for e in cancelled] == [
        ("turn-1", {"message_count"})
    ]
    assert last.messages[-1].text == "echo Hi again"
    assert _payload_key_drift(events) == {}


# --- "Plans and plan mode" ------------------------------------------------------------------------

_APPROVAL_PREFIX = "[Dex] The user approved plan revision"


def _planner(request: ModelRequest) -> ScriptedModelReply:
    """Plans two tasks in a planning turn, then completes both when the plan is approved.

    ``tool_results`` holds the results of the turn's tool calls, so each turn counts its own.
    """
    plan_calls = [
        r for r in ScriptedModelClient.tool_results(request) if r.tool_name == "write_todos"
    ]
    tasks = ["Back up the database", "Run the migration"]
    if ScriptedModelClient.user_texts(request)[-1].startswith(_APPROVAL_PREFIX):
        if not plan_calls:
            todos: list[JsonValue] = [{"content": task, "status": "completed"} for task in tasks]
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("write_todos", {"todos": todos})]
            )
        return ScriptedModelReply(text="Migrated")
    if not plan_calls:
        pending: list[JsonValue] = [{"content": task, "status": "pending"} for task in tasks]
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("write_todos", {"todos": pending})])
    return ScriptedModelReply(text="Here is the plan")


async def test_plan_mode_snippet_plans_then_executes_the_approved_revision(tmp_path: Path) -> None:
    definition = AgentDefinition(
        name="migrations",
        instructions="You migrate databases.",
        model=ScriptedModelClient(_planner),
        built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}),
        plan_mode_enabled=True,
    )
    async with _stepwise_sessions(tmp_path, definition) as (sessions, client, flow):
        await sessions.start_session("session-42")
        # ---- the snippet, as written (a UI reads the snapshot once the turn ended) ----
        await sessions.send_user_message("session-42", "Plan the migration", plan_mode=True)
        await wait_for_agent_snapshot(sessions, "session-42", turn_ended(1))
        snapshot = await sessions.get_agent_snapshot("session-42")
        if snapshot.plan is not None and snapshot.plan.status is PlanStatus.DRAFT:
            assert not await sessions.execute_plan("session-42", snapshot.plan.revision + 1)
            assert await sessions.execute_plan("session-42", snapshot.plan.revision)
        # ---- end of the snippet ----
        done = await wait_for_agent_snapshot(sessions, "session-42", turn_ended(2))
        events = await _read_events_until(client, flow, "session-42", "turn-2", "turn_completed")
    assert snapshot.plan is not None and snapshot.plan.status is PlanStatus.DRAFT
    assert snapshot.plan.revision == 1
    assert [todo.content for todo in snapshot.plan.todos] == [
        "Back up the database",
        "Run the migration",
    ]
    assert done.plan is not None
    assert (done.plan.status, done.plan.revision) == (PlanStatus.COMPLETED, 2)
    turn_two = [m.text for m in done.messages if m.turn_id == "turn-2" and m.text]
    assert turn_two[0] == (
        "[Dex] The user approved plan revision 1. Execute it and keep the task statuses current "
        "with write_todos."
    )
    assert turn_two[-1] == "Migrated"
    assert [e.payload_json() for e in events if e.type == "plan_execution_started"] == [
        {"revision": 1}
    ]
    assert _payload_key_drift(events) == {}


# --- "Session settings", "Compaction", and "Message storage and retention" -----------------------


def _reply_as(name: str) -> ScriptedRespond:
    def respond(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(text=f"{name}: {ScriptedModelClient.user_texts(request)[-1]}")

    return respond


async def test_session_settings_compaction_and_storage_snippets(tmp_path: Path) -> None:
    # ---- the snippets, as written, with ScriptedModelClient for LiteLLMModelClient ----
    models = {
        name: ScriptedModelClient(_reply_as(name)) for name in ("openai/gpt-5-mini", "openai/gpt-5")
    }
    definition = AgentDefinition(
        name="support",
        instructions="You help customers with their orders.",
        model=models["openai/gpt-5-mini"],
        # Choose only from clients the Worker built; the settings come from the application.
        resolve_model=lambda settings: models.get(
            str(settings.get("model")), models["openai/gpt-5-mini"]
        ),
        compaction=CompactionPolicy(context_window_tokens=400_000),
    )
    options = replace(
        stepwise_agent_session_options(definition),
        message_window_size=64,
        message_chunk_size=32,
        message_chunk_max_bytes=1024 * 1024,
        retained_message_limit=5_000,
    )
    compaction_options = AgentSessionOptions(
        compaction=CompactionPolicy(context_window_tokens=400_000),  # trigger 0.85, keep 0.3
    )
    # ---- end of the snippets' definitions ----
    assert compaction_options.compaction is not None
    assert (
        compaction_options.compaction.trigger_ratio,
        compaction_options.compaction.keep_ratio,
    ) == (
        0.85,
        0.3,
    )
    # A runner without ContextCompactionRunner cannot take a compaction policy.
    with pytest.raises(ConfigurationTypeError):
        AgentSessionFlow(
            MyFrameworkRunner("x"), flow_type="NoCompaction", options=compaction_options
        )
    assert options.compaction == definition.compaction
    assert (options.message_window_size, options.retained_message_limit) == (64, 5_000)
    async with _stepwise_sessions(tmp_path, definition, options) as (sessions, _client, _flow):
        # ---- the snippet, as written ----
        await sessions.start_session(
            "session-42", "Hello", session_settings={"model": "openai/gpt-5"}
        )
        first = await wait_for_agent_snapshot(sessions, "session-42", turn_ended(1))
        assert await sessions.update_session_settings("session-42", {"model": "openai/gpt-5-mini"})
        # ---- end of the snippet ----
        updated = await sessions.get_agent_snapshot("session-42")
        assert await sessions.send_user_message("session-42", "Again")
        second = await wait_for_agent_snapshot(sessions, "session-42", turn_ended(2))
        assert await sessions.update_session_settings("session-42", {})
        cleared = await sessions.get_agent_snapshot("session-42")
        # list_agent_messages clamps its limit to 1..200.
        one = await sessions.list_agent_messages("session-42", limit=0)
        every = await sessions.list_agent_messages("session-42", limit=1_000)
    assert [m.sequence for m in one.messages] == [1]
    assert [m.sequence for m in every.messages] == [1, 2, 3, 4]
    assert every.deleted_before_sequence is None
    assert first.session_settings == {"model": "openai/gpt-5"}
    assert first.messages[-1].text == "openai/gpt-5: Hello"
    assert updated.session_settings == {"model": "openai/gpt-5-mini"}
    assert second.messages[-1].text == "openai/gpt-5-mini: Again"
    assert cleared.session_settings == {}
