"""Server-Sent Event frames of a session's ``AgentEvents`` Stream, for a browser ``EventSource``.

Each frame's ``id`` is the event's Dex resume token and its ``data`` the ``AgentEvent`` wire
JSON. A reconnecting ``EventSource`` sends the last ``id`` as ``Last-Event-ID``; passed back as
``resume_token``, the stream continues with the next event. The generators never end by
themselves while Dex answers: after each empty long poll they yield :data:`KEEP_ALIVE_FRAME`.
With the Dex Stream Store disabled, an empty token opens a stream of keep-alives only, one per
``poll_timeout``, and the browser polls the snapshot instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Generator, Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Final

import grpc
from dex import AsyncClient, Client, DexServiceError, Flow, LongPollTimeoutError, StreamMessage

from dex_agents import AgentEvent, ConfigurationError
from dex_agents._json_values import WireValueError
from dex_agents.ui_stream._agent_event_json import agent_event_json_text
from dex_agents.ui_stream._agent_event_stream_snapshot import require_agent_session_flow
from dex_agents.ui_stream._invalid_resume_token_error import InvalidAgentEventResumeTokenError
from dex_agents.ui_stream._session_scope import (
    require_session_of_flow,
    require_session_of_flow_sync,
)
from dex_agents.ui_stream._stream_store_disabled import (
    STREAM_STORE_DISABLED_DETAIL,
    is_stream_store_disabled,
)

__all__ = [
    "AGENT_EVENT_STREAM_HEADERS",
    "DEFAULT_POLL_TIMEOUT",
    "KEEP_ALIVE_FRAME",
    "TOKEN_CHECK_TIMEOUT",
    "agent_event_frame",
    "stream_agent_event_frames",
    "stream_agent_event_frames_sync",
]

_logger: Final = logging.getLogger("dex_agents.ui_stream")

KEEP_ALIVE_FRAME: Final = ": keep-alive\n\n"
"""An SSE comment, yielded after each empty long poll so proxies keep the response open."""

AGENT_EVENT_STREAM_HEADERS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache, no-transform",
        # Tells nginx-style proxies to pass each frame on at once.
        "X-Accel-Buffering": "no",
    }
)
"""Headers of the event response. No hop-by-hop header such as ``Connection``: WSGI servers
refuse them, and HTTP/2 forbids them."""

DEFAULT_POLL_TIMEOUT: Final = timedelta(seconds=15)
"""How long one Dex long poll waits before a keep-alive comment."""

TOKEN_CHECK_TIMEOUT: Final = timedelta(seconds=1)
"""How long the first read, which checks the token, waits; Dex waits in whole seconds."""

_FORBIDDEN_ID_CHARACTERS: Final = ("\n", "\r", "\0")


def agent_event_frame(message: StreamMessage[AgentEvent]) -> str:
    """One SSE frame: ``id`` the message's resume token, ``data`` the event's wire JSON.

    Raises:
        WireValueError: (a ``ValueError``) When the token holds a line break or NUL, which an
            SSE ``id`` cannot carry.

    Example:
        >>> from dex import StreamMessage
        >>> event = AgentEvent("turn_started", "turn-1", "StartAgentSession-1", 1, '{"sequence":1}')
        >>> print(agent_event_frame(StreamMessage(event, "token-1", now, "#StartAgentSession-1")))
        id: token-1
        data: {"attempt":1,"payload":"{\\"sequence\\":1}",...,"type":"turn_started"}
        <BLANKLINE>
    """
    token = message.resume_token
    if any(character in token for character in _FORBIDDEN_ID_CHARACTERS):
        raise WireValueError(
            "Dex returned a resume token that holds a line break or NUL, which an SSE id line "
            "cannot carry; the event cannot be sent as a frame"
        )
    return f"id: {token}\ndata: {agent_event_json_text(message.value)}\n\n"


async def stream_agent_event_frames(
    client: AsyncClient,
    flow: Flow[Any],
    session_id: str,
    *,
    resume_token: str = "",
    poll_timeout: timedelta = DEFAULT_POLL_TIMEOUT,
) -> AsyncGenerator[str, None]:
    """Check ``resume_token`` with one short read, then return the session's SSE frames.

    Call it before the response starts, so a refused token can still become a 400. The
    generator yields one frame per event after the token, and :data:`KEEP_ALIVE_FRAME` after
    each ``poll_timeout`` without one; it stops when the web framework cancels it, or, when Dex
    refuses a later read, after logging it (the browser reconnects with ``Last-Event-ID``).
    Dex Streams need no Flow, so the session is checked first (one ``describe_flow`` call): an ID
    that names no session, or a session of another Flow type, is refused before anything is read.
    Authorize the caller for the session first. With the Dex Stream Store disabled
    (``streamStore.backend: disabled``) Dex keeps no event: the empty token, which the snapshot
    then carries, yields only a keep-alive after each ``poll_timeout``, with no error, and any
    other token is refused with :class:`InvalidAgentEventResumeTokenError`.

    Args:
        client: An ``AsyncClient`` whose Registry holds ``flow``.
        flow: The session's ``AgentSessionFlow``.
        session_id: The session (Flow) ID; authorize the caller for it first.
        resume_token: ``Last-Event-ID``, or the snapshot's ``resume_token``; empty reads from
            the oldest retained event (when the Stream Store is enabled).
        poll_timeout: How long each Dex long poll waits, in whole seconds.

    Raises:
        InvalidAgentEventResumeTokenError: When Dex refuses the token, such as one of another
            session or a forged one, or any non-empty token while the Stream Store is disabled;
            nothing was read.
        ConfigurationTypeError: When ``flow`` is not an ``AgentSessionFlow``.
        ConfigurationError: (a ``ValueError``) When ``poll_timeout`` is not a positive whole
            number of seconds.
        FlowNotFoundError: When no session has this ID.
        SessionFlowTypeError: When the session is of another Flow type (a
            ``FlowNotActiveOrNotFoundError``: answer it as a missing session).
        DexServiceError: When Dex fails the first read otherwise.

    Example:
        An events route answers 400 for a refused token, else streams the frames with
        :data:`AGENT_EVENT_STREAM_HEADERS`:

        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker
        >>> async def events_route(client: AsyncClient, last_event_id: str) -> tuple[int, str]:
        ...     try:
        ...         frames = await stream_agent_event_frames(
        ...             client, flow, "frames-example", resume_token=last_event_id)
        ...     except InvalidAgentEventResumeTokenError:
        ...         return 400, ""
        ...     first = await anext(frames)  # a web framework iterates the rest
        ...     await frames.aclose()
        ...     return 200, first.splitlines()[1]
        >>> async def open_twice() -> list[tuple[int, str]]:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         await dex.sessions(flow).start_session("frames-example", "Hello")
        ...         return [await events_route(dex.client, token) for token in ("", "garbled")]
        >>> asyncio.run(open_twice())
        [(200, 'data: {..."turn_id":"turn-1","type":"turn_started"}'), (400, '')]
    """
    session_flow = require_agent_session_flow(flow)
    _require_poll_timeout(poll_timeout)
    await require_session_of_flow(client, session_flow, session_id)
    events = session_flow.agent_events
    reader = _FrameReader(session_id, resume_token)
    try:
        first = await client.read_stream(session_id, events, resume_token, TOKEN_CHECK_TIMEOUT)
    except LongPollTimeoutError:
        first = None
    except DexServiceError as error:
        reader.raise_unless_stream_store_disabled(error)
        first = None

    async def frames() -> AsyncGenerator[str, None]:
        if first is not None:
            yield reader.frame(first)
        while True:
            try:
                message = await client.read_stream(session_id, events, reader.token, poll_timeout)
            except LongPollTimeoutError:
                yield KEEP_ALIVE_FRAME
                continue
            except DexServiceError as error:
                if not reader.keeps_alive_after(error):
                    return
                # Dex answers at once: wait as a long poll would, so the loop does not spin.
                await asyncio.sleep(poll_timeout.total_seconds())
                yield KEEP_ALIVE_FRAME
                continue
            yield reader.frame(message)

    return frames()


def stream_agent_event_frames_sync(
    client: Client,
    flow: Flow[Any],
    session_id: str,
    *,
    resume_token: str = "",
    poll_timeout: timedelta = DEFAULT_POLL_TIMEOUT,
) -> Generator[str, None, None]:
    """:func:`stream_agent_event_frames` with a synchronous ``Client`` (WSGI servers).

    Each open stream holds one server thread. Closing the generator takes effect after its
    current long poll, up to ``poll_timeout``.

    Raises:
        InvalidAgentEventResumeTokenError: When Dex refuses the token (any non-empty one
            while the Stream Store is disabled); nothing was read.
        ConfigurationTypeError: When ``flow`` is not an ``AgentSessionFlow``.
        ConfigurationError: (a ``ValueError``) When ``poll_timeout`` is not a positive whole
            number of seconds.
        FlowNotFoundError: When no session has this ID.
        SessionFlowTypeError: When the session is of another Flow type (a
            ``FlowNotActiveOrNotFoundError``: answer it as a missing session).
        DexServiceError: When Dex fails the first read otherwise.

    Example:
        The events route of a WSGI application (``packages/core/tests/test_ui_stream.py``
        reads the same frames through both variants):

        >>> def events_route(sync_client: Client, session_id: str, last_event_id: str):
        ...     try:
        ...         frames = stream_agent_event_frames_sync(
        ...             sync_client, flow, session_id, resume_token=last_event_id)
        ...     except InvalidAgentEventResumeTokenError:
        ...         return 400, {}, iter(())
        ...     return 200, dict(AGENT_EVENT_STREAM_HEADERS), frames
    """
    session_flow = require_agent_session_flow(flow)
    _require_poll_timeout(poll_timeout)
    require_session_of_flow_sync(client, session_flow, session_id)
    events = session_flow.agent_events
    reader = _FrameReader(session_id, resume_token)
    try:
        first = client.read_stream(session_id, events, resume_token, TOKEN_CHECK_TIMEOUT)
    except LongPollTimeoutError:
        first = None
    except DexServiceError as error:
        reader.raise_unless_stream_store_disabled(error)
        first = None

    def frames() -> Generator[str, None, None]:
        if first is not None:
            yield reader.frame(first)
        while True:
            try:
                message = client.read_stream(session_id, events, reader.token, poll_timeout)
            except LongPollTimeoutError:
                yield KEEP_ALIVE_FRAME
                continue
            except DexServiceError as error:
                if not reader.keeps_alive_after(error):
                    return
                time.sleep(poll_timeout.total_seconds())
                yield KEEP_ALIVE_FRAME
                continue
            yield reader.frame(message)

    return frames()


class _FrameReader:
    """What both generators share: the position read so far and the handling of each answer."""

    def __init__(self, session_id: str, resume_token: str) -> None:
        self.session_id = session_id
        self.token = resume_token

    def frame(self, message: StreamMessage[AgentEvent]) -> str:
        frame = agent_event_frame(message)
        self.token = message.resume_token
        return frame

    def raise_unless_stream_store_disabled(self, error: DexServiceError) -> None:
        """After the first read failed: return when the stream is to yield keep-alives only
        (the Stream Store is disabled and the token empty), else raise what the caller gets."""
        if error.code is grpc.StatusCode.INVALID_ARGUMENT:
            raise InvalidAgentEventResumeTokenError(self.session_id, error.detail) from error
        if not is_stream_store_disabled(error):
            raise error
        if self.token:
            detail = f"{STREAM_STORE_DISABLED_DETAIL} (Dex: {error.detail})"
            raise InvalidAgentEventResumeTokenError(self.session_id, detail) from error

    def keeps_alive_after(self, error: DexServiceError) -> bool:
        """After a later read failed: True to wait and keep alive (the Stream Store is disabled
        and no event was read), else log the end of the stream and return False."""
        if not self.token and is_stream_store_disabled(error):
            return True
        self._log_end(error)
        return False

    def _log_end(self, error: DexServiceError) -> None:
        # Raising would only make the framework log a traceback mid-response; ending lets the
        # browser reconnect with Last-Event-ID, where a refused token becomes a 400.
        _logger.warning(
            "ended the event stream of session %s: Dex refused a read (%s: %s)",
            self.session_id,
            error.code.name,
            error.detail,
        )


def _require_poll_timeout(poll_timeout: timedelta) -> None:
    seconds = poll_timeout.total_seconds()
    if seconds < 1 or not seconds.is_integer():
        raise ConfigurationError(
            f"poll_timeout must be a positive whole number of seconds, got {poll_timeout!r}"
        )
