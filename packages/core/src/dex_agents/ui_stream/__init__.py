"""Browser streams: a session's snapshot JSON and its ``AgentEvents`` as Server-Sent Events.

A browser renders a live session from two endpoints that the application mounts, with no store
besides Dex and no web framework dependency here:

- **Snapshot.** :func:`read_agent_event_stream_snapshot` returns the ``get_agent_snapshot`` result
  and the resume token to open the event stream from; serve its ``to_json()``,
  ``{"snapshot": ..., "resume_token": ...}``. While a turn is active, the token replays that
  turn's events, so the browser can rebuild its live text.
- **Events.** :func:`stream_agent_event_frames` checks the token with one short read, then
  returns a generator of SSE frames (``id`` the event's resume token, ``data`` the ``AgentEvent``
  wire JSON). Send :data:`AGENT_EVENT_STREAM_HEADERS`; answer 400 on
  :class:`InvalidAgentEventResumeTokenError`.

The ``_sync`` variants take a synchronous ``dex.Client`` for WSGI servers. Authorize every
route: the session ID and the resume token come from the browser.

Example:
    >>> @app.get("/sessions/{session_id}/events")
    ... async def events(session_id: str, request: Request) -> Response:
    ...     await authorize_session(request, session_id)
    ...     token = request.headers.get("last-event-id") or request.query_params.get(
    ...         "resume_token", ""
    ...     )
    ...     try:
    ...         frames = await stream_agent_event_frames(client, flow, session_id,
    ...                                                  resume_token=token)
    ...     except InvalidAgentEventResumeTokenError:
    ...         return Response(status_code=400)
    ...     return StreamingResponse(frames, headers=dict(AGENT_EVENT_STREAM_HEADERS))
"""

from dex_agents.ui_stream._agent_event_json import (
    PRIVATE_MESSAGE_FIELDS,
    PRIVATE_TOOL_CALL_FIELDS,
    agent_event_json_text,
    browser_snapshot_json,
)
from dex_agents.ui_stream._agent_event_sse import (
    AGENT_EVENT_STREAM_HEADERS,
    DEFAULT_POLL_TIMEOUT,
    KEEP_ALIVE_FRAME,
    TOKEN_CHECK_TIMEOUT,
    agent_event_frame,
    stream_agent_event_frames,
    stream_agent_event_frames_sync,
)
from dex_agents.ui_stream._agent_event_stream_snapshot import (
    AgentEventStreamSnapshot,
    read_agent_event_stream_snapshot,
    read_agent_event_stream_snapshot_sync,
)
from dex_agents.ui_stream._invalid_resume_token_error import InvalidAgentEventResumeTokenError

__all__ = [
    "AGENT_EVENT_STREAM_HEADERS",
    "DEFAULT_POLL_TIMEOUT",
    "KEEP_ALIVE_FRAME",
    "PRIVATE_MESSAGE_FIELDS",
    "PRIVATE_TOOL_CALL_FIELDS",
    "TOKEN_CHECK_TIMEOUT",
    "AgentEventStreamSnapshot",
    "InvalidAgentEventResumeTokenError",
    "agent_event_frame",
    "agent_event_json_text",
    "browser_snapshot_json",
    "read_agent_event_stream_snapshot",
    "read_agent_event_stream_snapshot_sync",
    "stream_agent_event_frames",
    "stream_agent_event_frames_sync",
]
