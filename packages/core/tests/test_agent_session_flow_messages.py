"""Snapshot and message paging through the real engine."""

from __future__ import annotations

import asyncio

from agent_session_test_support import (
    ScriptedRunner,
    assistant,
    running_session_stack,
)
from dex_agents import (
    AgentStatus,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    TurnCompleted,
)
from dex_agents.testing import (
    read_agent_message_pages,
    turn_ended,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.testing.pytest_plugin import InProcessWorkerFactory


def _reply_twice(turn: AgentTurnContext) -> AgentTurnOutcome:
    text = turn.messages[-1].text
    return TurnCompleted((assistant(f"a:{text}"), assistant(f"b:{text}")), AgentUsage())


async def test_messages_page_oldest_first_with_a_clamped_limit(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    async with running_session_stack(dex_in_process_worker, ScriptedRunner(_reply_twice)) as stack:
        sessions = stack.sessions
        await sessions.start_session("session-1", "one")
        await wait_for_agent_snapshot(sessions, "session-1", turn_ended(1))
        assert await sessions.send_user_message("session-1", "two")
        snapshot = await wait_for_agent_snapshot(sessions, "session-1", turn_ended(2))
        assert [m.sequence for m in snapshot.messages] == [1, 2, 3, 4, 5, 6]
        assert snapshot.state is not None and snapshot.state.last_message_sequence == 6

        pages = await read_agent_message_pages(sessions, "session-1", limit=4)
        assert len(pages) == 2
        texts = [m.text for page in pages for m in page.messages]
        assert texts == ["one", "a:one", "b:one", "two", "a:two", "b:two"]

        clamped_low = await sessions.list_agent_messages("session-1", limit=0)
        assert [m.sequence for m in clamped_low.messages] == [1]
        assert clamped_low.next_after_sequence == 1
        clamped_high = await sessions.list_agent_messages("session-1", limit=10_000)
        assert len(clamped_high.messages) == 6
        assert clamped_high.next_after_sequence is None


async def test_messages_sent_during_a_turn_queue_for_the_next_one(
    dex_in_process_worker: InProcessWorkerFactory,
) -> None:
    release = asyncio.Event()

    async def hold_first_turn(turn: AgentTurnContext) -> None:
        if turn.turn_id == "turn-1":
            await asyncio.wait_for(release.wait(), timeout=30)

    runner = ScriptedRunner(_reply_twice, before_model_call=hold_first_turn)
    async with running_session_stack(dex_in_process_worker, runner) as stack:
        sessions = stack.sessions
        await sessions.start_session("session-1", "one")
        await wait_until("the first model call to start", lambda: runner.model_calls)
        assert await sessions.send_user_message("session-1", "queued")
        snapshot = await sessions.get_agent_snapshot("session-1")
        assert snapshot.state is not None
        assert snapshot.state.status is AgentStatus.RUNNING_MODEL
        assert snapshot.state.active_turn_id == "turn-1"
        assert snapshot.queued_message_count == 1
        (queued,) = snapshot.queued_messages
        assert queued.text == "queued" and queued.message_id
        release.set()
        snapshot = await wait_for_agent_snapshot(sessions, "session-1", turn_ended(2))
        assert [m.text for m in snapshot.messages] == [
            "one", "a:one", "b:one", "queued", "a:queued", "b:queued",
        ]  # fmt: skip
        assert snapshot.queued_messages == ()
