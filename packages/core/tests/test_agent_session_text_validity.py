"""Issue 36 case 2 through the real engine: a lone surrogate never poisons a session.

Refused where a caller sends it (the client and the RPC return ``False``, ``start_session`` raises,
settings are a ``ConfigurationError``); replaced by U+FFFD where a model or a tool returns it; and a
session that stored one before this check still reads, and its next turn runs.
"""

from __future__ import annotations

import json

import dex_agents._session.runner_facade as runner_facade
import pytest
from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    final_answer_with_results,
    read_events_until,
    request_tools,
    running_session_stack,
    tool_call,
)
from dex_agents import (
    AgentSessionOptions,
    AgentSessionStartInput,
    AgentToolCallStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    AgentUserMessage,
    ConfigurationError,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory
from dex_agents.ui_stream import read_agent_event_stream_snapshot

# What json.loads makes of a web API's answer that holds an escaped lone surrogate.
LONE_SURROGATE = json.loads('"caf\\ud800e"')


def _echo(turn: AgentTurnContext) -> AgentTurnOutcome:
    return TurnCompleted((assistant(f"echo {turn.messages[-1].text}"),), AgentUsage())


def _utf8_json(value: object) -> bytes:
    """What a browser route sends: JSON text encoded as UTF-8 (fails on a lone surrogate)."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


async def test_callers_cannot_send_a_lone_surrogate(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_echo)) as stack:
        sessions = stack.sessions
        with pytest.raises(ConfigurationError, match="lone surrogate U\\+D800"):
            await sessions.start_session("s", LONE_SURROGATE)
        with pytest.raises(ConfigurationError, match="lone surrogate"):
            await sessions.start_session("s", "hi", session_settings={"name": LONE_SURROGATE})
        await sessions.start_session("s", "hi")
        await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        assert not await sessions.send_user_message("s", LONE_SURROGATE)
        assert not await sessions.steer_user_message("s", LONE_SURROGATE)
        raw = await stack.client.invoke_rpc(
            stack.flow.send_user_message, stack.dex.scoped("s"), AgentUserMessage(LONE_SURROGATE)
        )
        assert raw is False
        with pytest.raises(ConfigurationError, match="lone surrogate"):
            await sessions.update_session_settings("s", {LONE_SURROGATE: 1})
        snapshot = await sessions.get_agent_snapshot("s")
        assert snapshot.queued_messages == () and len(snapshot.messages) == 2
        # A first message that reached the session past the client starts no turn, and says why.
        await stack.client.start_flow(
            stack.flow, stack.dex.scoped("raw"), AgentSessionStartInput(LONE_SURROGATE)
        )
        raw_snapshot = await wait_for_agent_snapshot(
            sessions, "raw", lambda snapshot: snapshot if snapshot.state else None
        )
        assert raw_snapshot.state is not None and raw_snapshot.messages == ()
        assert "lone surrogate" in str(raw_snapshot.state.last_turn_error)
        assert await sessions.send_user_message("raw", "hello")
        raw_snapshot = await wait_for_agent_snapshot(sessions, "raw", turn_ended(1))
        assert raw_snapshot.messages[-1].text == "echo hello"


def _fetch_then_answer(turn: AgentTurnContext) -> AgentTurnOutcome:
    if not turn.is_resuming:
        turn.events.write_text_delta(f"looking up {LONE_SURROGATE}")
        return request_tools(turn, tool_call(turn, f"c-{turn.turn_id}", "fetch", {}))
    return final_answer_with_results(turn)


async def _fetch(call: DeferredToolExecution) -> ToolExecutionResult:
    if call.tool_call.turn_id == "turn-2":
        raise ToolExecutionError(f"upstream said {LONE_SURROGATE}")
    return ToolExecutionResult(json.dumps({"name": LONE_SURROGATE}, ensure_ascii=False))


async def test_tool_and_model_output_is_stored_with_the_surrogate_replaced(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_fetch_then_answer, {"fetch": _fetch})
    options = AgentSessionOptions(tool_policies={"fetch": ToolPolicy(ToolEffect.READ)})
    async with running_session_stack(dex_in_process_worker, runner, options) as stack:
        sessions = stack.sessions
        await sessions.start_session("s", "look it up")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        record = runner.model_calls[-1].tool_calls["c-turn-1"]
        assert record.status is AgentToolCallStatus.SUCCEEDED
        assert record.output == '{"name": "caf\ufffde"}'
        assert "caf\ufffde" in str(snapshot.messages[-1].text)
        # A tool's error message is stored the same way.
        assert await sessions.send_user_message("s", "again")
        await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        failed = runner.model_calls[-1].tool_calls["c-turn-2"]
        assert failed.status is AgentToolCallStatus.FAILED
        assert failed.error == "upstream said caf\ufffde"
        # Every later turn still runs, and the browser snapshot encodes as UTF-8.
        assert await sessions.send_user_message("s", "third")
        await wait_for_agent_snapshot(sessions, "s", turn_ended(3))
        browser = await read_agent_event_stream_snapshot(
            stack.client, stack.flow, stack.dex.scoped("s")
        )
        assert b"caf\xef\xbf\xbde" in _utf8_json(browser.to_json())
        # The live text event the model streamed was written with the surrogate replaced.
        events = await read_events_until(stack, "s", lambda event: event.type == "text_delta")
        assert events[-1].payload_json()["text"] == "looking up caf\ufffde"


def _poisoned_answer(turn: AgentTurnContext) -> AgentTurnOutcome:
    if turn.turn_id == "turn-1":
        return TurnCompleted((assistant(f"I found {LONE_SURROGATE}"),), AgentUsage())
    return _echo(turn)


async def test_a_session_poisoned_before_the_check_still_reads_and_runs(
    dex_in_process_worker: InProcessWorkerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = ScriptedRunner(_poisoned_answer)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        # An earlier release stored model output unchanged.
        monkeypatch.setattr(runner_facade, "replace_unencodable_values", lambda value: value)
        await sessions.start_session("s", "find it")
        await wait_for_agent_snapshot(sessions, "s", turn_ended(1))
        monkeypatch.undo()
        snapshot = await sessions.get_agent_snapshot("s")
        assert snapshot.messages[-1].text == "I found caf\ufffde"
        page = await sessions.list_agent_messages("s")
        assert page.messages[-1].text == "I found caf\ufffde"
        browser = await read_agent_event_stream_snapshot(
            stack.client, stack.flow, stack.dex.scoped("s")
        )
        assert _utf8_json(browser.to_json())
        assert await sessions.send_user_message("s", "next")
        snapshot = await wait_for_agent_snapshot(sessions, "s", turn_ended(2))
        assert snapshot.state is not None and snapshot.state.last_turn_error is None
        assert snapshot.messages[-1].text == "echo next"
        # The next model call's input reads the stored text with U+FFFD, as a model API needs.
        texts = [message.text or "" for message in runner.model_calls[-1].messages]
        assert texts[:2] == ["find it", "I found caf\ufffde"]
