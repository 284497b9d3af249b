"""One durable OpenAI Agents SDK turn on the embedded local Dex engine, with no API key.

The agent is an ordinary ``agents.Agent`` with a ``function_tool``. Its model is a
``ReplyFunctionModel``: the SDK's ``Model`` interface answered by a small function (through the
SDK's own scripted model), so the SDK's real run loop runs without a provider. The script starts a
private local engine and an in-process Worker, sends one message, prints every AgentEvent of the
turn as it arrives (model calls, the tool call in its own Step, the streamed text), then the
messages the session stored.

Run it from the repository root::

    uv run python examples/openai-agents/durable_turn.py

With a real model, drop ``model=`` (the SDK's default OpenAI model) and set ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from agents import Agent, RunConfig, function_tool
from agents.items import TResponseOutputItem
from dex import LongPollTimeoutError
from dex_agents import (
    AgentEventType,
    AgentSessionOptions,
    AgentSnapshot,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker, wait_for_agent_snapshot
from dex_agents_openai_agents import OpenAIAgentsRunner, openai_agents_session_flow
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)

SESSION_ID = "order-7"


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id}: one teapot, shipped yesterday"


async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
    """The model: look the order up first, then answer with what the tool found."""
    results = call.tool_outputs_since_user()
    if not results:
        return [function_call("lookup_order", {"order_id": "7"}, call_id="call_lookup_7")]
    return [assistant_message(f"Good news: {results[-1]}.")]


agent = Agent(
    name="support",
    instructions="You help customers with their orders.",
    model=ReplyFunctionModel(reply, model="example-model"),
    tools=[lookup_order],
)
flow = openai_agents_session_flow(
    OpenAIAgentsRunner(agent, run_config=RunConfig(tracing_disabled=True)),
    flow_type="SupportAgent",
    options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
)


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dex-agents-openai-agents-") as scratch:
        directory = Path(scratch)
        engine = await EngineProcess.start_local(
            directory / "engine.db", EngineLogs.in_directory(directory)
        )
        try:
            async with in_process_worker([flow], engine.server_address, directory / "cache") as dex:
                sessions = dex.sessions(flow)
                print("user: Where is order 7?")
                await sessions.start_session(SESSION_ID, "Where is order 7?")
                token = ""
                while True:
                    try:
                        message = await dex.client.read_stream(
                            SESSION_ID, flow.agent_events, token, timedelta(seconds=5)
                        )
                    except LongPollTimeoutError:
                        continue
                    token, event = message.resume_token, message.value
                    print(f"event {event.type}: {event.payload}")
                    if event.type in (AgentEventType.TURN_COMPLETED, AgentEventType.TURN_FAILED):
                        break
                snapshot = await wait_for_agent_snapshot(
                    sessions, SESSION_ID, _turn_ended, description="the turn to end"
                )
        finally:
            await engine.stop()
    print("stored messages:")
    for stored in snapshot.messages:
        shown = stored.text or stored.tool_output or f"{stored.tool_name}({stored.tool_arguments})"
        print(f"  {stored.sequence} {stored.role.value}: {shown}")


def _turn_ended(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    state = snapshot.state
    return snapshot if state is not None and state.active_turn_id is None else None


if __name__ == "__main__":
    asyncio.run(main())
