"""One tool Step at a time: GoogleAdkRunner.execute_deferred_tool_call through ADK's tool pipeline."""

from __future__ import annotations

from typing import Any

import pytest
from dex_agents import (
    AgentEventWriter,
    AgentToolCall,
    AgentToolCallStatus,
    DeferredToolExecution,
    QuestionAnswer,
    QuestionResolution,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPoll,
    ToolTaskStarted,
)
from dex_agents.exceptions import ToolTaskPollerMissingError
from dex_agents_google_adk import GoogleAdkRunner
from fastapi.openapi.models import APIKey, APIKeyIn
from google.adk.agents.llm_agent import LlmAgent
from google.adk.auth.auth_tool import AuthConfig
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.adk.tools.tool_context import ToolContext
from google_adk_test_support import ScriptedLlm, text_reply

SEEN: list[tuple[str, Any]] = []


def refund_order(order_id: str, tool_context: ToolContext) -> str:
    """Refund an order; ADK asks for confirmation first (require_confirmation)."""
    confirmation = tool_context.tool_confirmation
    SEEN.append(("refund", confirmation.confirmed if confirmation else None))
    return f"refunded {order_id}"


def ship_order(order_id: str, tool_context: ToolContext) -> str:
    """Ship an order after asking which carrier, with ADK's request_confirmation."""
    confirmation = tool_context.tool_confirmation
    if confirmation is None:
        tool_context.request_confirmation(hint="Ship with the express carrier?", payload={"x": 1})
        return "waiting"
    SEEN.append(("ship", (confirmation.confirmed, confirmation.payload)))
    return f"shipped {order_id}" if confirmation.confirmed else "not shipped"


def start_export(table: str) -> ToolTaskStarted:
    """Start an export job."""
    return ToolTaskStarted(f"export-{table}", poll_interval_seconds=5)


def wait_for_reply(ticket: str) -> None:
    """An ADK long-running tool that leaves its result to come later."""
    return None


def read_mailbox(tool_context: ToolContext) -> str:
    """Needs the user's credentials."""
    scheme = APIKey(**{"in": APIKeyIn.header, "name": "X-Api-Key"})  # type: ignore[arg-type]
    tool_context.request_credential(AuthConfig(auth_scheme=scheme))
    return "pending"


def _runner() -> GoogleAdkRunner:
    agent = LlmAgent(
        name="tools",
        model=ScriptedLlm(model="m", script=[text_reply("unused")]),
        tools=[
            FunctionTool(refund_order, require_confirmation=True),
            ship_order,
            start_export,
            LongRunningFunctionTool(wait_for_reply),
            read_mailbox,
        ],
    )
    return GoogleAdkRunner(agent)


def _execution(
    name: str,
    arguments: str,
    *,
    requires_approval: bool = False,
    answers: tuple[QuestionAnswer, ...] = (),
    continuation: str | None = None,
) -> DeferredToolExecution:
    record = AgentToolCall(
        "call-1", name, arguments, ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval,
        AgentToolCallStatus.APPROVED, "turn-1", 0, input_continuation=continuation,
    )  # fmt: skip
    return DeferredToolExecution(
        flow_id="session-1",
        tool_call=record,
        attempt=1,
        events=AgentEventWriter.discarding(turn_id="turn-1"),
        input_answers=answers,
        supports_tool_tasks=True,
    )


async def test_an_approved_call_counts_as_confirmed_only_for_adks_require_confirmation() -> None:
    SEEN.clear()
    runner = _runner()

    refunded = await runner.execute_deferred_tool_call(
        _execution("refund_order", '{"order_id":"7"}', requires_approval=True)
    )
    asked = await runner.execute_deferred_tool_call(
        _execution("ship_order", '{"order_id":"7"}', requires_approval=True)
    )

    assert refunded == ToolExecutionResult("refunded 7")
    assert SEEN == [("refund", True)]
    # The tool's own question is not answered by the approval of the call.
    assert isinstance(asked, ToolInputRequested)
    assert (asked.question, asked.choices, asked.allows_free_text) == (
        "Ship with the express carrier?",
        ("yes", "no"),
        False,
    )

    answered = await runner.execute_deferred_tool_call(
        _execution(
            "ship_order",
            '{"order_id":"7"}',
            answers=(
                QuestionAnswer(
                    "call-1-input-1", asked.question, QuestionResolution.ANSWERED, "yes"
                ),
            ),
            continuation=asked.continuation,
        )
    )
    assert answered == ToolExecutionResult("shipped 7")
    assert SEEN[-1] == ("ship", (True, {"x": 1}))


async def test_without_approval_adks_gate_asks_and_the_answer_decides() -> None:
    SEEN.clear()
    runner = _runner()
    asked = await runner.execute_deferred_tool_call(_execution("refund_order", '{"order_id":"8"}'))
    assert isinstance(asked, ToolInputRequested) and SEEN == []
    declined = _execution(
        "refund_order",
        '{"order_id":"8"}',
        answers=(
            QuestionAnswer("call-1-input-1", asked.question, QuestionResolution.ANSWERED, "no"),
        ),
        continuation=asked.continuation,
    )
    with pytest.raises(ToolExecutionError, match="rejected"):
        await runner.execute_deferred_tool_call(declined)
    assert SEEN == []


async def test_a_task_tool_and_what_a_tool_step_cannot_do() -> None:
    runner = _runner()
    started = await runner.execute_deferred_tool_call(_execution("start_export", '{"table":"t"}'))
    assert started == ToolTaskStarted("export-t", poll_interval_seconds=5)
    with pytest.raises(ToolTaskPollerMissingError, match="no task poller"):
        record = _execution("start_export", "{}").tool_call
        await runner.poll_tool_task(
            ToolTaskPoll("session-1", record, 1, AgentEventWriter.discarding())
        )
    with pytest.raises(ToolExecutionError, match="returned nothing"):
        await runner.execute_deferred_tool_call(_execution("wait_for_reply", '{"ticket":"1"}'))
    with pytest.raises(ToolExecutionError, match="credentials"):
        await runner.execute_deferred_tool_call(_execution("read_mailbox", "{}"))
    with pytest.raises(ToolExecutionError, match="not valid JSON"):
        await runner.execute_deferred_tool_call(_execution("ship_order", "{not json"))
    with pytest.raises(ToolExecutionError, match="must be an object"):
        await runner.execute_deferred_tool_call(_execution("ship_order", "[1]"))


async def test_an_agent_tool_runs_its_sub_agent_inside_one_tool_step() -> None:
    helper_model = ScriptedLlm(model="helper", script=[text_reply("The teapot shipped on Monday.")])
    helper = LlmAgent(name="shipping_expert", model=helper_model, description="Knows shipments.")
    runner = GoogleAdkRunner(
        LlmAgent(
            name="front_desk",
            model=ScriptedLlm(model="m", script=[text_reply("unused")]),
            tools=[AgentTool(helper)],
        )
    )

    result = await runner.execute_deferred_tool_call(
        _execution("shipping_expert", '{"request":"When did order 7 ship?"}')
    )

    assert result == ToolExecutionResult("The teapot shipped on Monday.")
    (request,) = helper_model.requests
    assert "When did order 7 ship?" in str(request.contents)
