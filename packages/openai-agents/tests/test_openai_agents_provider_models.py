"""The SDK's real OpenAI models (Responses and Chat Completions, streamed) against a local server
speaking those APIs: one request per model call, no tool body before its Step, the recorded
result sent back as the call's output, and the metadata the SDK reports."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agents import Agent, Model, OpenAIChatCompletionsModel, OpenAIResponsesModel, function_tool
from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentToolCallStatus,
    ToolCallsRequested,
    ToolEffect,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import assistant_texts, tool_messages, wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_openai_agents import OpenAIAgentsRunner
from openai import AsyncOpenAI
from openai_agents_fake_provider import (
    RESPONSE_MODEL,
    FakeOpenAIServer,
    ProviderReply,
    ProviderRequest,
)
from openai_agents_test_support import TurnDriver

REQUEST_MODEL = "gpt-test"
LOOKUPS: list[str] = []


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    LOOKUPS.append(order_id)
    return f"order {order_id} shipped"


ANSWER = "Your order 7 has shipped. " + "It left the warehouse on Monday and arrives soon. " * 3


def _reply(request: ProviderRequest) -> ProviderReply:
    """Asks for the tool until the input holds its result, then answers with that result."""
    body = json.dumps(request.body)
    if "order 7 shipped" in body:
        return ProviderReply(text=ANSWER)
    return ProviderReply(tool_calls=(("call_lookup_1", "lookup_order", '{"order_id":"7"}'),))


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    LOOKUPS.clear()
    async with FakeOpenAIServer(_reply) as running:
        yield running


def _model(kind: str, server: FakeOpenAIServer) -> Model:
    client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
    if kind == "responses":
        return OpenAIResponsesModel(model=REQUEST_MODEL, openai_client=client)
    return OpenAIChatCompletionsModel(model=REQUEST_MODEL, openai_client=client)


def _agent(kind: str, server: FakeOpenAIServer) -> Agent[None]:
    return Agent(
        name="support",
        instructions="You help with orders.",
        model=_model(kind, server),
        tools=[lookup_order],
    )


def _sent_tool_results(kind: str, request: ProviderRequest) -> list[str]:
    """The tool results a request carried, in the API's own shape."""
    if kind == "responses":
        return [
            item["output"]
            for item in request.body["input"]
            if item.get("type") == "function_call_output"
        ]
    return [m["content"] for m in request.body["messages"] if m.get("role") == "tool"]


@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_each_model_step_is_one_streamed_request_and_the_tool_waits_for_its_step(
    kind: str, server: FakeOpenAIServer
) -> None:
    driver = TurnDriver(OpenAIAgentsRunner(_agent(kind, server)))
    driver.start_turn("Where is order 7?")

    requested = await driver.model_step()

    assert isinstance(requested, ToolCallsRequested)
    assert [(c.tool_call_id, c.tool_name, c.arguments) for c in requested.tool_calls] == [
        ("call_lookup_1", "lookup_order", '{"order_id":"7"}')
    ]
    assert LOOKUPS == []  # the SDK stopped before the tool body
    assert len(server.requests) == 1 and server.requests[0].streamed
    metadata = requested.model_call_metadata
    assert metadata is not None
    assert (metadata.request_model, metadata.provider_name) == (REQUEST_MODEL, "openai")
    assert metadata.response_model == (RESPONSE_MODEL if kind == "responses" else REQUEST_MODEL)
    assert metadata.response_id == ("resp_1" if kind == "responses" else None)
    # Chat Completions: the SDK turns the stream into a Response without a status.
    assert metadata.finish_reasons == (("completed",) if kind == "responses" else ())
    assert requested.usage.input_tokens == (21 if kind == "responses" else 17)

    driver.record(requested, lambda name: (AgentToolCallStatus.SUCCEEDED, "order 7 shipped"))
    completed = await driver.model_step()

    assert isinstance(completed, TurnCompleted)
    assert completed.new_messages[-1].text == ANSWER
    # The streamed text reached the session's events; the Chat Completions stream sends it in
    # 4-character chunks, which the runner batches instead of writing one event per chunk.
    deltas = [json.loads(e.payload)["text"] for e in driver.turns.events if e.type == "text_delta"]
    assert "".join(deltas) == ANSWER
    if kind == "chat":
        assert len(deltas) < len(ANSWER) // 4
    assert len(server.requests) == 2
    assert _sent_tool_results(kind, server.requests[1]) == ["order 7 shipped"]
    assert LOOKUPS == []  # the recorded result, never a second run of the tool


async def test_an_incomplete_response_reports_its_reason(tmp_path: Path) -> None:
    async with FakeOpenAIServer(
        lambda request: ProviderReply(text="cut", incomplete_reason="max_output_tokens")
    ) as server:
        driver = TurnDriver(OpenAIAgentsRunner(_agent("responses", server)))
        driver.start_turn("Tell me everything.")
        outcome = await driver.model_step()
    assert outcome.model_call_metadata is not None
    assert outcome.model_call_metadata.finish_reasons == ("max_output_tokens",)


@pytest.mark.parametrize("kind", ["responses", "chat"])
async def test_a_durable_turn_with_the_real_openai_model(
    kind: str, server: FakeOpenAIServer, dex_in_process_worker: InProcessWorkerFactory
) -> None:
    flow = AgentSessionFlow(
        OpenAIAgentsRunner(_agent(kind, server)),
        flow_type=f"Support{kind.title()}",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
    async with dex_in_process_worker([flow]) as dex:
        await dex.sessions(flow).start_session("order-7", "Where is order 7?")
        snapshot = await wait_for_turn_end(dex.sessions(flow), "order-7", 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert assistant_texts(snapshot) == [ANSWER]
    (result,) = tool_messages(snapshot)
    assert (result.tool_name, result.tool_output) == ("lookup_order", "order 7 shipped")
    assert LOOKUPS == ["7"]  # the tool ran once, in its own Step
    assert len(server.requests) == 2
    assert _sent_tool_results(kind, server.requests[1]) == ["order 7 shipped"]
