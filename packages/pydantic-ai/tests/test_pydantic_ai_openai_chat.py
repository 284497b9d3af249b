"""``OpenAIChatModel`` against a local Chat Completions server, streamed, in a real session."""

from __future__ import annotations

import json
from typing import Any

from dex_agents import (
    AgentEventType,
    AgentSessionFlow,
    MessageRole,
    ToolCallsRequested,
    ToolEffect,
)
from dex_agents.testing import (
    ChatCompletionReply,
    ChatCompletionsServer,
    TurnContextBuilder,
    wait_for_turn_end,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_pydantic_ai import PydanticAIRunner, dex_tool_metadata
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai_test_support import session_events


def _answer(body: dict[str, Any]) -> ChatCompletionReply:
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    if not tool_messages:
        return ChatCompletionReply(
            tool_calls=(("call_abc", "lookup_order", json.dumps({"order_id": "7"})),)
        )
    return ChatCompletionReply(text=f"Order 7 is {tool_messages[-1]['content']}.")


def _agent(server: ChatCompletionsServer) -> Agent[None, str]:
    # max_retries=0: Dex retries the model call, the OpenAI client must not repeat it on its own.
    provider = OpenAIProvider(base_url=server.base_url, api_key="not-a-key")
    model = OpenAIChatModel("gpt-local", provider=provider)
    agent: Agent[None, str] = Agent(model, instructions="You answer questions about orders.")

    @agent.tool_plain(metadata=dex_tool_metadata(ToolEffect.READ))
    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        return "shipped" if order_id == "7" else "unknown"

    return agent


async def test_a_streamed_openai_chat_turn_with_a_tool_call(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    with ChatCompletionsServer(_answer) as server:
        flow = AgentSessionFlow(PydanticAIRunner(_agent(server)), flow_type="OpenAIChatAgent")
        async with dex_in_process_worker([flow]) as worker:
            sessions = worker.sessions(flow)
            await sessions.start_session("s1", "Where is order 7?")
            snapshot = await wait_for_turn_end(sessions, "s1")
            events = await session_events(worker, flow, "s1")

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert snapshot.messages[-1].text == "Order 7 is shipped."
    assert [
        (m.tool_call_id, m.tool_output) for m in snapshot.messages if m.role is MessageRole.TOOL
    ] == [("call_abc", "shipped")]
    assert [body["stream"] for body in server.requests] == [True, True]
    # The second request carried the tool result as a Chat Completions tool message.
    tool_message = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_message == [{"role": "tool", "tool_call_id": "call_abc", "content": "shipped"}]
    assert server.requests[0]["messages"][0] == {
        "role": "system",
        "content": "You answer questions about orders.",
    }
    deltas = [str(e.payload_json()["text"]) for e in events if e.type == AgentEventType.TEXT_DELTA]
    assert len(deltas) >= 2 and "".join(deltas) == "Order 7 is shipped."


async def test_model_call_metadata_is_what_the_provider_reported() -> None:
    with ChatCompletionsServer(_answer) as server:
        runner = PydanticAIRunner(_agent(server))
        turns = TurnContextBuilder(flow_id="s1")
        turns.start_turn(runner.build_user_message("Where is order 7?"))
        outcome = await runner.run_model_step(turns.context())

    assert isinstance(outcome, ToolCallsRequested)
    assert [(c.tool_call_id, c.tool_name, json.loads(c.arguments)) for c in outcome.tool_calls] == [
        ("call_abc", "lookup_order", {"order_id": "7"})
    ]
    assert outcome.tool_calls[0].policy.effect is ToolEffect.READ
    metadata = outcome.model_call_metadata
    assert metadata is not None
    assert (metadata.request_model, metadata.response_model, metadata.provider_name) == (
        "gpt-local",
        "gpt-local",
        "openai",
    )
    assert metadata.response_id == "chatcmpl-1"
    assert metadata.finish_reasons == ("tool_call",)
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (21, 7)
    assert len(server.requests) == 1
