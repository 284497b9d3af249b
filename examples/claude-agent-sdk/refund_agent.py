"""A durable Claude Agent SDK agent: one turn with a read and an approved refund, no API key.

Run it with ``uv run python examples/claude-agent-sdk/refund_agent.py``. ``LocalRuntime``
starts the embedded Dex engine on ``./.dex-agents/engine.db`` and a Worker in this process; a
local fake Anthropic API plays the model. One turn runs through the real Claude Code CLI: the
model looks up order 7 (a read, run inside the agent loop), asks to refund it (a write, deferred
to its own tool Step after an approval), and answers. It prints the approval, the turn's events
and how the turn ended; a second run continues the same session with its second turn.
"""

import asyncio

from claude_agent_sdk import tool
from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy, TurnStatus
from dex_agents.runtime import LocalRuntime
from dex_agents_claude_agent_sdk import ClaudeAgentSdkRunner, current_deferred_tool_execution
from dex_agents_claude_agent_sdk.testing import (
    FAKE_API_KEY_ENVIRONMENT,
    FakeAnthropicServer,
    FakeModelReply,
    FakeModelRequest,
    FakeToolCall,
)


@tool("lookup_order", "Look up an order by its ID.", {"order_id": str})
async def lookup_order(args):
    return {"content": [{"type": "text", "text": f"order {args['order_id']}: 4200 cents, shipped"}]}


@tool("refund_order", "Refund an order.", {"order_id": str, "amount_cents": int})
async def refund_order(args):
    call = current_deferred_tool_execution()  # set in the refund's own tool Step
    key = call.idempotency_key if call else "-"
    return {"content": [{"type": "text", "text": f"refunded {args['amount_cents']} (key {key})"}]}


def play_the_model(request: FakeModelRequest) -> FakeModelReply:
    if request.model_call_index == 1:
        return FakeModelReply(tool_calls=[FakeToolCall("lookup_order", {"order_id": "7"})])
    if request.model_call_index == 2:
        refund = FakeToolCall("refund_order", {"order_id": "7", "amount_cents": 4200})
        return FakeModelReply(text="Order 7 shipped; refunding it.", tool_calls=[refund])
    return FakeModelReply(text="Done: " + request.tool_outputs[-1])


async def main() -> None:
    model_api = FakeAnthropicServer()
    await model_api.start()
    runner = ClaudeAgentSdkRunner(
        instructions="You help customers with their orders.",
        tools=[lookup_order, refund_order],
        model="claude-example",
        upstream_base_url=model_api.route("orders", play_the_model),
        env=FAKE_API_KEY_ENVIRONMENT,
    )
    flow = AgentSessionFlow(
        runner,
        flow_type="OrdersAgent",
        options=AgentSessionOptions(
            tool_policies={
                "lookup_order": ToolPolicy(ToolEffect.READ),
                "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),  # asks for approval
            }
        ),
    )
    try:
        async with LocalRuntime([flow]) as runtime:
            sessions = runtime.sessions()
            start = await sessions.latest_event_token("session-1")
            result = await sessions.run_turn("session-1", "Please refund order 7")
            while result.status is TurnStatus.WAITING_FOR_PERSON:
                for approval in result.pending_interrupts:
                    print(f"approval asked for {approval.tool_name} ({approval.interrupt_id})")
                    await sessions.resolve_interrupt(
                        "session-1", approval.interrupt_id, approved=True
                    )
                result = await sessions.wait_for_turn("session-1", result)
            print("events:")
            async for message in sessions.stream_events("session-1", start):
                print(f"  {message.value.type} {message.value.payload}")
                if message.value.type == "turn_completed":
                    break
            print(result.turn_id, result.status, result.text)
            for call in result.tool_calls:
                print(f"  {call.tool_name}: {call.status}")
    finally:
        await model_api.close()


if __name__ == "__main__":
    asyncio.run(main())
