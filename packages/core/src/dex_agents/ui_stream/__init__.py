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
route: the session ID and the resume token come from the browser. Each helper serves only
sessions of the Flow type it is given, like ``AgentSessionClient``: a session of another type
raises ``SessionFlowTypeError`` (a ``FlowNotActiveOrNotFoundError``) and an unknown ID the SDK's
``FlowNotFoundError``, before anything is read; answer both 404.

With the Dex Stream Store disabled (``streamStore.backend: disabled``), the snapshot still
works, with an empty token, and the event stream yields only keep-alive comments; poll the
snapshot instead.

The web chat of the repository (``examples/web-chat``) mounts both routes in Starlette.

Example:
    A session's first turn, read as a browser reads it: every frame from the oldest event until
    the turn completed, then the snapshot the page renders.

    >>> import asyncio, json
    >>> from dex_agents.testing import in_process_worker, wait_for_agent_snapshot
    >>> async def first_turn() -> tuple[list[str], str]:
    ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
    ...         await dex.sessions(flow).start_session("ui-stream-example", "Hello")
    ...         frames = await stream_agent_event_frames(dex.client, flow, "ui-stream-example")
    ...         types: list[str] = []
    ...         async for frame in frames:
    ...             if frame != KEEP_ALIVE_FRAME:
    ...                 types.append(json.loads(frame.partition("data: ")[2])["type"])
    ...             if types[-1:] == ["turn_completed"]:
    ...                 break
    ...         await frames.aclose()
    ...         await wait_for_agent_snapshot(dex.sessions(flow), "ui-stream-example",
    ...             lambda snapshot: snapshot if len(snapshot.messages) == 2 else None)
    ...         value = await read_agent_event_stream_snapshot(dex.client, flow, "ui-stream-example")
    ...         return types, value.to_json()["snapshot"]["messages"][1]["text"]
    >>> asyncio.run(first_turn())
    (['turn_started', 'text_delta', 'usage_recorded', 'turn_completed'], 'Hello')
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
