"""A model that gives a call the same ID in a later turn (``call_0`` per response, as some
OpenAI-compatible servers do): the SDK in process keeps one item per call ID in a model call's
input, the durable runner gives every earlier use its own ID so the model sees each turn whole."""

from __future__ import annotations

from collections.abc import Sequence

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.items import TResponseOutputItem
from dex_agents import AgentToolCallStatus, ToolCallsRequested, TurnCompleted
from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)
from openai_agents_test_support import TurnDriver


def _calls_and_results(call: ModelCallInput) -> list[tuple[str, str, str]]:
    """``(type, call_id, output)`` of the input's calls and results, and ``user`` for a message."""
    return [
        (
            str(item.get("type") or item.get("role")),
            str(item.get("call_id")),
            str(item.get("output")),
        )
        for item in call.items
        if item.get("call_id") is not None or item.get("role") == "user"
    ]


def _call_zero_model(seen: list[ModelCallInput]) -> ReplyFunctionModel:
    """Calls ``lookup`` as ``call_0`` in every turn, then answers with what it got."""

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        seen.append(call)
        results = call.tool_outputs_since_user()
        if not results:
            return [function_call("lookup", {"topic": call.last_user_text()}, call_id="call_0")]
        return [assistant_message(f"got {results}")]

    return ReplyFunctionModel(reply)


@function_tool
def lookup(topic: str) -> str:
    """Look something up."""
    return f"note on {topic}"


async def test_a_call_id_given_again_in_a_later_turn_keeps_each_turn_whole() -> None:
    seen: list[ModelCallInput] = []
    driver = TurnDriver(
        OpenAIAgentsRunner(Agent(name="a", model=_call_zero_model(seen), tools=[lookup]))
    )
    for text in ("first", "second"):
        driver.start_turn(text)
        requested = await driver.model_step()
        assert isinstance(requested, ToolCallsRequested)
        # The turn's record and its idempotency key carry the model's own ID.
        assert [call.tool_call_id for call in requested.tool_calls] == ["call_0"]
        driver.record(requested, lambda name, t=text: (AgentToolCallStatus.SUCCEEDED, f"on {t}"))
        assert isinstance(await driver.model_step(), TurnCompleted)

    # The second turn's answer call sees the first turn's call and result under an ID of their
    # own, and its own call with its own result last.
    assert _calls_and_results(seen[-1]) == [
        ("user", "None", "None"),
        ("function_call", "call_0_r1", "None"),
        ("function_call_output", "call_0_r1", "on first"),
        ("user", "None", "None"),
        ("function_call", "call_0", "None"),
        ("function_call_output", "call_0", "on second"),
    ]
    stored = [m.tool_call_id for m in driver.context().messages if m.tool_call_id is not None]
    assert stored == ["call_0"] * 4  # stored items keep the model's IDs


async def test_the_sdk_in_process_keeps_one_item_per_call_id() -> None:
    # Why the runner renames: in one plain SDK session the second turn's answer call loses the
    # first turn's result, and its own call moves back before the first turn's answer.
    seen: list[ModelCallInput] = []
    agent = Agent(name="a", model=_call_zero_model(seen), tools=[lookup])
    session = SQLiteSession("repeated-call-ids")
    for text in ("first", "second"):
        result = await Runner.run(
            agent, text, session=session, run_config=RunConfig(tracing_disabled=True)
        )
        assert result.final_output == f"got ['note on {text}']"

    assert _calls_and_results(seen[-1]) == [
        ("user", "None", "None"),
        ("function_call", "call_0", "None"),
        ("user", "None", "None"),
        ("function_call_output", "call_0", "note on second"),
    ]
