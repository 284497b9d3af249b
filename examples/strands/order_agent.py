"""A durable Strands agent, one turn with a tool call, no API key.

Run from the repository root:

    uv run python examples/strands/order_agent.py

It starts the embedded local engine and an in-process Worker, runs one turn of a ``strands.Agent``
whose model is the scripted ``ScriptedModel`` of ``dex_agents_strands.testing`` (it calls the tool
once, then answers), and prints the turn's AgentEvents and the stored messages. The tool call runs
in its own tool Step, with the call's idempotency key.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from dex_agents import AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker
from dex_agents_strands import IDEMPOTENCY_KEY_STATE, strands_session_flow
from dex_agents_strands.testing import ModelCall, ScriptedModel, text_reply, tool_use_reply
from strands import Agent, ToolContext, tool
from strands.types.content import Message


@tool(context=True)
def lookup_order(order_id: str, tool_context: ToolContext) -> str:
    """Look up an order by its ID.

    Args:
        order_id: The order's ID.
    """
    key = tool_context.invocation_state[IDEMPOTENCY_KEY_STATE]
    return f"order {order_id}: shipped (idempotency key {key})"


def reply(call: ModelCall) -> Message:
    """Call the tool first, then answer with its result."""
    if not call.tool_outputs():
        return tool_use_reply("lookup-1", "lookup_order", {"order_id": "7"})
    return text_reply("Order 7 has shipped.")


agent = Agent(
    model=ScriptedModel(reply),
    tools=[lookup_order],
    system_prompt="You answer questions about orders.",
    callback_handler=None,
)
flow = strands_session_flow(
    agent,
    "OrderAgent",
    AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
)


async def main(directory: Path) -> None:
    engine = await EngineProcess.start_local(
        directory / "engine.db", EngineLogs.in_directory(directory)
    )
    try:
        async with in_process_worker([flow], engine.server_address, directory / "cache") as worker:
            sessions = worker.sessions(flow)
            await sessions.run_turn("order-session", "Where is order 7?")
            snapshot = await sessions.get_agent_snapshot("order-session")
            page = await worker.client.list_stream_messages("order-session", flow.agent_events, 200)
            print("AgentEvents:")
            for message in reversed(page.messages):
                event = message.value
                print(f"  {event.type} {event.payload_json()}")
            print("Stored messages:")
            for stored in snapshot.messages:
                detail = stored.text or stored.tool_output or stored.tool_arguments or ""
                tool_name = f" {stored.tool_name}" if stored.tool_name else ""
                print(f"  #{stored.sequence} {stored.role}{tool_name}: {detail}")
    finally:
        await engine.stop()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="dex-strands-") as temporary:
        asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(temporary)))
