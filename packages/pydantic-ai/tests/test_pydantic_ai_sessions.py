"""Pydantic AI specifics in real sessions: structured output, deps, approvals, output validation,
system prompts and the schema-only (MCP wrapper) tool path, against the local engine. Unknown
tools, invalid arguments and a model that fails mid-turn are the shared suite's, for every runner
(``tests-shared/test_uniform_outcomes.py``, ``test_turn_failure.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from dex_agents import (
    AgentInterrupt,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSnapshot,
    MessageRole,
    ToolEffect,
)
from dex_agents.testing import (
    InProcessWorker,
    pending_interrupt,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_pydantic_ai import (
    APPROVE_CHOICE,
    DepsRequest,
    PydanticAIRunner,
    deferred_tool_idempotency_key,
    dex_tool_metadata,
)
from pydantic import BaseModel
from pydantic_ai import Agent, ApprovalRequired, RunContext, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_test_support import turn_tool_results


@dataclass
class Deps:
    """The deps a factory builds in the Worker: a prefix and who asked for them."""

    prefix: str
    request: DepsRequest


class Order(BaseModel):
    order_id: str
    status: str


@dataclass
class Script:
    """A FunctionModel script: first the tool calls, then ``final`` (given this turn's results)."""

    calls: list[ToolCallPart]
    final: Any
    seen: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(messages)
        results = turn_tool_results(messages)
        if not results and self.calls:
            return ModelResponse(parts=list(self.calls))
        answer = self.final(results, info)
        return (
            answer if isinstance(answer, ModelResponse) else ModelResponse(parts=[TextPart(answer)])
        )


def _call_then_relay(call: ToolCallPart) -> Script:
    """A script that makes ``call``, then answers with the tool's result."""
    return Script([call], lambda results, info: results[0].model_response_str())


async def _first_turn(
    dex_in_process_worker: InProcessWorkerFactory,
    flow: AgentSessionFlow,
    session_id: str,
    text: str,
    **start: Any,
) -> tuple[AgentSnapshot, InProcessWorker]:
    """Start ``session_id`` with ``text`` (``start``: more ``start_session`` arguments); the
    snapshot at the end of its first turn, and the Worker that ran it (for ``scoped``)."""
    async with dex_in_process_worker([flow]) as worker:
        sessions = worker.sessions(flow)
        await sessions.start_session(session_id, text, **start)
        return await wait_for_turn_end(sessions, session_id), worker


@asynccontextmanager
async def _first_interrupt(
    dex_in_process_worker: InProcessWorkerFactory, flow: AgentSessionFlow, text: str
) -> AsyncIterator[tuple[AgentSessionClient, AgentInterrupt]]:
    """Start session ``s1`` with ``text``; its client and its first pending interrupt, with the
    Worker still serving the flow."""
    async with dex_in_process_worker([flow]) as worker:
        sessions = worker.sessions(flow)
        await sessions.start_session("s1", text)
        yield sessions, await wait_for_agent_snapshot(sessions, "s1", pending_interrupt)


def _flow(agent: Agent[Any, Any], flow_type: str, **runner: Any) -> AgentSessionFlow:
    runner.setdefault("stream", False)
    return AgentSessionFlow(PydanticAIRunner(agent, **runner), flow_type=flow_type)


async def test_structured_output_and_deps_reach_the_tool_step(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    def final(results: list[Any], info: AgentInfo) -> ModelResponse:
        (output_tool,) = info.output_tools
        return ModelResponse(
            parts=[ToolCallPart(output_tool.name, {"order_id": "7", "status": results[0].content})]
        )

    script = Script([ToolCallPart("lookup", {"order_id": "7"}, tool_call_id="c1")], final)
    agent: Agent[Deps, Order] = Agent(FunctionModel(script), deps_type=Deps, output_type=Order)
    requests: list[DepsRequest] = []

    @agent.tool(metadata=dex_tool_metadata(ToolEffect.READ))
    async def lookup(ctx: RunContext[Deps], order_id: str) -> str:
        assert ctx.deps.request.tool_call is not None
        return f"{ctx.deps.prefix}-{order_id}-{ctx.deps.request.tool_call.idempotency_key}"

    def deps_factory(request: DepsRequest) -> Deps:
        requests.append(request)
        return Deps("shipped", request)

    flow = _flow(agent, "StructuredAgent", deps_factory=deps_factory)
    snapshot, worker = await _first_turn(
        dex_in_process_worker, flow, "s1", "where is order 7?", session_settings={"tier": "gold"}
    )

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    answer = [m for m in snapshot.messages if m.role is MessageRole.ASSISTANT][-1]
    assert Order.model_validate_json(answer.text or "") == Order(
        order_id="7", status=f"shipped-7-{worker.scoped('s1')}/turn-1/c1"
    )
    tool_requests = [r for r in requests if r.tool_call is not None]
    assert [r.tool_call.tool_call.tool_call_id for r in tool_requests if r.tool_call] == ["c1"]
    assert tool_requests[0].session_settings == {}
    model_requests = [r for r in requests if r.tool_call is None]
    assert len(model_requests) == 2
    assert all(r.session_settings == {"tier": "gold"} for r in model_requests)


async def test_output_that_fails_validation_fails_the_attempt_not_a_second_request(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    script = Script([], lambda results, info: "not an order")
    agent: Agent[None, Order] = Agent(FunctionModel(script), output_type=Order)
    flow = _flow(agent, "InvalidOutputAgent")
    snapshot, _ = await _first_turn(dex_in_process_worker, flow, "s1", "give me an order")

    assert snapshot.state is not None
    assert "output validation" in (snapshot.state.last_turn_error or "")
    # One model request per RunModel attempt, three attempts: never a retry prompt in between.
    assert len(script.seen) == 3
    assert all(not isinstance(messages[-1], ModelResponse) for messages in script.seen)


async def test_a_pydantic_ai_approval_is_a_session_approval(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    script = _call_then_relay(ToolCallPart("refund", {"order_id": "7"}, tool_call_id="r1"))
    agent: Agent[None, str] = Agent(FunctionModel(script))
    approvals: list[bool] = []

    @agent.tool(requires_approval=True, metadata=dex_tool_metadata(ToolEffect.IDEMPOTENT_WRITE))
    def refund(ctx: RunContext[None], order_id: str) -> str:
        approvals.append(ctx.tool_call_approved)
        return f"refunded {order_id}"

    flow = _flow(agent, "ApprovalAgent")
    async with _first_interrupt(dex_in_process_worker, flow, "refund order 7") as (
        sessions,
        interrupt,
    ):
        assert interrupt.tool_name == "refund" and approvals == []
        assert await sessions.resolve_interrupt("s1", interrupt.interrupt_id, approved=True)
        snapshot = await wait_for_turn_end(sessions, "s1")

    assert approvals == [True]
    assert snapshot.messages[-1].text == "refunded 7"


async def test_approval_required_inside_a_tool_becomes_a_question(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    script = _call_then_relay(ToolCallPart("delete", {"path": ".env"}, tool_call_id="d1"))
    agent: Agent[None, str] = Agent(FunctionModel(script))
    deleted: list[str] = []

    @agent.tool(metadata=dex_tool_metadata(ToolEffect.IDEMPOTENT_WRITE))
    def delete(ctx: RunContext[None], path: str) -> str:
        if path.startswith(".") and not ctx.tool_call_approved:
            raise ApprovalRequired
        deleted.append(path)
        return f"deleted {path}"

    flow = _flow(agent, "QuestionAgent")
    async with _first_interrupt(dex_in_process_worker, flow, "delete .env") as (sessions, question):
        assert deleted == [] and APPROVE_CHOICE in question.choices
        assert await sessions.answer_question("s1", question.interrupt_id, APPROVE_CHOICE)
        snapshot = await wait_for_turn_end(sessions, "s1")

    assert deleted == [".env"]
    assert snapshot.messages[-1].text == "deleted .env"


async def test_the_system_prompt_reaches_every_call_without_being_stored(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    script = Script([], lambda results, info: "hi")
    agent: Agent[None, str] = Agent(FunctionModel(script), system_prompt="You are terse.")
    flow = _flow(agent, "SystemPromptAgent")
    async with dex_in_process_worker([flow]) as worker:
        sessions = worker.sessions(flow)
        await sessions.start_session("s1", "one")
        await wait_for_turn_end(sessions, "s1")
        await sessions.send_user_message("s1", "two")
        snapshot = await wait_for_turn_end(sessions, "s1", turns=2)

    assert len(script.seen) == 2
    for messages in script.seen:
        first = messages[0]
        assert isinstance(first, ModelRequest)
        assert isinstance(first.parts[0], SystemPromptPart)
        assert first.parts[0].content == "You are terse."
    assert all(m.role is not MessageRole.SYSTEM for m in snapshot.messages)


async def test_a_schema_only_tool_reads_its_key_inside_the_tool_step(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    """The MCP wrapper path: ``Tool.from_schema`` whose function sends the call on with the key."""
    sent: list[tuple[str, dict[str, Any], str]] = []

    async def call_remote(ctx: RunContext[None], **arguments: Any) -> str:
        sent.append(("create_ticket", arguments, deferred_tool_idempotency_key(ctx)))
        return "ticket 42"

    def sync_read(ctx: RunContext[None], **arguments: Any) -> str:
        # A sync tool runs in a worker thread; the key still comes from the tool Step.
        sent.append(("read_ticket", arguments, deferred_tool_idempotency_key(ctx)))
        return "open"

    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    tools = [
        Tool.from_schema(call_remote, "create_ticket", "Create a ticket.", schema, takes_ctx=True),
        Tool.from_schema(sync_read, "read_ticket", "Read a ticket.", schema, takes_ctx=True),
    ]
    script = Script(
        [
            ToolCallPart("create_ticket", {"title": "printer"}, tool_call_id="t1"),
            ToolCallPart("read_ticket", {"title": "printer"}, tool_call_id="t2"),
        ],
        lambda results, info: "; ".join(r.model_response_str() for r in results),
    )
    agent: Agent[None, str] = Agent(FunctionModel(script), tools=tools)
    options = AgentSessionOptions(default_tool_effect=ToolEffect.IDEMPOTENT_WRITE)
    flow = AgentSessionFlow(
        PydanticAIRunner(agent, stream=False), flow_type="Wrapper", options=options
    )
    snapshot, worker = await _first_turn(dex_in_process_worker, flow, "w1", "file a ticket")

    assert sorted(sent) == [
        ("create_ticket", {"title": "printer"}, worker.scoped("w1") + "/turn-1/t1"),
        ("read_ticket", {"title": "printer"}, worker.scoped("w1") + "/turn-1/t2"),
    ]
    assert snapshot.messages[-1].text == "ticket 42; open"


async def test_the_key_function_refuses_outside_a_tool_step() -> None:
    from dex_agents import NoDeferredToolExecutionError

    agent: Agent[None, str] = Agent(
        FunctionModel(Script([ToolCallPart("peek", {}, tool_call_id="p")], lambda r, i: "x"))
    )
    errors: list[Exception] = []

    @agent.tool
    def peek(ctx: RunContext[None]) -> str:
        try:
            deferred_tool_idempotency_key(ctx)
        except NoDeferredToolExecutionError as error:
            errors.append(error)
        return "peeked"

    # A plain Pydantic AI run, no session: the tool runs inline and has no tool Step.
    assert (await agent.run("peek")).output == "x"
    assert len(errors) == 1 and "no deferred tool call is running here" in str(errors[0])


async def test_a_model_that_cannot_stream_runs_a_session_with_the_default_runner(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    # FunctionModel without stream_function, as a new user writes it; agent.run works with
    # it, and so must a session with PydanticAIRunner's defaults (stream=True).
    script = Script(
        [ToolCallPart("lookup", {"order_id": "7"}, tool_call_id="c1")],
        lambda results, info: f"order 7 is {results[0].content}",
    )
    agent: Agent[None, str] = Agent(FunctionModel(script))

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup(order_id: str) -> str:
        return "shipped"

    assert (await agent.run("where is order 7?")).output == "order 7 is shipped"
    script.seen.clear()
    flow = AgentSessionFlow(PydanticAIRunner(agent), flow_type="PlainModelAgent")
    snapshot, _ = await _first_turn(dex_in_process_worker, flow, "plain", "where is order 7?")

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    answer = [m for m in snapshot.messages if m.role is MessageRole.ASSISTANT][-1]
    assert answer.text == "order 7 is shipped"
    assert len(script.seen) == 2  # one plain request per RunModel
