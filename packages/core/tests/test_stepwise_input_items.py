"""How Stepwise reads its stored messages back, each from its own fields."""

from __future__ import annotations

from dex_agents import AgentMessage, MessageRole
from dex_agents.stepwise._input_items import (
    StoredModelOutput,
    decode_message,
    tool_result_message,
    user_text_message,
)
from dex_agents.stepwise._model_client import ModelOutputItemKind, ModelToolResult, ModelUserText


def _stored(role: MessageRole, framework_item: str, **fields: str) -> AgentMessage:
    return AgentMessage(sequence=1, role=role, framework_item=framework_item, **fields)


def test_messages_of_another_format_with_the_same_item_text_read_their_own_fields() -> None:
    # Another framework's items can repeat byte for byte ("{}" here); what tells them apart is
    # the neutral fields, so no decoded form may be shared between them.
    user = decode_message(_stored(MessageRole.USER, "{}", text="first question"))
    tool = decode_message(
        _stored(MessageRole.TOOL, "{}", tool_call_id="c1", tool_name="lookup", tool_output="7")
    )
    answer = decode_message(_stored(MessageRole.ASSISTANT, "{}", text="the answer"))
    later_user = decode_message(_stored(MessageRole.USER, "{}", text="second question"))

    assert user == ModelUserText("first question")
    assert tool == ModelToolResult("c1", "lookup", "7")
    assert isinstance(answer, StoredModelOutput)
    assert answer.item.kind is ModelOutputItemKind.MESSAGE
    assert answer.item.text == "the answer"
    assert later_user == ModelUserText("second question")


def test_a_stepwise_item_reads_the_same_every_time() -> None:
    result = ModelToolResult("call_1", "lookup_order", '{"status": "shipped"}')
    stored = tool_result_message(result)
    message = _stored(MessageRole.TOOL, stored.framework_item)

    assert decode_message(message) == result
    assert decode_message(message) == result
    assert decode_message(_stored(MessageRole.USER, user_text_message("hi").framework_item)) == (
        ModelUserText("hi")
    )
