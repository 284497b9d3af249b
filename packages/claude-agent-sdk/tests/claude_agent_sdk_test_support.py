"""What this package's in-process tests share."""

from __future__ import annotations

from dex_agents import AgentSessionClient, AgentSnapshot, AgentStatus
from dex_agents.testing import wait_for_agent_snapshot


async def wait_for_turn_end(
    sessions: AgentSessionClient, session_id: str, turn_count: int = 1
) -> AgentSnapshot:
    """The session's snapshot once its ``turn_count``-th turn ended and it waits for the user."""
    return await wait_for_agent_snapshot(
        sessions,
        session_id,
        lambda s: (
            s
            if s.state
            and s.state.turn_count == turn_count
            and s.state.status is AgentStatus.WAITING_FOR_USER_MESSAGE
            else None
        ),
        f"turn {turn_count} of {session_id} to end",
    )
