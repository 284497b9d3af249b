"""Where a browser opens a session's event stream: the resume token that goes with a snapshot.

The helpers list ``AgentEvents`` newest first *before* they read the snapshot, so every event
written after the listing comes after the token and reaches the browser: an event written between
the two reads is replayed, never lost. With no turn active, the token is that of the newest
listed event. While a turn is active, it is that of the newest event of an earlier turn, so the
stream replays the whole active turn and the browser can rebuild its live text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from dex import StreamMessage

from dex_agents import AgentEvent

__all__ = ["HEAD_OF_STREAM_TOKEN", "STREAM_LIST_PAGE_SIZE", "resume_token_before_turn"]

STREAM_LIST_PAGE_SIZE: Final = 200
"""Events listed per ``ListStreamMessages`` page while looking for the active turn's start."""

HEAD_OF_STREAM_TOKEN: Final = ""
"""The token that reads from the oldest retained event."""


def resume_token_before_turn(
    newest_first: Sequence[StreamMessage[AgentEvent]], active_turn_id: str | None
) -> str | None:
    """The token of the newest listed event not of ``active_turn_id``, or ``None`` when every
    listed event belongs to it (look at the next older page; past the last one, read from the
    head with :data:`HEAD_OF_STREAM_TOKEN`).

    With no turn active that is simply the newest event.

    Example:
        >>> resume_token_before_turn(page.messages, snapshot.state.active_turn_id)
    """
    for message in newest_first:
        if active_turn_id is None or message.value.turn_id != active_turn_id:
            return message.resume_token
    return None
