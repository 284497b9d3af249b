"""The session Flow runs the Stepwise runner: a read tool and an approved write in one turn."""

from __future__ import annotations

from agent_session_test_support import running_flow_stack
from dex_agents import AgentSnapshot, AgentToolCallStatus, ToolEffect
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
from dex_agents.testing import has_pending_interrupts, turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory

REFUNDS: list[str] = []


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id} is paid"


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE)
async def refund_order(order_id: str, context: ToolCallContext) -> str:
    """Refund an order."""
    REFUNDS.append(context.idempotency_key)
    return f"refunded {order_id}"


def _respond(request: ModelRequest) -> ScriptedModelReply:
    results = ScriptedModelClient.tool_results(request)
    if not results:
        return ScriptedModelReply(
            tool_calls=[
                ScriptedToolCall("lookup_order", {"order_id": "7"}, tool_call_id="lookup"),
                ScriptedToolCall("refund_order", {"order_id": "7"}, tool_call_id="refund"),
            ]
        )
    return ScriptedModelReply(text=" | ".join(result.output for result in results))


async def test_stepwise_agent_runs_tools_and_waits_for_approval(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    definition = AgentDefinition(
        name="support",
        instructions="You help customers.",
        model=ScriptedModelClient(_respond),
        tools=[lookup_order, refund_order],
    )
    flow = stepwise_agent_session_flow(definition, flow_type="SupportAgent")
    async with running_flow_stack(dex_in_process_worker, flow) as stack:
        await stack.sessions.start_session("session-1", "refund order 7")

        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "session-1", has_pending_interrupts
        )
        statuses = {record.tool_name: record.status for record in snapshot.tool_calls}
        assert statuses["refund_order"] is AgentToolCallStatus.AWAITING_APPROVAL
        assert REFUNDS == []
        assert await stack.sessions.resolve_interrupt("session-1", "refund", approved=True)

        def idle(snapshot: AgentSnapshot) -> AgentSnapshot | None:
            return turn_ended(1)(snapshot)

        snapshot = await wait_for_agent_snapshot(stack.sessions, "session-1", idle)
        assert snapshot.messages[-1].text == "order 7 is paid | refunded 7"
        assert [stack.dex.scoped("session-1") + "/turn-1/refund"] == REFUNDS
        assert snapshot.state is not None and snapshot.state.last_turn_error is None
