"""ScriptedModelClient: recording, helpers, provider-exact items, and deterministic tool call IDs."""

from __future__ import annotations

import json

import pytest
from dex_agents import ConfigurationError, ConfigurationTypeError
from dex_agents.stepwise import (
    ModelOutputItem,
    ModelOutputItemKind,
    ModelRequest,
    ModelToolCall,
    ModelToolResult,
    ModelUserText,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    replayable_input,
)
from model_output_support import RecordingModelOutput


def _request(*items: ModelUserText | ModelToolResult) -> ModelRequest:
    return ModelRequest(instructions="Be brief.", input=tuple(items))


async def test_sync_script_answers_text_and_streams_it() -> None:
    client = ScriptedModelClient(
        lambda request: ScriptedModelReply(
            text=f"Echo: {ScriptedModelClient.user_texts(request)[-1]}", reasoning="thinking"
        )
    )
    writer = RecordingModelOutput()

    response = await client.call_model(_request(ModelUserText("hello")), writer)

    assert response.text == "Echo: hello"
    assert [item.kind for item in response.items] == [
        ModelOutputItemKind.REASONING,
        ModelOutputItemKind.MESSAGE,
    ]
    assert json.loads(response.items[1].item) == {"type": "message", "text": "Echo: hello"}
    assert writer.text == ["Echo: hello"]
    assert writer.reasoning == ["thinking"]
    assert response.usage.model_calls == 1
    assert response.usage.input_tokens == client.estimate_input_tokens(
        _request(ModelUserText("hello"))
    )
    assert response.usage.output_tokens > 0


async def test_async_script_and_tool_calls_with_deterministic_ids() -> None:
    async def respond(request: ModelRequest) -> ScriptedModelReply:
        return ScriptedModelReply(
            tool_calls=[
                ScriptedToolCall("lookup_order", {"order_id": "7"}),
                ScriptedToolCall("lookup_order", {"order_id": "8"}),
            ]
        )

    client = ScriptedModelClient(respond)
    request = _request(ModelUserText("find orders"))

    first = await client.call_model(request, RecordingModelOutput())
    rerun = await client.call_model(request, RecordingModelOutput())
    later = await client.call_model(
        _request(ModelUserText("find orders"), ModelUserText("again")), RecordingModelOutput()
    )

    ids = [call.tool_call_id for call in first.tool_calls]
    assert len(set(ids)) == 2
    assert all(ids) and not any("/" in tool_call_id for tool_call_id in ids)
    assert [call.tool_call_id for call in rerun.tool_calls] == ids
    assert not set(ids) & {call.tool_call_id for call in later.tool_calls}
    assert first.items == rerun.items
    assert json.loads(first.tool_calls[0].arguments) == {"order_id": "7"}
    assert json.loads(first.items[0].item)["call_id"] == ids[0]
    assert first.finish_reasons == ("tool_calls",)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        # The same characters split across items differently.
        ((ModelUserText("ab"), ModelUserText("c")), (ModelUserText("a"), ModelUserText("bc"))),
        # The same text as user text and as a tool result's output.
        ((ModelUserText("7"),), (ModelToolResult("call_1", "lookup_order", "7"),)),
        # A tool result's fields moved between its ID and its name.
        (
            (ModelToolResult("call_1", "lookup", "x"),),
            (ModelToolResult("call_", "1lookup", "x"),),
        ),
    ],
)
async def test_different_inputs_get_different_tool_call_ids(
    one: tuple[ModelUserText | ModelToolResult, ...],
    other: tuple[ModelUserText | ModelToolResult, ...],
) -> None:
    client = ScriptedModelClient(
        lambda request: ScriptedModelReply(tool_calls=[ScriptedToolCall("lookup_order", {})])
    )

    first = await client.call_model(_request(*one), RecordingModelOutput())
    second = await client.call_model(_request(*other), RecordingModelOutput())

    assert first.tool_calls[0].tool_call_id != second.tool_calls[0].tool_call_id


async def test_explicit_tool_call_id_and_raw_arguments_text_are_kept() -> None:
    client = ScriptedModelClient(
        lambda request: ScriptedModelReply(
            tool_calls=[ScriptedToolCall("broken", "{not json", tool_call_id="call-1")]
        )
    )
    response = await client.call_model(_request(ModelUserText("x")), RecordingModelOutput())
    assert response.tool_calls[0].tool_call_id == "call-1"
    assert response.tool_calls[0].arguments == "{not json"


async def test_requests_keep_the_latest_n() -> None:
    client = ScriptedModelClient(lambda request: ScriptedModelReply("ok"), max_recorded_requests=2)
    for text in ("one", "two", "three"):
        await client.call_model(_request(ModelUserText(text)), RecordingModelOutput())
    assert [ScriptedModelClient.user_texts(request) for request in client.requests] == [
        ["two"],
        ["three"],
    ]


def test_tool_results_are_those_after_the_last_user_text() -> None:
    request = _request(
        ModelUserText("first"),
        ModelToolResult("call-1", "lookup", "old"),
        ModelUserText("second"),
        ModelToolResult("call-2", "lookup", "new"),
        ModelToolResult("call-3", "lookup", "newer"),
    )
    assert [result.output for result in ScriptedModelClient.tool_results(request)] == [
        "new",
        "newer",
    ]
    assert ScriptedModelClient.user_texts(request) == ["first", "second"]


async def test_a_script_that_returns_something_else_fails_the_call() -> None:
    client = ScriptedModelClient(lambda request: "not a reply")  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationTypeError, match="not a ScriptedModelReply"):
        await client.call_model(_request(ModelUserText("x")), RecordingModelOutput())


def test_negative_max_recorded_requests_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="max_recorded_requests"):
        ScriptedModelClient(lambda request: ScriptedModelReply("ok"), max_recorded_requests=-1)


def test_items_of_another_provider_replay_without_reasoning() -> None:
    own = ModelOutputItem("scripted", ModelOutputItemKind.REASONING, '{"type":"reasoning"}')
    foreign_reasoning = ModelOutputItem("other", ModelOutputItemKind.REASONING, '{"sig":"x"}')
    foreign_text = ModelOutputItem("other", ModelOutputItemKind.MESSAGE, "{}", text="hi")
    foreign_call = ModelOutputItem(
        "other",
        ModelOutputItemKind.TOOL_CALL,
        "{}",
        tool_call=ModelToolCall("call-1", "lookup", "{}"),
    )
    result = ModelToolResult("call-1", "lookup", "found")
    request = ModelRequest(
        instructions="",
        input=(ModelUserText("q"), own, foreign_reasoning, foreign_text, foreign_call, result),
    )
    assert replayable_input(request, "scripted") == (
        ModelUserText("q"),
        own,
        foreign_text,
        foreign_call,
        result,
    )
