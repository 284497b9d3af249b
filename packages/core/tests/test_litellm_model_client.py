"""LiteLLMModelClient against a local server speaking the OpenAI Responses, Chat Completions and
Anthropic Messages wire protocols: no network, a dummy key from api_key_provider."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import litellm_test_support  # noqa: F401  (keeps LiteLLM offline; before litellm)
import pytest

pytest.importorskip("litellm", reason="the litellm extra (dex-agents[litellm]) is not installed")

from dex_agents import AgentUsage, BuiltInTool, ConfigurationError
from dex_agents.litellm import LiteLLMModelClient
from dex_agents.stepwise import (
    AgentDefinition,
    ModelOutputItemKind,
    ModelRequest,
    ModelResponse,
    ModelToolChoice,
    ModelToolDefinition,
    ModelToolResult,
    ModelUserText,
)
from litellm_test_support.fake_providers import (
    ANTHROPIC,
    CHAT,
    ENCRYPTED,
    RESPONSES,
    SIGNATURE,
    FakeFailure,
    FakeProviderServer,
    FakeReply,
    FakeToolCall,
)
from model_output_support import RecordingModelOutput

TOOL = ModelToolDefinition(
    "lookup_order",
    "Look up an order.",
    {"type": "object", "properties": {"order_id": {"type": "string"}}},
)
CALL = FakeToolCall("call_1", "lookup_order", {"order_id": "7"})


def _script(api: str, body: dict[str, Any]) -> FakeReply | FakeFailure:
    text = str(body)
    if "fail 429" in text:
        return FakeFailure(status=429)
    if "fail 500" in text:
        return FakeFailure(status=500)
    if "malformed" in text:
        return FakeFailure()
    if "Order 7 ships tomorrow" in text:  # the tool result came back
        return FakeReply(text="Done.")
    return FakeReply(text="Let me check.", reasoning="I should look it up.", tool_calls=(CALL,))


@pytest.fixture
async def provider() -> AsyncIterator[FakeProviderServer]:
    async with FakeProviderServer(_script) as server:
        yield server


def _client(model: str, server: FakeProviderServer, **options: Any) -> LiteLLMModelClient:
    base = server.base_url if model.startswith("anthropic/") else f"{server.base_url}/v1"
    return LiteLLMModelClient(model, api_base=base, api_key_provider=lambda: "dummy-key", **options)


def _request(*items: Any, tools: tuple[ModelToolDefinition, ...] = (TOOL,)) -> ModelRequest:
    return ModelRequest(instructions="You help with orders.", input=tuple(items), tools=tools)


def test_routing_and_options() -> None:
    assert LiteLLMModelClient("openai/gpt-5-mini").api == "responses"
    # An endpoint of its own is most likely an OpenAI-compatible server: Chat Completions.
    local = "http://127.0.0.1:8899/v1"
    assert LiteLLMModelClient("openai/qwen", api_base=local).api == "chat_completions"
    assert LiteLLMModelClient("openai/qwen", api="responses", api_base=local).api == "responses"
    assert LiteLLMModelClient("anthropic/claude-sonnet-4-5").api == "chat_completions"
    assert LiteLLMModelClient("openai/gpt-5-mini", api="chat_completions").item_provider == (
        "openai.chat_completions"
    )
    with pytest.raises(ConfigurationError, match="api must be"):
        LiteLLMModelClient("openai/gpt-5-mini", api="assistants")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must not set api_key"):
        LiteLLMModelClient("openai/gpt-5-mini", request_options={"api_key": "sk-secret"})


@pytest.mark.parametrize(
    ("model", "settings", "expected"),
    [
        ("anthropic/claude-sonnet-4-5", {}, True),
        (
            "anthropic/claude-sonnet-4-5",
            {"thinking": {"type": "enabled", "budget_tokens": 1024}},
            False,
        ),
        ("anthropic/claude-sonnet-4-5", {"thinking": {"type": "disabled"}}, True),
        ("anthropic/claude-sonnet-4-5", {"reasoning_effort": "none"}, True),
        ("anthropic/claude-sonnet-4-5", {"reasoning_effort": "low"}, False),
        ("bedrock/anthropic.claude-sonnet-4-5", {"reasoning_effort": "high"}, False),
        ("anthropic/claude-opus-5-5", {}, False),
        ("gemini/gemini-2.5-pro", {"reasoning_effort": "high"}, True),
        ("openai/gpt-5-mini", {"reasoning_effort": "high"}, True),
    ],
)
def test_supports_forced_tool_choice(model: str, settings: dict[str, Any], expected: bool) -> None:
    assert LiteLLMModelClient(model).supports_forced_tool_choice(settings) is expected


def test_agent_definition_refuses_required_planning_with_anthropic_thinking() -> None:
    with pytest.raises(ValueError, match='planning_tool_choice "required"'):
        AgentDefinition(
            name="planner",
            instructions="Plan.",
            model=LiteLLMModelClient("anthropic/claude-sonnet-4-5"),
            model_settings={"thinking": {"type": "enabled", "budget_tokens": 2048}},
            built_in_tools=frozenset({BuiltInTool.WRITE_TODOS}),
            plan_mode_enabled=True,
            planning_tool_choice="required",
        )


async def _two_calls(
    client: LiteLLMModelClient, writer: RecordingModelOutput, final_text: str
) -> tuple[ModelResponse, ModelResponse]:
    first = await client.call_model(_request(ModelUserText("Where is order 7?")), writer)
    result = ModelToolResult("call_1", "lookup_order", final_text)
    second = await client.call_model(
        _request(ModelUserText("Where is order 7?"), *first.items, result), writer
    )
    return first, second


async def test_responses_api_stores_nothing_and_replays_encrypted_reasoning(
    provider: FakeProviderServer,
) -> None:
    writer = RecordingModelOutput()
    client = _client("openai/gpt-5-mini", provider, api="responses")
    first, second = await _two_calls(client, writer, "Order 7 ships tomorrow")

    assert [item.kind for item in first.items] == [
        ModelOutputItemKind.REASONING,
        ModelOutputItemKind.MESSAGE,
        ModelOutputItemKind.TOOL_CALL,
    ]
    assert first.tool_calls[0].tool_name == "lookup_order"
    assert first.usage == AgentUsage(
        input_tokens=120, output_tokens=30, cached_input_tokens=20, reasoning_tokens=10
    )
    assert (first.provider_name, first.finish_reasons) == ("openai", ("tool_calls",))
    assert (first.response_id or "").startswith("resp_")  # LiteLLM encodes its route in the ID
    assert "".join(writer.text) == "Let me check.Done."
    assert writer.reasoning == ["I should look it up."]
    assert second.text == "Done."

    body = provider.bodies(RESPONSES)[1]
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["instructions"] == "You help with orders."
    assert body["tools"][0]["name"] == "lookup_order" and body["tool_choice"] == "auto"
    reasoning = next(item for item in body["input"] if item.get("type") == "reasoning")
    assert reasoning["encrypted_content"] == ENCRYPTED
    assert body["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "Order 7 ships tomorrow",
    }
    assert all(headers.get("Authorization") == "Bearer dummy-key" for headers in provider.headers)


async def test_anthropic_thinking_blocks_replay_with_their_signature(
    provider: FakeProviderServer,
) -> None:
    client = _client("anthropic/claude-sonnet-4-5", provider)
    writer = RecordingModelOutput()
    first, second = await _two_calls(client, writer, "Order 7 ships tomorrow")

    assert first.items[0].kind is ModelOutputItemKind.REASONING
    assert json.loads(first.items[0].item)["thinking_blocks"][0]["signature"] == SIGNATURE
    assert writer.reasoning[0] == "I should look it up."
    assert second.text == "Done."
    assistant = next(
        m for m in provider.bodies(ANTHROPIC)[1]["messages"] if m["role"] == "assistant"
    )
    thinking = next(block for block in assistant["content"] if block["type"] == "thinking")
    assert thinking["signature"] == SIGNATURE  # byte for byte
    assert any(block["type"] == "tool_use" for block in assistant["content"])
    assert provider.headers[-1].get("x-api-key") == "dummy-key"


async def test_chat_completions_stream_and_cross_provider_replay(
    provider: FakeProviderServer,
) -> None:
    responses = _client("openai/gpt-5-mini", provider, api="responses")
    chat = _client("openai/gpt-4o-mini", provider, api="chat_completions")
    writer = RecordingModelOutput()
    first = await responses.call_model(_request(ModelUserText("Where is order 7?")), writer)
    request = _request(
        ModelUserText("Where is order 7?"),
        *first.items,
        ModelToolResult("call_1", "lookup_order", "Order 7 ships tomorrow"),
    )
    request = ModelRequest(
        request.instructions, request.input, request.tools, tool_choice=ModelToolChoice.REQUIRED
    )
    second = await chat.call_model(request, writer)

    assert second.text == "Done." and second.usage.input_tokens == 80
    body = provider.bodies(CHAT)[0]
    assert body["tool_choice"] == "required"
    assistant = next(m for m in body["messages"] if m["role"] == "assistant")
    # Another provider's item replays as its text and tool calls; its reasoning is dropped.
    assert assistant["content"] == "Let me check."
    assert assistant["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert ENCRYPTED not in str(body)
    assert body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Order 7 ships tomorrow",
    }


async def test_an_api_base_reaches_a_server_that_speaks_only_chat_completions() -> None:
    """vLLM, Ollama, llama.cpp and most gateways answer 404 on ``/v1/responses``: with an
    ``api_base`` and no ``api`` the client calls Chat Completions, and one such call works."""
    async with FakeProviderServer(_script, apis=frozenset({CHAT})) as server:
        client = _client("openai/local-model", server)
        first = await client.call_model(
            _request(ModelUserText("Where is order 7?")), RecordingModelOutput()
        )
        assert [item.kind for item in first.items][-1] is ModelOutputItemKind.TOOL_CALL
        assert [api for api, _ in server.requests] == [CHAT]
        told = _client("openai/local-model", server, api="responses")
        with pytest.raises(Exception, match=r"404|Not Found"):
            await told.call_model(
                _request(ModelUserText("Where is order 7?")), RecordingModelOutput()
            )


@pytest.mark.parametrize("failure", ["fail 429", "fail 500", "malformed"])
async def test_provider_errors_raise_after_one_request(
    provider: FakeProviderServer, failure: str
) -> None:
    client = _client("anthropic/claude-sonnet-4-5", provider)
    with pytest.raises(Exception) as raised:
        await client.call_model(_request(ModelUserText(failure)), RecordingModelOutput())
    assert not isinstance(raised.value, AssertionError)
    assert len(provider.requests) == 1  # no retries of its own: RunModel retries
