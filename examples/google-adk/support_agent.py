"""A Google ADK support agent as a durable Dex session, on the embedded local engine.

Run it from the repository root, with no API key:

    uv run python examples/google-adk/support_agent.py

It starts ``dex-local-engine`` on a database in a temporary directory, serves the agent with a
Worker in this process, and runs one turn: the model asks for ``lookup_order`` (a read tool that
runs in its own tool Step) and then answers. The model is a scripted ADK ``BaseLlm`` that stands
in for Gemini; give the agent ``model="gemini-2.5-flash"`` (and a key) to use the real one. It
prints the turn's AgentEvents and the stored messages, whose ``framework_item`` is ADK's own event
JSON.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path

from dex_agents import AgentSessionOptions, AgentStatus, ToolEffect, ToolPolicy
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker, wait_for_agent_snapshot
from dex_agents_google_adk import google_adk_session_flow
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

ORDERS = {"7": {"item": "a ceramic teapot", "status": "delivered"}}
USAGE = types.GenerateContentResponseUsageMetadata(prompt_token_count=42, candidates_token_count=9)


def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return ORDERS[order_id]


class ScriptedGemini(BaseLlm):
    """Asks for the order first, then answers with what the tool found, streaming the text."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        results = [part.function_response for part in last.parts or () if part.function_response]
        if not results:
            call = types.FunctionCall(name="lookup_order", args={"order_id": "7"})
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)]),
                usage_metadata=USAGE,
            )
            return
        order = results[0].response or {}
        words = f"Order 7 ({order.get('item')}) was {order.get('status')}.".split(" ")
        for index, word in enumerate(words):
            chunk = word if index == 0 else " " + word
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=chunk)]), partial=True
            )
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=" ".join(words))]),
            usage_metadata=USAGE,
        )


agent = LlmAgent(
    name="support",
    model=ScriptedGemini(model="scripted-gemini"),
    instruction="You help customers with their orders.",
    tools=[lookup_order],
)
flow = google_adk_session_flow(
    agent,
    flow_type="GoogleAdkSupportExample",
    options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
)


async def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dex-google-adk-example-") as directory:
        root = Path(directory)
        engine = await EngineProcess.start_local(root / "engine.db", EngineLogs.in_directory(root))
        try:
            async with in_process_worker([flow], engine.server_address, root / "cache") as dex:
                sessions = dex.sessions(flow)
                await sessions.start_session("example-1", "Hi! Where is my order 7?")
                snapshot = await wait_for_agent_snapshot(
                    sessions,
                    "example-1",
                    lambda s: (
                        s
                        if s.state is not None
                        and s.state.turn_count == 1
                        and s.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
                        else None
                    ),
                    description="the turn to end",
                )
                page = await dex.client.list_stream_messages("example-1", flow.agent_events, 200)
        finally:
            await engine.stop()
    print("AgentEvents of the turn:")
    for message in reversed(page.messages):
        event = message.value
        print(f"  {event.type:<20} {event.payload}")
    print("Stored messages:")
    for stored in snapshot.messages:
        shown = stored.text or stored.tool_output or f"{stored.tool_name}({stored.tool_arguments})"
        print(f"  {stored.sequence}. {stored.role.value:<9} {shown}")
        print(f"     framework_item: {stored.framework_item[:110]}")
    state = snapshot.state
    if state is not None and state.last_turn_error:
        print(f"The turn failed: {state.last_turn_error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
