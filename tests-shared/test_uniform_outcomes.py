"""The same situation gets the same outcome under every runner (``dex_agents.adapters``).

A tool the agent does not have, arguments that break the tool's schema, and a tool that raises
``ToolExecutionError`` each fail the call at once: one tool Step attempt, no failure route, status
``failed``, and a result the model sees that says why in the kit's words. A model that raises is
retried by ``RunModel`` and then fails the turn with its error. A model that cannot stream answers
as a streamed one does. How each framework wraps an error result for its model differs (see
"Writing an adapter"); the words inside are the same. A task with no poller on this Worker is
``packages/core/tests/test_agent_session_flow_tasks.py``'s (no scenario tool starts a task that
its runner does not poll). A tool's question declined or past its deadline records the call
``rejected`` before any effect, whatever interrupt the framework asked with. An agent of another
type is a ``ConfigurationTypeError`` where the runner is built (``agent_type_error``). Where a
framework's tool result carries an error flag, only a failed call sets it (``tool_result_is_error``).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from dex_agents import (
    AgentToolCall,
    AgentToolCallStatus,
    CancellationReason,
    ConfigurationTypeError,
    ToolEffect,
)
from dex_agents.adapters import tool_result_is_error
from dex_agents.testing import assistant_texts, tool_messages
from dex_agents.testing.scenarios import (
    BROKEN_TOOL_ERROR,
    CONFIRM_TOOL,
    MODEL_FAILURE,
    MODEL_INVOCATION,
    NO_STREAMING_SETTINGS,
    ScenarioCall,
    ScenarioCommand,
    model_gate_name,
)
from scenario_support.harness import Scenario
from scenario_support.runners import runner_supports

#: Where a framework really cannot use the kit's words: (runner, call) -> what the model sees,
#: and why. The table in "Writing an adapter" lists the same.
_FRAMEWORK_WORDS: dict[tuple[str, str], str] = {
    # The Claude Code CLI answers a tool it was not given itself, inside RunModel, before any
    # runner code sees the call; the model reads the CLI's text. The record is still failed.
    ("claude-agent-sdk", "no_such_tool"): "No such tool available: no_such_tool",
}

#: Runners whose framework has no model that cannot stream, and why ("Writing an adapter").
_ALWAYS_STREAMING: dict[str, str] = {
    "openai-agents": "every agents.Model implements stream_response; the runner runs the SDK's "
    "Runner.run_streamed",
    "claude-agent-sdk": "the Claude Code CLI always asks the Messages API for a stream",
}

#: Each call the scripted model makes, and what the model must see for it.
_CALLS: dict[str, tuple[ScenarioCall, str]] = {
    "no_such_tool": (ScenarioCall("no_such_tool"), "unknown tool no_such_tool"),
    "lookup": (
        ScenarioCall("lookup", arguments={"gate": 5}),
        "invalid arguments for lookup: ",
    ),
    "upsert": (
        ScenarioCall("upsert", arguments={"nope": "x"}),
        "invalid arguments for upsert: ",
    ),
    "broken": (ScenarioCall("broken"), BROKEN_TOOL_ERROR),
}


async def test_calls_that_cannot_run_fail_at_once_with_the_kit_s_words(
    scenario: Scenario,
) -> None:
    await scenario.start(
        "uniform", ScenarioCommand(calls=tuple(call for call, _ in _CALLS.values()))
    )

    snapshot = await scenario.wait_for_turn_end("uniform")

    results = {message.tool_name: message.tool_output or "" for message in tool_messages(snapshot)}
    assert set(results) == set(_CALLS)
    for name, (_, words) in _CALLS.items():
        words = _FRAMEWORK_WORDS.get((scenario.runner, name), words)
        assert words in results[name], f"{name}: {results[name]!r}"
    # Only the tool that exists and got valid arguments ran; none was retried.
    assert scenario.log.count("broken") == 1
    assert scenario.log.count("lookup") == 0 and scenario.log.count("upsert") == 0
    history = await scenario.executed("uniform")
    tool_steps = [e for e in history if e.step_type in ("CallTool", "CallSingleAttemptTool")]
    # A whole-turn harness may run the reads inside RunModel; whatever runs a Step runs once.
    assert all(entry.final_attempt == 1 for entry in tool_steps)
    assert not {"RecordToolFailure", "RecordToolOutcomeUnknown"} & {e.step_type for e in history}
    unknown = [e for e in tool_steps if e.step_type == "CallSingleAttemptTool"]
    assert len(unknown) == 1  # the unknown tool: unclassified, nothing to approve
    final = assistant_texts(snapshot)[-1]
    assert final.startswith("done: ")
    for name, (_, words) in _CALLS.items():
        assert _FRAMEWORK_WORDS.get((scenario.runner, name), words) in final
    assert snapshot.state is not None and snapshot.state.last_turn_error is None


async def test_every_failed_call_is_recorded_failed(scenario: Scenario) -> None:
    gate = scenario.gate(model_gate_name(2))
    await scenario.start(
        "records",
        ScenarioCommand(
            calls=(ScenarioCall("no_such_tool"), ScenarioCall("broken")), gate_model_call=2
        ),
    )
    await gate.wait_until_reached()

    snapshot = await scenario.sessions.get_agent_snapshot("records")
    gate.release()

    assert {record.tool_name: record.status for record in snapshot.tool_calls} == {
        "no_such_tool": AgentToolCallStatus.FAILED,
        "broken": AgentToolCallStatus.FAILED,
    }
    await scenario.wait_for_turn_end("records")


async def test_a_model_that_raises_fails_the_turn_with_its_error(scenario: Scenario) -> None:
    await scenario.start("raising", ScenarioCommand(fail_after_tools=True))

    snapshot = await scenario.wait_for_turn_end("raising")

    assert snapshot.state is not None
    assert MODEL_FAILURE in (snapshot.state.last_turn_error or "")
    assert scenario.log.keys(MODEL_INVOCATION) == ["call-1"] * 3  # RunModel's three attempts
    assert tool_messages(snapshot) == []


async def test_a_model_that_cannot_stream_answers_as_a_streamed_one(scenario: Scenario) -> None:
    if scenario.runner in _ALWAYS_STREAMING:
        pytest.skip(_ALWAYS_STREAMING[scenario.runner])
    await scenario.sessions.start_session(
        "no-stream",
        ScenarioCommand(calls=(ScenarioCall("lookup"),)).to_message(),
        session_settings=dict(NO_STREAMING_SETTINGS),
    )

    snapshot = await scenario.wait_for_turn_end("no-stream")

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    (tool_message,) = tool_messages(snapshot)
    assert tool_message.tool_output == "lookup ungated ok"
    assert assistant_texts(snapshot)[-1] == "done: lookup ungated ok"
    # One model call for the tool, one for the answer; neither was retried.
    history = await scenario.executed("no-stream")
    model_steps = [entry for entry in history if entry.step_type == "RunModel"]
    assert [entry.final_attempt for entry in model_steps] == [1, 1]


#: What the model sees for a tool's question that got no answer, by how it ended (the seed's
#: texts, as for ``ask_user``).
_UNANSWERED: dict[str, str] = {
    "declined": "The user declined to answer.",
    "deadline_passed": "question deadline passed",
}


@pytest.mark.parametrize("ending", sorted(_UNANSWERED))
async def test_a_tool_question_left_unanswered_rejects_the_call_before_any_effect(
    scenario: Scenario, ending: str
) -> None:
    # The session settles the question, not the runner: every runner's tool asked with the
    # framework's own interrupt, and none of them runs the tool again (dex_agents.adapters'
    # tool_question_answers hands a tool only answered questions).
    if not runner_supports(scenario.runner, "tool_questions"):
        pytest.skip(f"runner {scenario.runner} does not declare tool_questions")
    late = ending == "deadline_passed"
    sessions = scenario.deadline_sessions if late else scenario.sessions
    gate = scenario.gate(model_gate_name(2))
    await scenario.start(
        "unanswered",
        ScenarioCommand(calls=(ScenarioCall(CONFIRM_TOOL),), gate_model_call=2),
        deadline_agent=late,
    )
    if not late:
        interrupt = await scenario.wait_for_pending_interrupt("unanswered")
        assert await sessions.resolve_interrupt(
            "unanswered", interrupt.interrupt_id, approved=False
        )
    await gate.wait_until_reached()

    snapshot = await sessions.get_agent_snapshot("unanswered")
    gate.release()

    (record,) = snapshot.tool_calls
    assert (record.tool_name, record.status) == (CONFIRM_TOOL, AgentToolCallStatus.REJECTED)
    assert [answer.resolution.value for answer in record.input_answers] == [ending]
    snapshot = await scenario.wait_for_turn_end("unanswered", deadline_agent=late)
    words = _UNANSWERED[ending]
    (tool_message,) = tool_messages(snapshot)
    assert words in (tool_message.tool_output or "")
    assert assistant_texts(snapshot)[-1] == f"done: {words}"
    assert scenario.log.count(CONFIRM_TOOL) == 0  # asked once, never ran
    executed = await scenario.executed_step_types("unanswered")
    assert executed.count("CallSingleAttemptTool") == 1


class _NotAnAgent:
    """What no framework takes as its agent."""


#: Each runner's public class and how a user hands it an agent (the Claude Agent SDK's agent is
#: the CLI; what a user gives its runner as the agent is its tools).
_RUNNER_CLASSES: dict[str, tuple[str, str, Callable[[type, object], object]]] = {
    "stepwise": ("dex_agents.stepwise", "StepwiseAgentRunner", lambda cls, agent: cls(agent)),
    "openai-agents": (
        "dex_agents_openai_agents",
        "OpenAIAgentsRunner",
        lambda cls, agent: cls(agent),
    ),
    "pydantic-ai": ("dex_agents_pydantic_ai", "PydanticAIRunner", lambda cls, agent: cls(agent)),
    "langgraph": ("dex_agents_langgraph", "LangGraphRunner", lambda cls, agent: cls(agent)),
    "google-adk": ("dex_agents_google_adk", "GoogleAdkRunner", lambda cls, agent: cls(agent)),
    "claude-agent-sdk": (
        "dex_agents_claude_agent_sdk",
        "ClaudeAgentSdkRunner",
        lambda cls, agent: cls(instructions="You help.", tools=[agent]),
    ),
    "strands": ("dex_agents_strands", "StrandsRunner", lambda cls, agent: cls(agent)),
}


def test_an_agent_of_another_type_is_a_configuration_type_error(runner_name: str) -> None:
    # No session, no engine: the runner refuses the agent where it is built.
    if runner_name not in _RUNNER_CLASSES:
        pytest.skip(f"runner {runner_name} is not one of the workspace's adapters")
    module, class_name, build = _RUNNER_CLASSES[runner_name]
    runner_class = getattr(importlib.import_module(module), class_name)

    with pytest.raises(ConfigurationTypeError) as raised:
        build(runner_class, _NotAnAgent())

    assert isinstance(raised.value, TypeError)
    assert str(raised.value).startswith(f"{class_name} needs ")
    assert str(raised.value).endswith(", got _NotAnAgent")


def _claude_flag(record: AgentToolCall | None) -> bool:
    from dex_agents_claude_agent_sdk._transcript import record_result

    assert record is not None  # the runner renders only final records
    return record_result(record).is_error


def _langgraph_flag(record: AgentToolCall | None) -> bool:
    from dex_agents_langgraph._transcript import PendingToolCall, recorded_tool_message

    call = PendingToolCall("call-1", "refund", "{}", valid=True)
    return recorded_tool_message(call, record, "turn-1").status == "error"


def _strands_flag(record: AgentToolCall | None) -> bool:
    from dex_agents_strands._transcript import _recorded_result

    result = _recorded_result({"toolUseId": "call-1", "name": "refund", "input": {}}, record)
    return result["status"] == "error"


def _pydantic_ai_flag(record: AgentToolCall | None) -> bool:
    from dex_agents_pydantic_ai._run_state import recorded_tool_return
    from pydantic_ai.messages import ERROR_OUTCOMES, ToolCallPart

    call = ToolCallPart(tool_name="refund", args={}, tool_call_id="call-1")
    return recorded_tool_return(call, record).outcome in ERROR_OUTCOMES


#: How each runner with an error flag on a tool result sets it for a record (its own function,
#: read directly: the scenario models see the result's text, not the flag).
_ERROR_FLAGS: dict[str, Callable[[AgentToolCall | None], bool]] = {
    "claude-agent-sdk": _claude_flag,
    "langgraph": _langgraph_flag,
    "strands": _strands_flag,
    "pydantic-ai": _pydantic_ai_flag,
}
#: Runners whose framework's tool result has no error flag ("Writing an adapter").
_NO_ERROR_FLAG = {
    "openai-agents": "a function_call_output item has no error flag",
    "stepwise": "a function_call_output item has no error flag",
    "google-adk": "a function response is a plain dict; every non-success reads {'result': text}",
}

_CALL = AgentToolCall(
    "call-1",
    "refund",
    "{}",
    ToolEffect.NON_IDEMPOTENT_WRITE,
    True,
    AgentToolCallStatus.APPROVED,
    "turn-1",
    0,
    created_at=datetime(2026, 1, 1, tzinfo=UTC),
)
#: A final record of every kind, and whether the model sees it as an error: only a failed call.
_FINAL_RECORDS: dict[str, tuple[AgentToolCall | None, bool]] = {
    "succeeded": (
        dataclasses.replace(_CALL, status=AgentToolCallStatus.SUCCEEDED, output="refunded"),
        False,
    ),
    "failed": (
        dataclasses.replace(_CALL, status=AgentToolCallStatus.FAILED, error="card declined"),
        True,
    ),
    "rejected": (dataclasses.replace(_CALL, status=AgentToolCallStatus.REJECTED), False),
    "declined_question": (
        dataclasses.replace(
            _CALL, status=AgentToolCallStatus.REJECTED, error="The user declined to answer."
        ),
        False,
    ),
    "steered": (
        dataclasses.replace(
            _CALL,
            status=AgentToolCallStatus.REJECTED,
            cancellation_reason=CancellationReason.STEERED,
        ),
        False,
    ),
    "outcome_unknown": (
        dataclasses.replace(_CALL, status=AgentToolCallStatus.OUTCOME_UNKNOWN, error="lost"),
        False,
    ),
    "no_record": (None, False),
}


@pytest.mark.parametrize("kind", sorted(_FINAL_RECORDS))
def test_only_a_failed_call_is_flagged_an_error_to_the_model(runner_name: str, kind: str) -> None:
    if runner_name in _NO_ERROR_FLAG:
        pytest.skip(_NO_ERROR_FLAG[runner_name])
    if runner_name not in _ERROR_FLAGS:
        pytest.skip(f"runner {runner_name} is not one of the workspace's adapters")
    record, is_error = _FINAL_RECORDS[kind]
    if record is None and runner_name == "claude-agent-sdk":
        pytest.skip("the Claude runner renders only final records")

    assert tool_result_is_error(record) is is_error
    assert _ERROR_FLAGS[runner_name](record) is is_error
