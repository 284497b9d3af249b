"""A turn's messages read from the window alone: the turn-level calls' read at a turn's end.

``list_agent_messages`` loads the window and every kept chunk (as the documentation says), so its
task carries the whole kept transcript however few messages the page returns: about 450 KiB at
turn 190 of ``benchmarks/session_turns.py``, built by the engine, sent, and parsed by the Worker at
the end of every ``run_turn``. A turn's messages are nearly always the newest, in the window. The
internal ``list_recent_agent_messages`` RPC loads only the window and answers the very page
``list_agent_messages`` would when no kept chunk holds a message after the requested sequence;
otherwise it answers no page, and the client reads ``list_agent_messages``.

Example:
    >>> RecentAgentMessages().page is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from dex import Context

from dex_agents._json_values import WireValue
from dex_agents._session.message_decode_cache import MessageDecodeCache
from dex_agents._session.message_layout import chunks_to_load
from dex_agents._session.message_store import page_messages
from dex_agents._session.persistence import AGENT_MESSAGE_INDEX
from dex_agents._values import AgentMessagesPage, ListAgentMessagesRequest

__all__ = ["RecentAgentMessages", "recent_messages_page"]


@dataclass(frozen=True)
class RecentAgentMessages(WireValue):
    """Output of the internal ``list_recent_agent_messages`` RPC.

    Attributes:
        page: The ``list_agent_messages`` page, or ``None`` when a kept chunk holds a message
            after the requested sequence (read ``list_agent_messages`` then).
    """

    page: AgentMessagesPage | None = None


def recent_messages_page(
    context: Context, request: ListAgentMessagesRequest, cache: MessageDecodeCache
) -> RecentAgentMessages:
    """The page of ``request`` from an RPC that loaded the window but no chunk, when it can be.

    Args:
        context: The RPC Context; it loaded every ``AgentMessages`` instance.
        request: The page asked for, as ``list_agent_messages`` takes it.
        cache: The Flow's decoded-message cache.
    """
    index = AGENT_MESSAGE_INDEX.get(context)
    if chunks_to_load(index, after_sequence=request.after_sequence):
        return RecentAgentMessages()
    return RecentAgentMessages(
        page_messages(context, request.after_sequence, request.limit, cache=cache)
    )
