"""Helpers of the steering, cancellation, settings, and spend limit tests: in-process gates and
probes of the session snapshot."""

from __future__ import annotations

import asyncio

from agent_session_test_support import assistant
from dex_agents import AgentSnapshot, AgentTurnContext, AgentUsage, MessageRole, TurnCompleted

__all__ = ["Gate", "echo_user_messages", "is_active", "user_texts"]


class Gate:
    """An in-process gate that a runner call waits on, and a flag that says a call reached it."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.opened = asyncio.Event()

    async def pass_through(self) -> None:
        """Mark the gate reached, then wait until the test opens it."""
        self.reached.set()
        await self.opened.wait()

    async def wait_reached(self) -> None:
        """Wait (30 s at most) until a runner call reached the gate."""
        await asyncio.wait_for(self.reached.wait(), 30)


def user_texts(turn: AgentTurnContext) -> list[str]:
    """The texts of the turn's own user messages, in order."""
    return [
        message.text or ""
        for message in turn.messages
        if message.role is MessageRole.USER and message.turn_id == turn.turn_id
    ]


def echo_user_messages(turn: AgentTurnContext) -> TurnCompleted:
    """A final answer naming the turn's user messages."""
    return TurnCompleted((assistant("heard " + " | ".join(user_texts(turn))),), AgentUsage())


def is_active(snapshot: AgentSnapshot) -> AgentSnapshot | None:
    """A snapshot probe: a turn is active."""
    state = snapshot.state
    return snapshot if state is not None and state.active_turn_id is not None else None
