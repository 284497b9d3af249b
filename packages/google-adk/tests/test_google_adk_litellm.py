"""ADK's LiteLlm model against a Chat Completions server the test runs on loopback.

The server speaks the OpenAI wire format, streamed (Server-Sent Events) or not. Its model first
asks for ``lookup_order`` and, once the request carries the tool's result, answers with text.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dex_agents import (
    AgentEventType,
    AgentSessionFlow,
    AgentSessionOptions,
    MessageRole,
    ToolCallsRequested,
    ToolEffect,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import ChatCompletionReply, ChatCompletionsServer, TurnContextBuilder
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_google_adk import GoogleAdkRunner
from google.adk.agents import RunConfig
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.run_config import StreamingMode  # type: ignore[attr-defined]
from google_adk_test_support import running_session

# LiteLLM fetches a model price list over the network unless told to use its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
from google.adk.models.lite_llm import LiteLlm

RESPONSE_MODEL = "fake-gpt-2026-01"
ANSWER = ("Order 7 was", " delivered.")  # the server streams a text in two halves
LOOKUPS: list[str] = []


def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    LOOKUPS.append(order_id)
    return f"order {order_id}: delivered"


def _answer(body: dict[str, Any]) -> ChatCompletionReply:
    """The model: a call of ``lookup_order`` until the request carries its result, then ANSWER."""
    if any(message.get("role") == "tool" for message in body["messages"]):
        return ChatCompletionReply(text="".join(ANSWER))
    return ChatCompletionReply(tool_calls=(("call_1", "lookup_order", '{"order_id": "7"}'),))


@pytest.fixture
async def server() -> AsyncIterator[ChatCompletionsServer]:
    usage = {"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26}
    with ChatCompletionsServer(_answer, response_model=RESPONSE_MODEL, usage=usage) as chat:
        await _warm_up(chat)
        yield chat


async def _warm_up(chat: ChatCompletionsServer) -> None:
    """One streamed and one whole completion before the test: LiteLLM imports most of its modules
    on its first call, which takes many seconds where Python writes no bytecode cache, and would
    otherwise count against the session's deadlines."""
    import litellm

    tools = [{"type": "function", "function": {"name": "lookup_order", "parameters": {}}}]
    for stream in (True, False):
        response = await litellm.acompletion(
            model="openai/fake-gpt",
            api_base=chat.base_url,
            api_key="sk-local-test",
            messages=[{"role": "user", "content": "warm up"}],
            tools=tools,
            stream=stream,
        )
        if stream:
            async for _ in response:  # type: ignore[union-attr]
                pass
    chat.requests.clear()


def _agent(server: ChatCompletionsServer) -> LlmAgent:
    return LlmAgent(
        name="orders",
        model=LiteLlm(model="openai/fake-gpt", api_base=server.base_url, api_key="sk-local-test"),
        instruction="You answer questions about orders.",
        tools=[lookup_order],
    )


async def test_a_streamed_turn_through_litellm(
    server: ChatCompletionsServer, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    LOOKUPS.clear()
    flow = AgentSessionFlow(
        GoogleAdkRunner(_agent(server)),
        flow_type="LiteLlmOrders",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
    async with running_session(dex_in_process_worker, [flow]) as stack:
        snapshot = await stack.run_turn(flow, "litellm-1", "Where is order 7?")
        events = await stack.events(flow, "litellm-1")
        history = await stack.executed_step_types("litellm-1")

    assert LOOKUPS == ["7"]
    assert [body["stream"] for body in server.requests] == [True, True]
    first, second = server.requests
    assert first["model"] == "fake-gpt"
    assert [tool["function"]["name"] for tool in first["tools"]] == ["lookup_order"]
    tool_message = second["messages"][-1]
    assert (tool_message["role"], tool_message["tool_call_id"]) == ("tool", "call_1")
    assert "order 7: delivered" in tool_message["content"]
    assert [(m.role, m.tool_call_id or m.text) for m in snapshot.messages] == [
        (MessageRole.USER, "Where is order 7?"),
        (MessageRole.ASSISTANT, "call_1"),
        (MessageRole.TOOL, "call_1"),
        (MessageRole.ASSISTANT, "Order 7 was delivered."),
    ]
    deltas = [e.payload_json()["text"] for e in events if e.type == AgentEventType.TEXT_DELTA]
    assert deltas == list(ANSWER)
    assert history.count("RunModel") == 2 and history.count("CallTool") == 1
    assert snapshot.usage is not None and snapshot.usage.input_tokens == 42


async def test_usage_and_model_metadata_from_litellm(server: ChatCompletionsServer) -> None:
    runner = GoogleAdkRunner(
        _agent(server), run_config=RunConfig(streaming_mode=StreamingMode.NONE)
    )
    turns = TurnContextBuilder()
    turns.start_turn(runner.build_user_message("Where is order 7?"))

    outcome = await runner.run_model_step(turns.context(default_tool_effect=ToolEffect.READ))

    assert isinstance(outcome, ToolCallsRequested)
    assert [call.tool_call_id for call in outcome.tool_calls] == ["call_1"]
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (21, 5)
    metadata = outcome.model_call_metadata
    assert metadata is not None
    assert (metadata.request_model, metadata.response_model, metadata.provider_name) == (
        "openai/fake-gpt",
        RESPONSE_MODEL,
        "openai",
    )
    assert server.requests[0].get("stream") in (None, False)
    turns.store(outcome.new_messages)
    assert isinstance(
        await runner.run_model_step(
            turns.context(
                run_state=outcome.framework_run_state, default_tool_effect=ToolEffect.READ
            )
        ),
        TurnCompleted,
    )
