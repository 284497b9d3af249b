"""The spec's Stepwise snippet, run as written with a ScriptedModelClient, against the local engine.

Deviation from the snippet: ``built_in_tools`` is left out, because this build has no built-in
tools yet (``BuiltInTool`` does not exist in ``dex_agents``).
"""

from __future__ import annotations

import json

from agent_session_test_support import running_flow_stack
from dex import (
    Registry,
)
from dex_agents import MessageRole, ToolEffect
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolCallContext,
    function_tool,
    stepwise_agent_session_flow,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    pending_interrupt,
    read_step_history,
    turn_ended,
    wait_for_agent_snapshot,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory


class _Orders:
    def __init__(self) -> None:
        self.orders = {"7": {"order_id": "7", "item": "teapot", "total_cents": "2599"}}

    async def get(self, order_id: str) -> dict[str, str]:
        return self.orders[order_id]


class _Payments:
    def __init__(self) -> None:
        self.refunds: list[tuple[str, int, str]] = []

    async def refund(self, order_id: str, amount_cents: int, *, idempotency_key: str) -> str:
        self.refunds.append((order_id, amount_cents, idempotency_key))
        return f"refunded {amount_cents} cents on order {order_id}"


orders = _Orders()
payments = _Payments()


# The snippet, as written.
@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return await orders.get(order_id)


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str, amount_cents: int, context: ToolCallContext) -> str:
    """Refund part of an order."""
    return await payments.refund(order_id, amount_cents, idempotency_key=context.idempotency_key)


def _support_model(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if not results:
        return ScriptedModelReply(
            text="Let me check that order.",
            tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})],
        )
    if len(results) == 1:
        order = json.loads(results[0].output)
        return ScriptedModelReply(
            tool_calls=[
                ScriptedToolCall(
                    "refund_order",
                    {"order_id": order["order_id"], "amount_cents": int(order["total_cents"])},
                )
            ]
        )
    return ScriptedModelReply(text=f"Done: {results[-1].output}.")


model = ScriptedModelClient(_support_model)

support_agent = AgentDefinition(
    name="support",
    instructions="You help customers with their orders.",
    model=model,
    tools=[lookup_order, refund_order],
)

flow = stepwise_agent_session_flow(support_agent, flow_type="SupportAgent")
registry = Registry([flow], allow_async_handlers=True)


async def test_the_stepwise_snippet_runs_a_turn_with_an_approved_refund(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_flow_stack(dex_in_process_worker, flow) as stack:
        sessions, server_address = stack.sessions, stack.server_address
        await sessions.start_session("session-42", "Order 7 arrived broken. Refund it, please.")

        interrupt = await wait_for_agent_snapshot(
            sessions,
            "session-42",
            pending_interrupt,
            description="the refund approval",
        )
        assert interrupt.tool_name == "refund_order"
        assert payments.refunds == []  # nothing ran before the approval
        assert await sessions.resolve_interrupt("session-42", interrupt.interrupt_id, approved=True)

        snapshot = await wait_for_agent_snapshot(
            sessions, "session-42", turn_ended(1), description="the finished turn"
        )
        history = await read_step_history(server_address, stack.dex.scoped("session-42"))

    refund_call_id = interrupt.tool_call_id
    assert payments.refunds == [
        ("7", 2599, f"{stack.dex.scoped('session-42')}/turn-1/{refund_call_id}")
    ]
    messages = snapshot.messages
    assert messages[-1].role is MessageRole.ASSISTANT
    assert messages[-1].text == "Done: refunded 2599 cents on order 7."
    assert [message.role for message in messages] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,  # "Let me check that order."
        MessageRole.ASSISTANT,  # lookup_order call
        MessageRole.TOOL,
        MessageRole.ASSISTANT,  # refund_order call
        MessageRole.TOOL,
        MessageRole.ASSISTANT,  # final answer
    ]
    assert snapshot.usage.model_calls == 3
    assert len(model.requests) >= 3
    executed = [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
    assert executed.count("RunModel") == 3
    assert "CallTool" in executed  # the read lookup
    assert "AwaitToolApproval" in executed
    assert "CallSingleAttemptTool" in executed  # the approved refund
