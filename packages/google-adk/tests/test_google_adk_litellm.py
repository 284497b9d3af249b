"""ADK's LiteLlm model against a Chat Completions server the test runs on loopback.

The server speaks the OpenAI wire format, streamed (Server-Sent Events) or not. Its model first
asks for ``lookup_order`` and, once the request carries the tool's result, answers with text.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
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
from dex_agents.testing import TurnContextBuilder
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
ANSWER = ("Order 7 ", "was delivered.")
LOOKUPS: list[str] = []


def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    LOOKUPS.append(order_id)
    return f"order {order_id}: delivered"


class ChatCompletionsServer:
    """A scripted Chat Completions endpoint; it records every request body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.base_url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        answered = any(message.get("role") == "tool" for message in body["messages"])
        message, finish = (
            ({"role": "assistant", "content": "".join(ANSWER)}, "stop")
            if answered
            else (
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{len(self.requests)}",
                            "type": "function",
                            "function": {
                                "name": "lookup_order",
                                "arguments": '{"order_id": "7"}',
                            },
                        }
                    ],
                },
                "tool_calls",
            )
        )
        usage = {"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26}
        if not body.get("stream"):
            return web.json_response(
                {
                    "id": f"chatcmpl-{len(self.requests)}",
                    "object": "chat.completion",
                    "created": 1,
                    "model": RESPONSE_MODEL,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for delta in self._deltas(message):
            await self._send(response, [{"index": 0, "delta": delta, "finish_reason": None}])
        await self._send(response, [{"index": 0, "delta": {}, "finish_reason": finish}])
        await self._send(response, [], usage=usage)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    @staticmethod
    def _deltas(message: dict[str, Any]) -> list[dict[str, Any]]:
        if message.get("tool_calls") is None:
            return [{"role": "assistant", "content": chunk} for chunk in ANSWER]
        (call,) = message["tool_calls"]
        head = {**call, "index": 0, "function": {"name": "lookup_order", "arguments": ""}}
        pieces = ['{"order_id": ', '"7"}']
        return [
            {"role": "assistant", "tool_calls": [head]},
            *({"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in pieces),
        ]

    async def _send(
        self, response: web.StreamResponse, choices: list[dict[str, Any]], **extra: Any
    ) -> None:
        chunk = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": RESPONSE_MODEL,
            "choices": choices,
            **extra,
        }
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())


@pytest.fixture
async def server() -> AsyncIterator[ChatCompletionsServer]:
    chat = ChatCompletionsServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    chat.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        await _warm_up(chat)
        yield chat
    finally:
        await runner.cleanup()


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
