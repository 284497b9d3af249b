"""The ADK session service of one ``RunModel``: the stored history, lent to ADK without copies.

ADK's ``InMemorySessionService`` protects a long-lived session from its callers: every
``get_session`` deep-copies every event, and every ``append_event`` first compares the event with
each held event of the same ``id``. A ``RunModel`` needs neither: it builds a session from the
stored messages, ADK's ``Runner`` reads it once and appends the one model response, and the
session is dropped when the Step ends. Both costs grew with the transcript (one deep copy of the
whole history per model call, and a linear duplicate check per history event, so quadratic per
model call), and a Worker paid them for every model call where ADK in process pays the copy once
per ``run_async``.

What the service still gives ADK: the session's state as ``InMemorySessionService`` would hold it
after appending the same events (every non-temporary ``state_delta`` applied in order, ``app:`` and
``user:`` keys included), ``get_session``'s ``num_recent_events`` and ``after_timestamp``, and a
session object of its own whose ``events`` list and (deep-copied) ``state`` the caller may change.

The events themselves are shared, not copied: they are the events the process keeps per stored
item. So the service trims an event's temporary state (``temp:`` keys of
``actions.state_delta``, which ADK's services reassign in place) on a copy of that event, and only
when it has such keys. ADK copies an event before it edits one of the session's (its contents
builder and function-response rearranger copy on write), and ``test_google_adk_model_calls.py``
checks that model calls leave every kept event as it was.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterable
from typing import Any

from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session, State
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse

__all__ = ["StepSessionService"]


class StepSessionService(BaseSessionService):
    """One ADK session rebuilt from stored events, for one ``Runner`` run.

    Example:
        >>> service = StepSessionService("app", "user", "session-1", [])
    """

    def __init__(
        self, app_name: str, user_id: str, session_id: str, history: Iterable[Event]
    ) -> None:
        session = Session(
            id=session_id, app_name=app_name, user_id=user_id, last_update_time=time.time()
        )
        for event in history:
            self._commit(session, event)
        self._sessions: dict[tuple[str, str, str], Session] = {
            (app_name, user_id, session_id): session
        }

    def _commit(self, session: Session, event: Event) -> None:
        # As InMemorySessionService.append_event, without its duplicate check: the history holds
        # each stored event once. Temporary state lives only for the invocation that wrote it.
        if event.partial:
            return
        event = _without_temp_state(event)
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """A new empty session (ADK's ``Runner`` asks only when the session is missing)."""
        session = Session(
            id=session_id or str(uuid.uuid4()),  # as InMemorySessionService names one
            app_name=app_name,
            user_id=user_id,
            state=dict(state or {}),
            last_update_time=time.time(),
        )
        self._sessions[(app_name, user_id, session.id)] = session
        return _lent(session, [])

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its own event list and state; the events themselves shared."""
        session = self._sessions.get((app_name, user_id, session_id))
        if session is None:
            return None
        return _lent(session, _selected(session.events, config))

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The held sessions of ``app_name`` (and ``user_id``), without their events."""
        return ListSessionsResponse(
            sessions=[
                _lent(session, [])
                for (app, user, _), session in self._sessions.items()
                if app == app_name and user_id in (None, user)
            ]
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Forgets the session."""
        self._sessions.pop((app_name, user_id, session_id), None)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Appends to the caller's session object and to the held session."""
        if event.partial:
            return event
        event = await super().append_event(session, event)
        session.last_update_time = event.timestamp
        held = self._sessions.get((session.app_name, session.user_id, session.id))
        if held is not None and held is not session:
            self._commit(held, event)
        return event


def _lent(session: Session, events: list[Event]) -> Session:
    """``session`` with ``events`` and a copy of its state, as the caller's own object."""
    # State is small, and a callback may change a value in place: copied as ADK copies it.
    return session.model_copy(update={"events": events, "state": copy.deepcopy(session.state)})


def _selected(events: list[Event], config: GetSessionConfig | None) -> list[Event]:
    """The events ``config`` asks for, as ``InMemorySessionService.get_session`` selects them."""
    if config is None:
        return list(events)
    selected = events
    if config.num_recent_events is not None:
        selected = selected[-config.num_recent_events :] if config.num_recent_events else []
    if config.after_timestamp is not None:
        start = len(selected)
        while start > 0 and selected[start - 1].timestamp >= config.after_timestamp:
            start -= 1
        selected = selected[start:]
    return list(selected)


def _without_temp_state(event: Event) -> Event:
    """``event`` without its temporary state delta, as ADK's ``_trim_temp_delta_state`` leaves it,
    but on a copy: the event may be one the process keeps for every read of its stored item."""
    delta = event.actions.state_delta
    if not any(key.startswith(State.TEMP_PREFIX) for key in delta):
        return event
    kept = {key: value for key, value in delta.items() if not key.startswith(State.TEMP_PREFIX)}
    actions = event.actions.model_copy(update={"state_delta": kept})
    return event.model_copy(update={"actions": actions})
