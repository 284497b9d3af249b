"""The session service of one ``RunModel``: what ADK's in-memory service would hold, lent.

Each test builds the same history in ADK's own ``InMemorySessionService`` and in
``StepSessionService`` and compares what ADK's ``Runner`` would read from both.
"""

from __future__ import annotations

from dex_agents_google_adk._step_session_service import StepSessionService
from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

_KEY = {"app_name": "app", "user_id": "u", "session_id": "s"}


def _event(text: str, timestamp: float, **state_delta: object) -> Event:
    return Event(
        author="agent",
        invocation_id="e-1",
        timestamp=timestamp,
        content=types.Content(role="model", parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=dict(state_delta)),
    )


def _history() -> list[Event]:
    return [
        _event("one", 10.0, plain=1, **{"temp:scratch": 2, "app:theme": "dark"}),
        _event("two", 20.0, **{"user:lang": "en", "plain": 3}),
        _event("three", 30.0, nested={"items": [1]}),
    ]


async def _in_memory(history: list[Event]) -> InMemorySessionService:
    service = InMemorySessionService()
    session = await service.create_session(**_KEY)
    for event in history:
        await service.append_event(session, event)
    return service


async def _read(
    service: InMemorySessionService | StepSessionService, config: GetSessionConfig | None = None
) -> Session:
    session = await service.get_session(**_KEY, config=config)
    assert session is not None
    return session


async def test_state_is_what_adks_in_memory_service_holds_after_the_same_events() -> None:
    theirs = await _read(await _in_memory(_history()))
    ours = await _read(StepSessionService("app", "u", "s", _history()))

    assert (
        ours.state
        == theirs.state
        == {
            "plain": 3,
            "app:theme": "dark",
            "user:lang": "en",
            "nested": {"items": [1]},
        }
    )
    assert ours.last_update_time == theirs.last_update_time == 30.0


async def test_get_session_selects_events_as_adks_in_memory_service_does() -> None:
    theirs = await _in_memory(_history())
    ours = StepSessionService("app", "u", "s", _history())
    configs = [
        None,
        GetSessionConfig(num_recent_events=2),
        GetSessionConfig(num_recent_events=0),
        GetSessionConfig(after_timestamp=20.0),
        GetSessionConfig(after_timestamp=99.0),
        GetSessionConfig(num_recent_events=2, after_timestamp=30.0),
    ]
    for config in configs:
        expected = [e.content.parts[0].text for e in (await _read(theirs, config)).events]  # type: ignore[union-attr,index]
        actual = [e.content.parts[0].text for e in (await _read(ours, config)).events]  # type: ignore[union-attr,index]
        assert actual == expected, config


async def test_a_lent_session_is_the_callers_own_but_its_events_are_the_history() -> None:
    history = _history()
    service = StepSessionService("app", "u", "s", history)

    lent = await _read(service)
    lent.events.append(_event("four", 40.0))
    lent.state["plain"] = 99
    lent.state["nested"]["items"].append(2)
    again = await _read(service)

    assert [e.content.parts[0].text for e in again.events] == ["one", "two", "three"]  # type: ignore[union-attr,index]
    assert again.state["plain"] == 3
    assert again.state["nested"] == {"items": [1]}
    # The point of the service: no copy of an event, however long the history; only an event
    # with temp state is a copy without it, and the given event keeps it (reads share it).
    assert [a is b for a, b in zip(again.events, history, strict=True)] == [False, True, True]
    assert again.events[0].actions.state_delta == {"plain": 1, "app:theme": "dark"}
    assert history[0].actions.state_delta == {"plain": 1, "temp:scratch": 2, "app:theme": "dark"}
    assert again.events[0].model_dump(exclude={"actions"}) == history[0].model_dump(
        exclude={"actions"}
    )


async def test_an_appended_event_reaches_the_held_session_without_its_temp_state() -> None:
    service = StepSessionService("app", "u", "s", _history())
    lent = await _read(service)

    await service.append_event(lent, _event("four", 40.0, **{"temp:turn": 1, "plain": 4}))
    await service.append_event(lent, Event(author="agent", partial=True))
    held = await _read(service)

    assert lent.state["temp:turn"] == 1
    assert "temp:turn" not in held.state
    assert held.state["plain"] == lent.state["plain"] == 4
    assert [e.content.parts[0].text for e in held.events] == ["one", "two", "three", "four"]  # type: ignore[union-attr,index]
    assert held.last_update_time == 40.0


async def test_an_unknown_session_is_none_and_a_created_one_is_empty() -> None:
    service = StepSessionService("app", "u", "s", _history())

    assert await service.get_session(app_name="app", user_id="u", session_id="other") is None
    created = await service.create_session(app_name="app", user_id="u", session_id="other")
    listed = await service.list_sessions(app_name="app", user_id="u")
    await service.delete_session(**_KEY)

    assert created.events == []
    unnamed = await service.create_session(app_name="app", user_id="u")
    assert unnamed.id not in {"s", "other"}
    assert (
        await service.get_session(app_name="app", user_id="u", session_id=unnamed.id)
    ) is not None
    assert sorted(session.id for session in listed.sessions) == ["other", "s"]
    assert all(session.events == [] for session in listed.sessions)
    assert await service.get_session(**_KEY) is None
