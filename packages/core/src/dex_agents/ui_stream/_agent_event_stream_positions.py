"""Where a browser opens a session's event stream: the resume token that goes with a snapshot.

The helpers list ``AgentEvents`` newest first *before* they read the snapshot, so every event
written after the listing comes after the token and reaches the browser: an event written between
the two reads is replayed, never lost. The token is that of the newest listed event of a turn the
snapshot shows finished (or of no turn), so the stream replays every event of a turn still open:
the active turn, whose live text the browser rebuilds, and a turn whose first events a Step wrote
before it committed, which the snapshot does not show yet.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from dex import StreamMessage

from dex_agents import AgentEvent, AgentState

__all__ = ["HEAD_OF_STREAM_TOKEN", "STREAM_LIST_PAGE_SIZE", "resume_token_before_open_turns"]

STREAM_LIST_PAGE_SIZE: Final = 200
"""Events listed per ``ListStreamMessages`` page while looking for the open turns' start."""

HEAD_OF_STREAM_TOKEN: Final = ""
"""The token that reads from the oldest retained event."""

_TURN_ID: Final = re.compile(r"^turn-(\d+)$")


def resume_token_before_open_turns(
    newest_first: Sequence[StreamMessage[AgentEvent]], state: AgentState | None
) -> str | None:
    """The token of the newest listed event not of a turn still open in ``state``, or ``None``
    when every listed event belongs to one (look at the next older page; past the last one, read
    from the head with :data:`HEAD_OF_STREAM_TOKEN`).

    A turn is open when it is ``state.active_turn_id`` or newer than ``state.turn_count``.

    Example:
        The newest event is of turn 2, still running; the stream opens after turn 1's last event:

        >>> def listed(turn_id: str, token: str) -> StreamMessage[AgentEvent]:
        ...     return StreamMessage(AgentEvent("text_delta", turn_id, "RunModel-1", 1, "{}"),
        ...                          token, now, "#RunModel-1")
        >>> newest_first = [listed("turn-2", "token-9"), listed("turn-1", "token-8")]
        >>> resume_token_before_open_turns(newest_first, AgentState(active_turn_id="turn-2",
        ...                                                         turn_count=1))
        'token-8'
        >>> resume_token_before_open_turns(newest_first[:1], AgentState(active_turn_id="turn-2"))
    """
    for message in newest_first:
        if not _is_open(message.value.turn_id, state):
            return message.resume_token
    return None


def _is_open(turn_id: str | None, state: AgentState | None) -> bool:
    if turn_id is None:
        return False
    if state is not None and turn_id == state.active_turn_id:
        return True
    match = _TURN_ID.match(turn_id)
    if match is None:
        return False
    return int(match.group(1)) > (state.turn_count if state is not None else 0)
