"""ADK agents in real sessions: the local engine, an in-process Worker, one Step per call. What
every runner does alike (bad calls, a model failing mid-turn) is ``tests-shared``'s."""

from __future__ import annotations

from typing import Any

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentSessionFlow,
    AgentSessionOptions,
    MessageRole,
    ToolEffect,
    ToolInputRequested,
    ToolPolicy,
    require_deferred_tool_execution,
)
from dex_agents.testing import pending_interrupt, tool_messages, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_google_adk import GoogleAdkRunner, idempotency_key_for_tool_call
from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from google_adk_test_support import (
    ScriptedLlm,
    call_reply,
    function_responses,
    running_session,
    text_reply,
    turn_ended,
)


def _echo_results(request: LlmRequest) -> LlmResponse:
    texts = [str(response.response) for response in function_responses(request)]
    return text_reply("results: " + " | ".join(texts))(request)  # type: ignore[return-value]


def _flow(
    name: str, model: ScriptedLlm, tools: list[Any], policies: dict[str, ToolPolicy]
) -> AgentSessionFlow:
    """The session Flow ``<Name>Agent`` of the ``LlmAgent`` ``name`` with these tool policies."""
    return AgentSessionFlow(
        GoogleAdkRunner(LlmAgent(name=name, model=model, tools=tools)),
        flow_type=f"{name.capitalize()}Agent",
        options=AgentSessionOptions(tool_policies=policies),
    )


class JsonSchemaTool(BaseTool):
    """A schema-only ADK tool, the way an application wraps an MCP tool: its own
    ``FunctionDeclaration`` from the JSON Schema, and the call's key read inside the tool."""

    def __init__(self, name: str, description: str, input_schema: dict[str, Any], server: Any):
        super().__init__(name=name, description=description)
        self._input_schema = input_schema
        self._server = server

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=self._input_schema,
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        key = idempotency_key_for_tool_call(tool_context)
        return await self._server.call_tool(self.name, args, idempotency_key=key)


class FakeMcpServer:
    """Stands in for ``McpToolSource.call_tool``: records each call with its key."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []

    async def call_tool(self, name: str, arguments: dict[str, Any], *, idempotency_key: str) -> str:
        self.calls.append((name, arguments, idempotency_key))
        return f"tagged {arguments['ticket']}"


async def test_a_schema_only_tool_reads_its_key_inside_its_own_tool_step(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    server = FakeMcpServer()
    tag = JsonSchemaTool(
        "tag_ticket",
        "Tag a ticket.",
        {
            "type": "object",
            "properties": {"ticket": {"type": "string"}},
            "required": ["ticket"],
        },
        server,
    )
    model = ScriptedLlm(
        model="m",
        script=[
            call_reply(("tag_ticket", {"ticket": "T-1"}), ("tag_ticket", {"ticket": "T-2"})),
            _echo_results,
        ],
    )
    flow = _flow("tagger", model, [tag], {"tag_ticket": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)})
    async with running_session(dex_in_process_worker, [flow]) as stack:
        snapshot = await stack.run_turn(flow, "tags-1", "Tag T-1 and T-2")
        history = await stack.executed_step_types("tags-1")

    calls = [m for m in snapshot.messages if m.role is MessageRole.ASSISTANT and m.tool_call_id]
    expected = {
        f"{stack.dex.scoped('tags-1')}/turn-1/{message.tool_call_id}": (
            "tag_ticket",
            {"ticket": ticket},
        )
        for ticket, message in zip(("T-1", "T-2"), calls, strict=True)
    }
    assert {key: (name, arguments) for name, arguments, key in server.calls} == expected
    assert len(server.calls) == 2
    assert (
        snapshot.messages[-1].text == "results: {'result': 'tagged T-1'} | {'result': 'tagged T-2'}"
    )
    assert history.count("CallTool") == 2
    assert history.count("RunModel") == 2


SHIPMENTS: list[str] = []


def ship_order(order_id: str, tool_context: ToolContext) -> str:
    """Ship an order; a write that must never repeat."""
    SHIPMENTS.append(idempotency_key_for_tool_call(tool_context))
    raise ConnectionError("the carrier hung up after taking the order")


async def test_a_non_idempotent_write_that_raised_has_an_unknown_outcome(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    SHIPMENTS.clear()
    model = ScriptedLlm(
        model="m", script=[call_reply(("ship_order", {"order_id": "7"})), _echo_results]
    )
    policies = {"ship_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)}
    shipping = _flow("shipping", model, [ship_order], policies)
    async with running_session(dex_in_process_worker, [shipping]) as stack:
        shipped = await stack.run_turn(shipping, "ship-1", "ship order 7")

    # It may have taken effect: outcome unknown, never retried.
    assert len(SHIPMENTS) == 1
    (tool_message,) = tool_messages(shipped)
    assert tool_message.tool_output == OUTCOME_UNKNOWN_TOOL_RESULT


REFUNDS: list[bool] = []


def refund_order(order_id: str, tool_context: ToolContext) -> str:
    """Refund an order."""
    confirmation = tool_context.tool_confirmation
    REFUNDS.append(confirmation is not None and confirmation.confirmed)
    return f"refunded {order_id}"


async def test_adk_confirmation_waits_for_the_sessions_approval(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    REFUNDS.clear()
    refund = call_reply(("refund_order", {"order_id": "7"}))
    # One model serves both sessions: each turn calls the tool first, then answers.
    model = ScriptedLlm(
        model="m",
        script=[lambda r: _echo_results(r) if function_responses(r) else refund(r)],  # type: ignore[arg-type,return-value]
    )
    flow = AgentSessionFlow(
        GoogleAdkRunner(
            LlmAgent(
                name="refunds",
                model=model,
                tools=[FunctionTool(refund_order, require_confirmation=True)],
            )
        ),
        flow_type="RefundAgent",
        options=AgentSessionOptions(default_tool_effect=ToolEffect.NON_IDEMPOTENT_WRITE),
    )
    async with running_session(dex_in_process_worker, [flow]) as stack:
        sessions = stack.sessions(flow)
        for session_id, approved in (("approve-1", True), ("reject-1", False)):
            await sessions.start_session(session_id, "refund order 7")
            interrupt = await wait_for_agent_snapshot(
                sessions, session_id, pending_interrupt, description="the refund's approval"
            )
            assert interrupt.tool_name == "refund_order"
            assert await sessions.resolve_interrupt(
                session_id, interrupt.interrupt_id, approved=approved, rejection_message="no"
            )
        approved_end = await wait_for_agent_snapshot(
            sessions, "approve-1", turn_ended(), description="the approved turn to end"
        )
        rejected_end = await wait_for_agent_snapshot(
            sessions, "reject-1", turn_ended(), description="the rejected turn to end"
        )

    assert REFUNDS == [True]  # ran once, after the approval, with ADK's confirmation
    assert "refunded 7" in (approved_end.messages[-1].text or "")
    assert "The user rejected this tool call. Reason: no" in (rejected_end.messages[-1].text or "")


def pick_slot(day: str) -> ToolInputRequested | str:
    """Asks which slot with the session's own question, then books it."""
    answers = require_deferred_tool_execution().input_answers
    if not answers:
        return ToolInputRequested(f"Which slot on {day}?", choices=("9:00", "14:00"))
    return f"booked {day} {answers[-1].answer}"


async def test_a_tool_asks_the_user_with_tool_input_requested(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    model = ScriptedLlm(
        model="m", script=[call_reply(("pick_slot", {"day": "Monday"})), _echo_results]
    )
    flow = _flow(
        "booking", model, [pick_slot], {"pick_slot": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)}
    )
    async with running_session(dex_in_process_worker, [flow]) as stack:
        sessions = stack.sessions(flow)
        await sessions.start_session("book-1", "Book me on Monday")
        question = await wait_for_agent_snapshot(
            sessions, "book-1", pending_interrupt, description="the tool's question"
        )
        assert (question.question, question.choices) == ("Which slot on Monday?", ("9:00", "14:00"))
        assert await sessions.answer_question("book-1", question.interrupt_id, "14:00")
        snapshot = await wait_for_agent_snapshot(
            sessions, "book-1", turn_ended(), description="the turn to end"
        )
        history = await stack.executed_step_types("book-1")

    assert snapshot.messages[-1].text == "results: {'result': 'booked Monday 14:00'}"
    assert history.count("CallTool") == 2  # asked, then ran with the answer
