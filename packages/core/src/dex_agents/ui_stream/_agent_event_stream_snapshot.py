"""The snapshot a browser renders first, with the resume token to open the event stream from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dex import AsyncClient, Client, DexServiceError, Flow, StreamMessagesPage

from dex_agents import (
    AgentEvent,
    AgentSessionFlow,
    AgentSnapshot,
    ConfigurationTypeError,
    JsonObject,
)
from dex_agents.ui_stream._agent_event_json import browser_snapshot_json
from dex_agents.ui_stream._agent_event_stream_positions import (
    HEAD_OF_STREAM_TOKEN,
    STREAM_LIST_PAGE_SIZE,
    resume_token_before_open_turns,
)
from dex_agents.ui_stream._session_scope import (
    require_session_of_flow,
    require_session_of_flow_sync,
)
from dex_agents.ui_stream._stream_store_disabled import is_stream_store_disabled

__all__ = [
    "AgentEventStreamSnapshot",
    "read_agent_event_stream_snapshot",
    "read_agent_event_stream_snapshot_sync",
    "require_agent_session_flow",
]


@dataclass(frozen=True)
class AgentEventStreamSnapshot:
    """A session's snapshot and the Dex resume token to open its event stream from.

    Attributes:
        snapshot: The ``get_agent_snapshot`` result, complete, for the server's own use.
        resume_token: Where the browser opens the stream: while a turn is active, the stream
            replays that turn's events; otherwise it continues with the next event (or replays
            a turn that started but that the snapshot does not show yet). Empty reads from the
            oldest retained event; it is also empty when the Dex Stream Store is disabled
            (``streamStore.backend: disabled``), where the event stream yields only keep-alives
            and the browser polls the snapshot instead.

    Example:
        >>> value = AgentEventStreamSnapshot(AgentSnapshot(messages=messages), resume_token="")
        >>> sorted(value.to_json()), value.to_json()["resume_token"] == value.resume_token
        (['resume_token', 'snapshot'], True)
    """

    snapshot: AgentSnapshot
    resume_token: str

    def to_json(self) -> JsonObject:
        """``{"snapshot": ..., "resume_token": ...}`` in the wire format, for the browser.

        The snapshot leaves out the fields only the session's Steps use (``framework_item`` on
        messages; ``tool_source_reference``, ``trace_context``, ``input_continuation``,
        ``input_answers`` and ``task_answer_pending`` on tool calls) and keeps
        ``session_settings`` as stored.

        Example:
            >>> value = AgentEventStreamSnapshot(AgentSnapshot(messages=messages), "")
            >>> [sorted(message) for message in value.to_json()["snapshot"]["messages"]][0]
            ['created_at', 'outcome_check', 'role', 'sequence', 'text', 'tool_arguments',
             'tool_call_id', 'tool_name', 'tool_output', 'turn_id']
        """
        return {"snapshot": browser_snapshot_json(self.snapshot), "resume_token": self.resume_token}


async def read_agent_event_stream_snapshot(
    client: AsyncClient, flow: Flow[Any], session_id: str
) -> AgentEventStreamSnapshot:
    """Read session ``session_id``'s snapshot and the resume token of its event stream.

    Lists ``AgentEvents`` first and reads the snapshot second, so no event written meanwhile is
    lost to the browser (one may be replayed). Authorize the caller for ``session_id`` first.
    When the Dex Stream Store is disabled, the snapshot comes with an empty resume token. Only a
    session of ``flow``'s Flow type is read (one ``describe_flow`` call first).

    Args:
        client: An ``AsyncClient`` whose Registry holds ``flow``.
        flow: The session's ``AgentSessionFlow``.
        session_id: The session (Flow) ID.

    Raises:
        ConfigurationTypeError: When ``flow`` is not an ``AgentSessionFlow``.
        FlowNotFoundError: When no session has this ID.
        SessionFlowTypeError: When the session is of another Flow type (a
            ``FlowNotActiveOrNotFoundError``: answer it as a missing session).
        DexServiceError: When Dex refuses a read.

    Example:
        >>> import asyncio
        >>> from dex_agents.testing import in_process_worker, wait_for_agent_snapshot
        >>> async def snapshot_route_json() -> JsonObject:
        ...     async with in_process_worker([flow], server_address, tmp_path / "cache") as dex:
        ...         await dex.sessions(flow).start_session("snapshot-example", "Hello")
        ...         await wait_for_agent_snapshot(dex.sessions(flow), "snapshot-example",
        ...             lambda snapshot: snapshot if len(snapshot.messages) == 2 else None)
        ...         value = await read_agent_event_stream_snapshot(dex.client, flow, "snapshot-example")
        ...         return value.to_json()
        >>> data = asyncio.run(snapshot_route_json())
        >>> [message["text"] for message in data["snapshot"]["messages"]], data["resume_token"] != ""
        (['Hello', 'Hello'], True)
    """
    session_flow = require_agent_session_flow(flow)
    await require_session_of_flow(client, session_flow, session_id)
    events = session_flow.agent_events
    page: StreamMessagesPage[AgentEvent] | None
    try:
        page = await client.list_stream_messages(session_id, events, STREAM_LIST_PAGE_SIZE)
    except DexServiceError as error:
        _raise_unless_stream_store_disabled(error)
        page = None
    snapshot = await client.invoke_rpc(session_flow.get_agent_snapshot, session_id)
    if page is None:
        return AgentEventStreamSnapshot(snapshot, HEAD_OF_STREAM_TOKEN)
    token = resume_token_before_open_turns(page.messages, snapshot.state)
    while token is None and page.next_page_token:
        page = await client.list_stream_messages(
            session_id, events, STREAM_LIST_PAGE_SIZE, page.next_page_token
        )
        token = resume_token_before_open_turns(page.messages, snapshot.state)
    return AgentEventStreamSnapshot(snapshot, HEAD_OF_STREAM_TOKEN if token is None else token)


def read_agent_event_stream_snapshot_sync(
    client: Client, flow: Flow[Any], session_id: str
) -> AgentEventStreamSnapshot:
    """:func:`read_agent_event_stream_snapshot` with a synchronous ``Client`` (WSGI servers).

    Raises:
        ConfigurationTypeError: When ``flow`` is not an ``AgentSessionFlow``.
        FlowNotFoundError: When no session has this ID.
        SessionFlowTypeError: When the session is of another Flow type (a
            ``FlowNotActiveOrNotFoundError``: answer it as a missing session).
        DexServiceError: When Dex refuses a read.

    Example:
        The snapshot route of a WSGI application:

        >>> def snapshot_route(sync_client: Client, session_id: str) -> JsonObject:
        ...     return read_agent_event_stream_snapshot_sync(sync_client, flow, session_id).to_json()
    """
    session_flow = require_agent_session_flow(flow)
    require_session_of_flow_sync(client, session_flow, session_id)
    events = session_flow.agent_events
    page: StreamMessagesPage[AgentEvent] | None
    try:
        page = client.list_stream_messages(session_id, events, STREAM_LIST_PAGE_SIZE)
    except DexServiceError as error:
        _raise_unless_stream_store_disabled(error)
        page = None
    snapshot = client.invoke_rpc(session_flow.get_agent_snapshot, session_id)
    if page is None:
        return AgentEventStreamSnapshot(snapshot, HEAD_OF_STREAM_TOKEN)
    token = resume_token_before_open_turns(page.messages, snapshot.state)
    while token is None and page.next_page_token:
        page = client.list_stream_messages(
            session_id, events, STREAM_LIST_PAGE_SIZE, page.next_page_token
        )
        token = resume_token_before_open_turns(page.messages, snapshot.state)
    return AgentEventStreamSnapshot(snapshot, HEAD_OF_STREAM_TOKEN if token is None else token)


def _raise_unless_stream_store_disabled(error: DexServiceError) -> None:
    """Raise ``error`` unless Dex refused the listing because its Stream Store is disabled."""
    if not is_stream_store_disabled(error):
        raise error


def require_agent_session_flow(flow: Flow[Any]) -> AgentSessionFlow:
    """``flow`` itself, checked to be an ``AgentSessionFlow``.

    Raises:
        ConfigurationTypeError: When it is another Flow.
    """
    if not isinstance(flow, AgentSessionFlow):
        raise ConfigurationTypeError(
            f"flow must be an AgentSessionFlow, got {type(flow).__name__}: pass the session Flow "
            "registered with the client"
        )
    return flow
