"""How a turn-level call waits: one plan of reads, run by the async and the synchronous client.

The plan is a generator that yields what it needs next (the next event after a token, a page of
the turn's messages, or the snapshot) and receives the answer, so the waiting rules live once and
each client only does the I/O. It reads ``AgentEvents`` one message at a time with a server-side
long poll, so a turn costs one ``ReadStream`` per event and one read at the end, never a poll
loop. A turn that ended with ``turn_completed``, ``turn_cancelled`` or ``turn_steered`` ends with
the page of messages after the turn's first message (the clients read it from the window alone,
see :mod:`dex_agents._session.recent_messages`): those events say where the turn's messages end,
so the page shows whether the end's commit is visible, and it carries the turn's messages alone,
whatever the length of the session. A failed turn reads ``get_agent_state``
until the failure's commit is visible (``turn_failed`` does not say where the turn's messages
end; the state does), then the same page. An approval or question raised, a turn followed on
from a result that failed, and an idle long poll read the snapshot (the pending interrupts and
the tool call records are in it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeAlias

import grpc
from dex import DexServiceError, StreamMessage

from dex_agents._events import AgentEvent
from dex_agents._session.turn_results import (
    STREAM_POLL_SECONDS,
    TurnResult,
    TurnStatus,
    TurnTimeoutError,
    TurnTracker,
)
from dex_agents._values import (
    LIST_AGENT_MESSAGES_MAX_LIMIT,
    SNAPSHOT_MESSAGE_LIMIT,
    AgentMessage,
    AgentMessagesPage,
    AgentSnapshot,
    AgentState,
)
from dex_agents.exceptions import ConfigurationError, DexAgentsError

__all__ = [
    "NextEvent",
    "ReadMessages",
    "ReadSnapshot",
    "ReadState",
    "StreamStoreDisabledError",
    "TurnWaitPlan",
    "check_timeout",
    "raise_if_stream_store_disabled",
    "run_plan_async",
    "run_plan_sync",
    "turn_wait_plan",
]


class StreamStoreDisabledError(DexAgentsError):
    """The Dex server keeps no Stream messages, so a turn cannot be followed by its events."""


@dataclass(frozen=True)
class NextEvent:
    """The plan needs the next ``AgentEvents`` message after ``token`` (``None`` if none came).

    ``poll`` is the server-side long poll, whole seconds as Dex takes it; ``remaining`` is the
    time left, which an async read also enforces on its side.
    """

    token: str
    poll: timedelta
    remaining: float


@dataclass(frozen=True)
class ReadSnapshot:
    """The plan needs the session's snapshot."""


@dataclass(frozen=True)
class ReadState:
    """The plan needs the session's ``AgentState`` (``get_agent_state``)."""


@dataclass(frozen=True)
class ReadMessages:
    """The plan needs the ``list_agent_messages`` page after ``after_sequence`` (a client may read
    it from the window alone, see :mod:`dex_agents._session.recent_messages`)."""

    after_sequence: int
    limit: int = LIST_AGENT_MESSAGES_MAX_LIMIT


_RECHECK_POLL_SECONDS = 1.0
# Without the turn's first sequence (following a turn on from a result), the newest messages up
# to the end are read first; most turns fit, and a longer one is read again from its start.
_PROBE_MESSAGES = 16
_Request: TypeAlias = NextEvent | ReadSnapshot | ReadState | ReadMessages
_Answer: TypeAlias = (
    StreamMessage[AgentEvent] | AgentSnapshot | AgentState | AgentMessagesPage | None
)
TurnWaitPlan: TypeAlias = Generator[_Request, _Answer, TurnResult]
_MessagesRead: TypeAlias = Generator[_Request, _Answer, list[AgentMessage]]
_StateRead: TypeAlias = Generator[_Request, _Answer, int]


def check_timeout(timeout: float) -> None:
    """Refuse a timeout that is not a positive number of seconds.

    Raises:
        ConfigurationError: ``timeout`` is not positive.
    """
    if not timeout > 0:
        raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")


def turn_wait_plan(tracker: TurnTracker, token: str, timeout: float) -> TurnWaitPlan:
    """Follow ``tracker``'s turn from ``token`` until it ends, waits for a person, or times out.

    Raises:
        TurnTimeoutError: Neither happened within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    # An interrupt whose event came before the snapshot showed it pending (the Step's commit not
    # yet visible) is looked at again after a short poll, not after the usual one.
    unconfirmed_interrupt = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TurnTimeoutError(tracker.session_id, tracker.turn_id, token, timeout)
        longest = _RECHECK_POLL_SECONDS if unconfirmed_interrupt else STREAM_POLL_SECONDS
        poll = timedelta(seconds=math.ceil(min(remaining, longest)))
        message = yield NextEvent(token, poll, remaining)
        if message is None:
            # An idle long poll: the end event may have been dropped (Streams are best effort).
            unconfirmed_interrupt = False
            snapshot = yield ReadSnapshot()
            assert isinstance(snapshot, AgentSnapshot)
            tracker.check_ended(snapshot)
            if tracker.done:
                return tracker.result(snapshot, token)
            continue
        assert isinstance(message, StreamMessage)
        token = message.resume_token
        raised = tracker.observe(message.value)
        if tracker.done and tracker.end_sequence is not None:
            messages = yield from _turn_messages(tracker, tracker.end_sequence, deadline)
            return tracker.result_of_messages(messages, token)
        if tracker.status is TurnStatus.FAILED and tracker.start_sequence is not None:
            # turn_failed does not say where the turn's messages end: the state does, once the
            # failure's commit is visible.
            end = yield from _failed_turn_end(tracker, deadline)
            messages = yield from _turn_messages(tracker, end, deadline)
            return tracker.result_of_messages(messages, token)
        if raised or tracker.done:
            snapshot = yield ReadSnapshot()
            assert isinstance(snapshot, AgentSnapshot)
            if raised:
                # Answered already (a later event says so), or not committed yet, when it is not
                # pending in the snapshot.
                tracker.check_waiting(snapshot)
                unconfirmed_interrupt = not tracker.done
            if tracker.done:
                while _end_not_committed(tracker, snapshot) and time.monotonic() < deadline:
                    snapshot = yield ReadSnapshot()
                    assert isinstance(snapshot, AgentSnapshot)
                return tracker.result(snapshot, token)


def _failed_turn_end(tracker: TurnTracker, deadline: float) -> _StateRead:
    """The session's newest sequence once the failed turn is no longer active."""
    while True:
        state = yield ReadState()
        assert isinstance(state, AgentState)
        if state.active_turn_id != tracker.turn_id or time.monotonic() >= deadline:
            return state.last_message_sequence


def _turn_messages(tracker: TurnTracker, end: int, deadline: float) -> _MessagesRead:
    """Read the ended turn's stored messages up to ``end``, its end's sequence.

    The newest ``SNAPSHOT_MESSAGE_LIMIT`` messages up to ``end`` at most, as a snapshot read at
    the end's commit holds them. A Step writes its events while it runs and commits its messages
    when it finishes, so a page read right after the end event can stop short of ``end``: read
    on after its newest message until the commit is visible (or the wait's time is up).
    """
    lowest = max(end - SNAPSHOT_MESSAGE_LIMIT, 0)
    start = tracker.start_sequence
    first_after = (
        max(start - 1, lowest) if start is not None else max(end - _PROBE_MESSAGES, lowest)
    )
    messages = yield from _messages_up_to(end, first_after, deadline)
    if (
        start is None
        and first_after > lowest
        and _starts_inside_turn(messages, first_after, tracker)
    ):
        messages = yield from _messages_up_to(end, lowest, deadline)
    return messages


def _messages_up_to(end: int, after: int, deadline: float) -> _MessagesRead:
    messages: list[AgentMessage] = []
    while True:
        page = yield ReadMessages(after)
        assert isinstance(page, AgentMessagesPage)
        messages.extend(page.messages)
        newest = page.messages[-1].sequence if page.messages else after
        deleted_before = page.deleted_before_sequence or 0
        if newest >= end or deleted_before > end:
            return messages
        if page.next_after_sequence is None and time.monotonic() >= deadline:
            return messages
        # More pages follow, or the end's commit is not visible yet: read on after the newest.
        after = max(newest, after)


def _starts_inside_turn(messages: list[AgentMessage], after: int, tracker: TurnTracker) -> bool:
    """Whether the turn may have messages before ``after``: the first one read is the turn's."""
    return (
        bool(messages)
        and messages[0].sequence == after + 1
        and (messages[0].turn_id == tracker.turn_id)
    )


def _end_not_committed(tracker: TurnTracker, snapshot: AgentSnapshot) -> bool:
    """Whether the snapshot predates the commit of the turn's end event's Step.

    A Step writes its events while it runs and commits the session's state when it finishes, so
    a snapshot read right after ``turn_ended`` can still show the turn active, without its last
    message; read it again until the commit is visible.
    """
    if tracker.status not in _ENDED:
        return False  # a turn waiting for a person is still active, rightly
    state = snapshot.state
    return state is not None and state.active_turn_id == tracker.turn_id


_ENDED = frozenset({TurnStatus.COMPLETED, TurnStatus.FAILED, TurnStatus.CANCELLED})


async def run_plan_async(
    plan: TurnWaitPlan,
    next_event: Callable[[NextEvent], Awaitable[StreamMessage[AgentEvent] | None]],
    snapshot: Callable[[], Awaitable[AgentSnapshot]],
    messages: Callable[[ReadMessages], Awaitable[AgentMessagesPage]],
    state: Callable[[], Awaitable[AgentState]],
) -> TurnResult:
    """Run ``plan`` with the async client's reads."""
    request = next(plan)
    while True:
        answer: _Answer
        if isinstance(request, NextEvent):
            answer = await next_event(request)
        elif isinstance(request, ReadMessages):
            answer = await messages(request)
        elif isinstance(request, ReadState):
            answer = await state()
        else:
            answer = await snapshot()
        try:
            request = plan.send(answer)
        except StopIteration as finished:
            return _result(finished)


def run_plan_sync(
    plan: TurnWaitPlan,
    next_event: Callable[[NextEvent], StreamMessage[AgentEvent] | None],
    snapshot: Callable[[], AgentSnapshot],
    messages: Callable[[ReadMessages], AgentMessagesPage],
    state: Callable[[], AgentState],
) -> TurnResult:
    """Run ``plan`` with the synchronous client's reads."""
    request = next(plan)
    while True:
        answer: _Answer
        if isinstance(request, NextEvent):
            answer = next_event(request)
        elif isinstance(request, ReadMessages):
            answer = messages(request)
        elif isinstance(request, ReadState):
            answer = state()
        else:
            answer = snapshot()
        try:
            request = plan.send(answer)
        except StopIteration as finished:
            return _result(finished)


def raise_if_stream_store_disabled(error: DexServiceError, session_id: str) -> None:
    """Turn Dex's answer for a disabled Stream Store into a clear error.

    With ``streamStore.backend: disabled`` every Stream read answers ``FAILED_PRECONDITION``
    before it looks at the token (Stream RPCs need no Flow, so the code means nothing else).

    Raises:
        StreamStoreDisabledError: ``error`` is that answer.
    """
    if error.code is grpc.StatusCode.FAILED_PRECONDITION:
        raise StreamStoreDisabledError(
            f"cannot follow session {session_id}'s turn: the Dex server keeps no Stream messages "
            "(its Stream Store is disabled), and the turn-level calls read AgentEvents. Poll "
            "get_agent_snapshot instead, or enable the Stream Store."
        ) from error


def _result(finished: StopIteration) -> TurnResult:
    result = finished.value
    assert isinstance(result, TurnResult)
    return result
