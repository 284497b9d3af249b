"""Where the session's messages live: every read and write of stored messages goes through here.

This release keeps one ``AgentMessages`` instance per message, keyed by
``message_sequence_key(sequence)``, with sequences from 1 and the newest sequence in
``AgentState.last_message_sequence``. Storing a message writes only that message. The Steps and RPCs
that read messages load every ``AgentMessages`` instance (see ``message_storing_step_options``).
Chunked storage later changes only this module: callers see sequences and ``AgentMessage`` values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from dex import Context

from dex_agents.agent_message_layout import assemble_stored_messages, page_agent_messages
from dex_agents.agent_session_persistence import AGENT_MESSAGES
from dex_agents.agent_session_values import (
    AgentMessage,
    AgentMessagesPage,
    AgentState,
    FrameworkMessage,
    message_sequence_key,
)

__all__ = [
    "append_messages",
    "load_messages",
    "page_messages",
]


def load_messages(context: Context) -> list[AgentMessage]:
    """Return every stored message in ascending sequence order.

    The invocation must load every ``AgentMessages`` instance.

    Args:
        context: The Step or RPC Context.

    Returns:
        The messages, oldest first.

    Raises:
        AttributeMapNotLoadedError: When the invocation did not load the messages.
        MessageLayoutError: When the stored sequences have a gap or a duplicate.

    Example:
        >>> [message.sequence for message in load_messages(context)]
        [1, 2, 3]
    """
    window = [
        AGENT_MESSAGES.get(context, key) for key in AGENT_MESSAGES.get_all_instance_keys(context)
    ]
    # No AgentMessageIndex yet: every message is in the window.
    return list(assemble_stored_messages(window, None, ()))


def append_messages(
    context: Context,
    state: AgentState,
    messages: Sequence[FrameworkMessage],
    *,
    turn_id: str | None,
    now: datetime,
) -> tuple[AgentState, list[AgentMessage]]:
    """Store ``messages`` after the newest stored message, in this Step's commit.

    Args:
        context: The Step Context.
        state: The session state as this Step will commit it, apart from the sequence.
        messages: The messages to store, in order.
        turn_id: The turn that stores them.
        now: The store time recorded on each message.

    Returns:
        The state with ``last_message_sequence`` advanced, and the stored messages.

    Example:
        >>> state, stored = append_messages(context, state, [user_message], turn_id="turn-1", now=now)
        >>> stored[0].sequence == state.last_message_sequence
        True
    """
    stored: list[AgentMessage] = []
    sequence = state.last_message_sequence
    for message in messages:
        sequence += 1
        agent_message = AgentMessage.from_framework_message(
            message, sequence=sequence, turn_id=turn_id, created_at=now
        )
        AGENT_MESSAGES.set(context, message_sequence_key(sequence), agent_message)
        stored.append(agent_message)
    return replace(state, last_message_sequence=sequence), stored


def page_messages(
    messages: Sequence[AgentMessage], after_sequence: int | None, limit: int
) -> AgentMessagesPage:
    """Return one page of ``messages``, oldest first, after ``after_sequence``.

    Args:
        messages: Every stored message, ascending.
        after_sequence: Start after this sequence; ``None`` starts at the oldest message.
        limit: Page size; clamped to 1..200.

    Returns:
        The page, with ``next_after_sequence`` set when more messages follow.

    Example:
        >>> page_messages(messages, None, 2).next_after_sequence
        2
    """
    return page_agent_messages(messages, None, after_sequence=after_sequence, limit=limit)
