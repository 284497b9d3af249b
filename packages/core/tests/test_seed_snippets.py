"""The documentation's snippets, run as written against a private local engine.

Each test copies a snippet of the dex-agents 0.3.0 documentation line for line. Only these change:
the engine address replaces ``localhost:8801``; ``ScriptedModelClient`` replaces
``LiteLLMModelClient``; the application objects a snippet assumes (``MyFrameworkRunner``,
``agent``, ``orders``, ``payments``) are defined minimally here; and the Worker is started and
stopped around the snippet, which the documentation leaves to the application.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from dex import (
    AsyncClient,
    AsyncWorker,
    BlobCacheConfig,
    ClientOptions,
    PullWorkerOptions,
    WorkerOptions,
    Registry,
    WorkerTarget,
    open_blob_cache,
)
from dex_agents import (
    AgentInterrupt,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSnapshot,
    AgentStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    InterruptKind,
    MessageRole,
    ToolCallsRequested,
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
    stepwise_agent_session_flow,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EngineLogs,
    EngineProcess,
    read_step_history,
    wait_for_agent_snapshot,
)
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


def _worker_options(address: str) -> WorkerOptions:
    """``WorkerOptions(server_address="localhost:8801")`` for the private engine.

    The snippet's default Worker listens on ``:8803`` and relies on the Server's default Worker
    address; the local engine has none, and tests bind loopback only, so it pulls tasks instead.
    """
    return WorkerOptions(server_address=address, pull=PullWorkerOptions())


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


def _idle_after(turns: int) -> object:
    def probe(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        if (
            state is not None
            and state.turn_count == turns
            and state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
            and state.active_turn_id is None
        ):
            return snapshot
        return None

    return probe


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
            from dex import AsyncClient, AsyncWorker, BlobCacheConfig, ClientOptions, Registry
            from dex import WorkerOptions, open_blob_cache
            from dex_agents import AgentSessionClient, AgentSessionFlow, AgentSessionOptions
            from dex_agents import ToolEffect, ToolPolicy

            flow = AgentSessionFlow(
                runner,  # MyFrameworkRunner(agent)
                flow_type="TriageAgent",
                options=AgentSessionOptions(
                    tool_policies={"search_tickets": ToolPolicy(ToolEffect.READ)},
                ),
            )
            registry = Registry([flow], allow_async_handlers=True)
            cache = open_blob_cache(BlobCacheConfig(".dex-cache", 64 * 1024 * 1024))
            worker = AsyncWorker(registry, cache, _worker_options(address))
            client = AsyncClient(registry, cache, _client_options(address))
            sessions = AgentSessionClient(client, flow)
            # ---- end of the snippet's setup ----
            async with _serving(worker, client):
                await sessions.start_session("session-42", "Find my open tickets")
                snapshot = await sessions.get_agent_snapshot("session-42")
                # state is None until StartAgentSession commits, so wait for the turn.
                snapshot = await wait_for_agent_snapshot(sessions, "session-42", _idle_after(1))
                history = await read_step_history(address, "session-42")
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

# ---- the snippet's tools, as written ----
from dex_agents import BuiltInTool, ToolEffect  # noqa: E402
from dex_agents.stepwise import AgentDefinition, ToolCallContext, function_tool  # noqa: E402
from dex_agents.stepwise import stepwise_agent_session_flow  # noqa: E402


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
            question = {
                "question": "Red or blue?",
                "choices": ["red", "blue"],
                "allows_free_text": False,
            }
            return ScriptedModelReply(tool_calls=[ScriptedToolCall("ask_user", question)])
        return ScriptedModelReply(text=f"You said {done['ask_user']}")
    if "lookup_order" not in done:
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})])
    if "refund_order" not in done:
        arguments = {"order_id": "7", "amount_cents": 500}
        return ScriptedModelReply(tool_calls=[ScriptedToolCall("refund_order", arguments)])
    return ScriptedModelReply(text="; ".join(result.output for result in results))


def _pending_interrupt(snapshot: AgentSnapshot) -> AgentInterrupt | None:
    return next(iter(snapshot.pending_interrupts), None)


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
            approval = await wait_for_agent_snapshot(sessions, "session-1", _pending_interrupt)
            assert (approval.kind, approval.tool_name) == (InterruptKind.APPROVAL, "refund_order")
            assert payments.refunds == []
            assert await sessions.resolve_interrupt(
                "session-1", approval.interrupt_id, approved=True
            )
            first = await wait_for_agent_snapshot(sessions, "session-1", _idle_after(1))
            assert await sessions.send_user_message("session-1", "Which color should it be?")
            question = await wait_for_agent_snapshot(sessions, "session-1", _pending_interrupt)
            assert (question.kind, question.question) == (InterruptKind.QUESTION, "Red or blue?")
            assert not await sessions.answer_question("session-1", question.interrupt_id, "green")
            assert await sessions.answer_question("session-1", question.interrupt_id, "blue")
            assert not await sessions.answer_question("session-1", question.interrupt_id, "red")
            second = await wait_for_agent_snapshot(sessions, "session-1", _idle_after(2))
    refund_call_id = approval.tool_call_id
    assert payments.refunds == [("7", 500, f"session-1/turn-1/{refund_call_id}")]
    looked_up, refunded = (first.messages[-1].text or "").split("; ")
    assert json.loads(looked_up) == {"order_id": "7", "status": "shipped"}
    assert refunded == "refunded 500 cents of order 7"
    assert second.messages[-1].text == 'You said {"status":"answered","answer":"blue"}'


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
        gate.opened.set()
        final = await wait_for_agent_snapshot(
            sessions, "session-42", lambda s: s if s.state and s.state.turn_count >= 1 and s.state.active_turn_id is None else None
        )
        print([ (m.role, m.text, m.turn_id) for m in final.messages], final.state)
