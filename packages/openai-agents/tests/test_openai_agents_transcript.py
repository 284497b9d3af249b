"""Reading stored messages back as a model call's input: every read its own items."""

from __future__ import annotations

import pytest
from dex_agents import AgentMessage, FrameworkMessage, JsonObject, MessageRole
from dex_agents.exceptions import StoredStateError
from dex_agents_openai_agents._transcript import (
    function_call_output_item,
    read_transcript,
    stored_message,
    user_message_item,
)


def _stored(messages: list[FrameworkMessage], turn_id: str = "turn-1") -> list[AgentMessage]:
    return [
        AgentMessage.from_framework_message(
            message, sequence=index + 1, turn_id=turn_id, created_at=None
        )
        for index, message in enumerate(messages)
    ]


def _answer(text: str) -> JsonObject:
    return {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def test_each_read_gets_its_own_items_to_edit() -> None:
    # The process parses each stored item once; the runner and the SDK may edit the input
    # they get, so every read hands out its own copies.
    call: JsonObject = {
        "type": "function_call",
        "call_id": "c1",
        "name": "lookup",
        "arguments": '{"order_id": "7"}',
    }
    stored = _stored(
        [
            stored_message(user_message_item("Where is order 7?"), None),
            stored_message(call, "Orders"),
            stored_message(
                function_call_output_item("c1", "shipped"), "Orders", tool_name="lookup"
            ),
            stored_message(_answer("It shipped."), "Orders"),
        ]
    )
    first = read_transcript(stored, "turn-2")
    user, function_call, _, answer = first.items
    user["content"] = "edited"
    function_call["arguments"] = "{}"
    content = answer["content"]
    assert isinstance(content, list) and isinstance(content[0], dict)
    content[0]["text"] = "edited"
    content.append({"type": "output_text", "text": "added", "annotations": []})

    second = read_transcript(stored, "turn-2")
    assert second.items == (
        user_message_item("Where is order 7?"),
        call,
        function_call_output_item("c1", "shipped"),
        _answer("It shipped."),
    )
    assert second.active_agent == "Orders"


@pytest.mark.parametrize(
    ("framework_item", "problem"),
    [("not json", "is not JSON"), ('{"type": "message"}', "is not an OpenAI Agents SDK item")],
)
def test_an_item_of_another_runner_is_refused_on_every_read(
    framework_item: str, problem: str
) -> None:
    foreign = _stored([FrameworkMessage(role=MessageRole.USER, framework_item=framework_item)])
    for _ in range(2):
        with pytest.raises(StoredStateError, match=problem):
            read_transcript(foreign, None)
