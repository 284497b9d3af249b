"""A durable Pydantic AI agent, one turn with a tool call, no API key.

Run from the repository root:

    uv run python examples/pydantic-ai/order_agent.py

It starts the embedded local engine and an in-process Worker, runs one turn of a
``pydantic_ai.Agent`` whose model is Pydantic AI's own ``TestModel`` (it calls every tool once,
then answers), and prints the turn's AgentEvents and the stored messages. The tool call runs in its
own tool Step, with the call's idempotency key.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from dex_agents import AgentSessionOptions, ToolEffect
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker, wait_for_agent_snapshot
from dex_agents_pydantic_ai import (
    deferred_tool_idempotency_key,
    dex_tool_metadata,
    pydantic_ai_session_flow,
)
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.test import TestModel

agent: Agent[None, str] = Agent(
    TestModel(custom_output_text="Order 7 has shipped."),
    instructions="You answer questions about orders.",
)


@agent.tool(metadata=dex_tool_metadata(ToolEffect.READ))
async def lookup_order(ctx: RunContext[None], order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id}: shipped (idempotency key {deferred_tool_idempotency_key(ctx)})"


flow = pydantic_ai_session_flow(agent, "OrderAgent", AgentSessionOptions())


async def main(directory: Path) -> None:
    engine = await EngineProcess.start_local(
        directory / "engine.db", EngineLogs.in_directory(directory)
    )
    try:
        async with in_process_worker([flow], engine.server_address, directory / "cache") as worker:
            sessions = worker.sessions(flow)
            await sessions.start_session("order-session", "Where is order 7?")
            snapshot = await wait_for_agent_snapshot(
                sessions,
                "order-session",
                lambda s: (
                    s
                    if s.state is not None
                    and s.state.turn_count == 1
                    and s.state.active_turn_id is None
                    else None
                ),
                "the turn to end",
            )
            page = await worker.client.list_stream_messages("order-session", flow.agent_events, 200)
            print("AgentEvents:")
            for message in reversed(page.messages):
                event = message.value
                print(f"  {event.type} {event.payload_json()}")
            print("Stored messages:")
            for stored in snapshot.messages:
                detail = stored.text or stored.tool_output or stored.tool_arguments or ""
                tool = f" {stored.tool_name}" if stored.tool_name else ""
                print(f"  #{stored.sequence} {stored.role}{tool}: {detail}")
    finally:
        await engine.stop()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="dex-pydantic-ai-") as temporary:
        asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(temporary)))
