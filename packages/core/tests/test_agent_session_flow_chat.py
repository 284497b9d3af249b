"""A chat turn through the real engine: messages, usage, events, and the second turn."""

from __future__ import annotations

from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    running_session_stack,
)
from dex_agents import (
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    MessageRole,
    TurnCompleted,
)
from dex_agents.testing import turn_ended, wait_for_agent_snapshot
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory


def _echo(turn: AgentTurnContext) -> AgentTurnOutcome:
    turn.events.write_text_delta("Echo: ")
    return TurnCompleted(
        (assistant(f"Echo: {turn.messages[-1].text}"),),
        AgentUsage(input_tokens=5, output_tokens=2),
    )


async def test_chat_turns_store_messages_usage_and_events(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_echo)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await stack.sessions.start_session("session-1", "hello")
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "session-1", turn_ended(1), "the first turn to complete"
        )
        assert [(m.sequence, m.role, m.text) for m in snapshot.messages] == [
            (1, MessageRole.USER, "hello"),
            (2, MessageRole.ASSISTANT, "Echo: hello"),
        ]
        assert snapshot.state is not None
        assert snapshot.state.active_turn_id is None
        assert snapshot.usage.input_tokens == 5
        assert snapshot.usage.model_calls == 1

        assert not await stack.sessions.send_user_message("session-1", "   ")
        assert await stack.sessions.send_user_message("session-1", "again")
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "session-1", turn_ended(2), "the second turn to complete"
        )
        assert [m.text for m in snapshot.messages][-2:] == ["again", "Echo: again"]
        assert snapshot.usage.input_tokens == 10
        assert snapshot.usage.model_calls == 2
        assert len(runner.model_calls) == 2
        second_turn = runner.model_calls[1]
        assert second_turn.turn_id == "turn-2"
        assert [m.text for m in second_turn.messages] == ["hello", "Echo: hello", "again"]

        events = []
        token = ""
        while True:
            message = await stack.client.read_stream(
                stack.dex.scoped("session-1"), stack.flow.agent_events, token
            )
            events.append(message.value)
            token = message.resume_token
            if message.value.type == "turn_completed" and message.value.turn_id == "turn-2":
                break
        types = [(event.type, event.turn_id) for event in events]
        assert types[:4] == [
            ("turn_started", "turn-1"),
            ("text_delta", "turn-1"),
            ("usage_recorded", "turn-1"),
            ("turn_completed", "turn-1"),
        ]
        assert all(event.step_execution_id and event.attempt >= 1 for event in events)
        usage_event = events[2].payload_json()
        assert usage_event["session"]["input_tokens"] == 5  # type: ignore[index,call-overload]


async def test_blank_initial_message_starts_no_turn(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    runner = ScriptedRunner(_echo)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        await stack.sessions.start_session("session-2", "")
        snapshot = await wait_for_agent_snapshot(
            stack.sessions, "session-2", lambda s: s if s.state is not None else None
        )
        assert snapshot.state is not None and snapshot.state.turn_count == 0
        assert snapshot.messages == ()
        assert runner.model_calls == []
