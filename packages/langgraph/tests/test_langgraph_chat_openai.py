"""langchain-openai's ChatOpenAI inside a LangGraph agent, against a local Chat Completions
server the test starts (streaming, as LangGraph's message streaming asks for)."""

from __future__ import annotations

import json
import warnings

from chat_completions_server import MODEL, RESPONSE_MODEL, chat_completions_server
from dex_agents import (
    AgentEvent,
    AgentEventType,
    AgentSessionOptions,
    AgentUsage,
    MessageRole,
    ModelCallMetadata,
    ToolCallsRequested,
    ToolEffect,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import wait_for_turn_end
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents_langgraph import LangGraphRunner, langgraph_session_flow
from langchain_core.messages import AIMessage, messages_from_dict
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from langgraph_test_support import first_turn, local_sessions, texts_of
from pydantic import SecretStr


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return f"order {order_id} is shipped"


def _agent(base_url: str, *, with_tools: bool = True, disable_streaming: bool = False) -> object:
    # With a base_url of its own, ChatOpenAI reports usage of a stream only when asked.
    model = ChatOpenAI(
        model=MODEL,
        base_url=base_url,
        api_key=SecretStr("local-test-key"),
        max_retries=0,
        stream_usage=True,
        disable_streaming=disable_streaming,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, [lookup_order] if with_tools else [])


async def test_a_chat_openai_agent_turn_is_durable(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    with chat_completions_server() as server:
        flow = langgraph_session_flow(
            _agent(server.base_url),
            flow_type="OpenAIOrders",
            options=AgentSessionOptions(
                tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}
            ),
        )
        async with local_sessions(dex_in_process_worker, [flow]) as dex:
            await dex["OpenAIOrders"].start_session("s1", "Where is order 7?")
            snapshot = await wait_for_turn_end(dex["OpenAIOrders"], "s1")

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert texts_of(snapshot, MessageRole.ASSISTANT) == ["Answer: order 7 is shipped"]
    first, second = server.requests
    assert first["stream"] is True and first["tools"][0]["function"]["name"] == "lookup_order"
    # The second request replays the stored AI message and the tool Step's result.
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "order 7 is shipped",
    }
    assert snapshot.usage == AgentUsage(
        input_tokens=80, output_tokens=18, cached_input_tokens=16, reasoning_tokens=4, model_calls=2
    )
    stored = messages_from_dict([json.loads(m.framework_item) for m in snapshot.messages])
    answer = stored[-1]
    assert isinstance(answer, AIMessage)
    assert answer.response_metadata["model_name"] == RESPONSE_MODEL


async def test_run_model_step_reports_the_metadata_and_streams_the_text() -> None:
    with chat_completions_server() as server:
        runner = LangGraphRunner(_agent(server.base_url))
        events: list[AgentEvent] = []
        requested = await runner.run_model_step(first_turn(runner, "Where is order 7?", events))
        assert isinstance(requested, ToolCallsRequested)
        (call,) = requested.tool_calls
        assert (call.tool_call_id, call.tool_name, call.arguments) == (
            "call_1",
            "lookup_order",
            '{"order_id":"7"}',
        )
        # ChatOpenAI's streamed message carries no response ID, so none is reported.
        assert requested.model_call_metadata == ModelCallMetadata(
            request_model=MODEL,
            response_model=RESPONSE_MODEL,
            provider_name="openai",
            response_id=None,
            finish_reasons=("tool_calls",),
        )
        assert requested.usage == AgentUsage(
            input_tokens=40, output_tokens=9, cached_input_tokens=8, reasoning_tokens=2
        )

        # A text answer (the server answers in text when no tool is offered) streams its
        # deltas to the turn's events as the provider sends them.
        events.clear()
        chat = LangGraphRunner(_agent(server.base_url, with_tools=False))
        completed = await chat.run_model_step(first_turn(chat, "Just say hi", events))
    assert isinstance(completed, TurnCompleted)
    deltas = [json.loads(e.payload)["text"] for e in events if e.type == AgentEventType.TEXT_DELTA]
    assert "".join(deltas) == "Summary: nothing much." and len(deltas) == 2
    assert completed.model_call_metadata is not None
    assert completed.model_call_metadata.finish_reasons == ("stop",)


async def test_a_model_that_does_not_stream_reports_its_response_id() -> None:
    with chat_completions_server() as server:
        runner = LangGraphRunner(_agent(server.base_url, disable_streaming=True))
        events: list[AgentEvent] = []
        requested = await runner.run_model_step(first_turn(runner, "Where is order 7?", events))
    assert "stream" not in server.requests[0] or not server.requests[0]["stream"]
    assert requested.model_call_metadata is not None
    assert requested.model_call_metadata.response_id == "chatcmpl-1"
