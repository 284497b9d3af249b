"""Where compaction may cut so that the active agent outlives it.

The session knows the active agent only from the stored items that name it (see
``_transcript``). A cut that summarizes every message naming an agent would send the next turn
back to the starting agent, so the cutoff moves to the turn boundary before the last message that
names the active agent, keeping that turn. A cut past a message naming the starting agent needs no
care: the starting agent is the default.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents import AgentMessage

from dex_agents_openai_agents._transcript import decode_framework_item

__all__ = ["keep_active_agent_named"]


def keep_active_agent_named(
    messages: Sequence[AgentMessage], cutoff: int, starting_agent: str
) -> int | None:
    """``cutoff``, or an earlier turn boundary that keeps a message naming the active agent.

    Returns ``None`` when no earlier boundary exists, so the session does not compact yet.
    """
    named = [(message, decode_framework_item(message.framework_item)[0]) for message in messages]
    if any(agent is not None for message, agent in named if message.sequence > cutoff):
        return cutoff
    last = next(
        (
            (message, agent)
            for message, agent in reversed(named)
            if message.sequence <= cutoff and agent is not None
        ),
        None,
    )
    if last is None or last[1] == starting_agent:
        return cutoff
    last_message = last[0]
    earlier = [
        message
        for message in messages
        if message.sequence < last_message.sequence and message.turn_id != last_message.turn_id
    ]
    return earlier[-1].sequence if earlier else None
