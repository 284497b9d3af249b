"""A durable Claude Agent SDK agent: one turn with a read and an approved refund, no API key.

Run it with ``uv run python examples/claude-agent-sdk/refund_agent.py``. It starts the embedded
Dex engine, a Worker in this process, and a local fake Anthropic API that plays the model, then
runs one turn through the real Claude Code CLI: the model looks up order 7 (a read, run inside
the agent loop), asks to refund it (a write, deferred to its own tool Step after an approval),
and answers. It prints the turn's events and the stored messages.
"""

import asyncio
import tempfile
from pathlib import Path

from claude_agent_sdk import tool
from dex_agents import AgentSessionFlow, AgentSessionOptions, AgentStatus, ToolEffect, ToolPolicy
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker, wait_for_agent_snapshot
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
    directory = Path(tempfile.mkdtemp(prefix="claude-agent-sdk-example-"))
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
    engine = await EngineProcess.start_local(
        directory / "engine.db", EngineLogs.in_directory(directory)
    )
    try:
        async with in_process_worker([flow], engine.server_address, directory / "cache") as dex:
            sessions = dex.sessions(flow)
            await sessions.start_session("session-1", "Please refund order 7")
            approval = await wait_for_agent_snapshot(
                sessions, "session-1", lambda s: next(iter(s.pending_interrupts), None)
            )
            print(f"approval asked for {approval.tool_name} ({approval.interrupt_id})")
            await sessions.resolve_interrupt("session-1", approval.interrupt_id, approved=True)
            snapshot = await wait_for_agent_snapshot(
                sessions,
                "session-1",
                lambda s: (
                    s
                    if s.state
                    and s.state.turn_count == 1
                    and s.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
                    else None
                ),
            )
            events = await dex.client.list_stream_messages("session-1", flow.agent_events, 200)
            print("events:")
            for message in reversed(events.messages):  # the newest comes first
                print(f"  {message.value.type} {message.value.payload}")
            print("stored messages:")
            for stored in snapshot.messages:
                print(f"  {stored.role}: {stored.text or stored.tool_output or stored.tool_name}")
    finally:
        await engine.stop()
        await model_api.close()


if __name__ == "__main__":
    asyncio.run(main())
