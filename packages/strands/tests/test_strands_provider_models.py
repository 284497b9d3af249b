"""Strands' own provider models (``OpenAIModel``, ``LiteLLMModel``) against a local Chat
Completions server, in a real session: the real-provider path (streamed), with a tool call in its
own tool Step."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from chat_completions_server import MODEL, chat_completions_server
from dex_agents import AgentEventType, AgentSessionOptions, MessageRole, ToolEffect, ToolPolicy
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_strands import strands_session_flow
from strands import Agent, tool
from strands.models import Model
from strands.models.openai import OpenAIModel


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order.
    """
    return "shipped"


def _openai(base_url: str) -> Model:
    # max_retries=0: Dex retries the model call, the client must not repeat it itself.
    return OpenAIModel(
        client_args={"base_url": base_url, "api_key": "not-a-key", "max_retries": 0},
        model_id=MODEL,
    )


def _litellm(base_url: str) -> Model:
    # LiteLLM's bundled cost map, not a download at import (as dex_agents.litellm does).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from strands.models.litellm import LiteLLMModel

    return LiteLLMModel(
        client_args={"api_base": base_url, "api_key": "not-a-key", "num_retries": 0},
        model_id=f"openai/{MODEL}",
    )


@pytest.mark.parametrize("provider", [_openai, _litellm], ids=["openai", "litellm"])
async def test_a_streamed_provider_turn_with_a_tool_call(
    provider: Callable[[str], Model], dex_in_process_worker: InProcessWorkerFactory
) -> None:
    with chat_completions_server() as server:
        agent = Agent(
            model=provider(server.base_url),
            tools=[lookup_order],
            system_prompt="You answer questions about orders.",
            callback_handler=None,
        )
        options = AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)})
        flow = strands_session_flow(agent, "StrandsOpenAI", options)
        async with dex_in_process_worker([flow]) as worker:
            sessions = worker.sessions(flow)
            result = await sessions.run_turn("s1", "Where is order 7?")
            snapshot = await sessions.get_agent_snapshot("s1")
            page = await worker.client.list_stream_messages(
                worker.scoped("s1"), flow.agent_events, 500
            )
            events = [message.value for message in page.messages]

    assert result.error is None and result.text == "Answer: shipped"
    (call,) = result.tool_calls
    assert (call.tool_name, call.output) == ("lookup_order", "shipped")
    assert [m.role for m in snapshot.messages] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]
    assert [body.get("stream") for body in server.requests] == [True, True]
    # The second request carried the tool result as a Chat Completions tool message.
    tool_messages = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [call.tool_call_id]
    system = server.requests[0]["messages"][0]
    assert system["role"] == "system"
    # OpenAIModel sends the text, LiteLLMModel a list of content parts.
    assert "You answer questions about orders." in str(system["content"])
    # The answer arrived in two chunks, each written as a text delta as it came.
    deltas = [
        str(event.payload_json()["text"])
        for event in reversed(events)
        if event.type == AgentEventType.TEXT_DELTA
    ]
    assert deltas == ["Answer:", " shipped"]
